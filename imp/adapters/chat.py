"""The Chat adapter: fields labelled with `[[ ## name ## ]]` markers."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from imp.adapters._fields import field_descriptions, placeholder
from imp.adapters._registry import register_adapter
from imp.adapters._split import FieldSplitter, Splitter, with_plain_text
from imp.adapters.base import DEFAULT_AGENT_LINE, Adapter, FormatOptions, loop_lines, objective
from imp.adapters.json import JSONAdapter
from imp.signature import Field, Signature
from imp.values import format_requirement, render_value

__all__ = ["ChatAdapter", "field_descriptions", "split_sections"]

_STRUCTURE_LEAD = "All interactions will be structured in the following way, with the appropriate values filled in."
_INPUTS_LEAD = "Inputs will be structured in the following way, with the appropriate values filled in."


def _sections_text(fields: Mapping[str, Field]) -> str:
    return "\n\n".join(f"[[ ## {name} ## ]]\n{placeholder(f)}" for name, f in fields.items())


_SECTION_LINE = re.compile(r"^[^\S\n]*\[\[ ## (\w+) ## \]\]([^\n]*)$", re.MULTILINE)


def split_sections(text: str) -> list[tuple[str | None, str]]:
    """Split a reply on marker lines: (field name or None for text before any marker, body).

    A line whose stripped text starts with `[[ ## name ## ]]` opens a section; the rest of that
    line is the section's first line.
    """
    if "\r" in text:
        text = text.replace("\r\n", "\n").replace("\r", "\n")
    # One C-level split: [text before any marker, name, rest of its line, body, name, ...].
    parts = _SECTION_LINE.split(text)
    sections: list[tuple[str | None, str]] = [(None, parts[0].strip())]
    for i in range(1, len(parts), 3):
        first = parts[i + 1].strip()
        body = parts[i + 2]
        sections.append((parts[i], f"{first}\n{body[1:]}".strip() if first else body.strip()))
    return sections


class ChatAdapter(Adapter):
    """The default dialect: `[[ ## field ## ]]` sections, ending with `[[ ## completed ## ]]`."""

    name = "ChatAdapter"

    def default_system(self, signature: Signature, options: Mapping[str, Any]) -> str:
        guidance = options.get("guidance")
        agent_line = options.get("agent_line", DEFAULT_AGENT_LINE)
        instructions = "\n".join([signature.instructions, *loop_lines(guidance, agent_line)])
        if guidance is not None and guidance.text_answer:
            return (
                f"Your input fields are:\n{field_descriptions(signature.inputs)}\n"
                f"{_INPUTS_LEAD}\n\n{_sections_text(signature.inputs)}\n\n"
                f"{objective(instructions)}"
            )
        description = (
            f"Your input fields are:\n{field_descriptions(signature.inputs)}\n"
            f"Your output fields are:\n{field_descriptions(signature.outputs)}"
        )
        structure = "\n\n".join(
            [
                _STRUCTURE_LEAD,
                _sections_text(signature.inputs),
                _sections_text(signature.outputs),
                "[[ ## completed ## ]]\n",
            ]
        ).strip()
        return f"{description}\n{structure}\n{objective(instructions)}"

    def system_text(self, signature: Signature, opts: FormatOptions) -> str:
        if opts.system_renderer is None and opts.guidance is None and opts.agent_line == DEFAULT_AGENT_LINE:
            return self._texts(signature)[0]
        return super().system_text(signature, opts)

    def input_section(self, field: Field, formatted_value: str) -> str:
        return f"[[ ## {field.name} ## ]]\n{formatted_value}"

    def default_outputs(self, signature: Signature, outputs: Mapping[str, object], missing_message: str) -> str:
        sections = [
            f"[[ ## {name} ## ]]\n{render_value(outputs[name], f) if name in outputs else missing_message}"
            for name, f in signature.outputs.items()
        ]
        return "\n\n".join(sections).strip() + "\n\n[[ ## completed ## ]]\n"

    def response_instruction(self, signature: Signature) -> str | None:
        return self._texts(signature)[1]

    def _texts(self, signature: Signature) -> tuple[str, str]:
        """The default system message and the response instruction: they depend on the signature
        alone, so each signature keeps them (one dict lookup on every request after the first)."""
        texts: tuple[str, str] | None = signature.derived.get(type(self))
        if texts is None:
            texts = (self.default_system(signature, {}), self._response_instruction(signature))
            signature.derived[type(self)] = texts
        return texts

    def _response_instruction(self, signature: Signature) -> str:
        parts = []
        for name, f in signature.outputs.items():
            requirement = format_requirement(f)
            parts.append(f"`[[ ## {name} ## ]]`" + (f" (must be formatted as {requirement})" if requirement else ""))
        return (
            "Respond with the corresponding output fields, starting with the field "
            + ", then ".join(parts)
            + ", and then ending with the marker for `[[ ## completed ## ]]`."
        )

    def parse_text(self, signature: Signature, text: str) -> dict[str, Any]:
        plain = self.text_field_reply(signature, text) if "text_field" in signature.metadata else None
        if plain is not None:
            return plain
        found: dict[str, str] = {}
        for name, body in split_sections(text):
            if name is not None and name in signature.outputs and name not in found:
                found[name] = body
        return self.complete(signature, found, completion=text)

    def field_splitter(self, signature: Signature) -> Splitter:
        names = [*signature.outputs, "completed"]
        marker = re.compile(r"\[\[ ## (" + "|".join(re.escape(n) for n in names) + r") ## \]\][^\S\n]*")

        def find_open(buf: str, pos: int) -> tuple[str, int, int] | None:
            while (match := marker.search(buf, pos)) is not None:
                if match.group(1) != "completed":
                    return match.group(1), match.start(), match.end()
                pos = match.end()
            return None

        def find_close(buf: str, pos: int, field: str) -> tuple[int, int] | None:
            match = marker.search(buf, pos)
            return (match.start(), match.start()) if match is not None else None

        texts = tuple(f"[[ ## {n} ## ]]" for n in names)
        return with_plain_text(FieldSplitter(find_open, find_close, lambda field: texts), signature, "[")

    @property
    def fallback(self) -> Adapter | None:
        return JSONAdapter()


register_adapter(ChatAdapter, saved="ChatAdapter", option="chat")
