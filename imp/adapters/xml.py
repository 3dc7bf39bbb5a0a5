"""The XML adapter: fields in tags, nested values as nested tags, read back safely."""

from __future__ import annotations

import re
import typing
from collections.abc import Mapping
from typing import Any

import pydantic
from pydantic_core import to_jsonable_python

from imp._annotation import base_annotation
from imp.adapters._fields import field_descriptions
from imp.adapters.base import DEFAULT_AGENT_LINE, Adapter, guidance_lines, objective
from imp.adapters.json import JSONAdapter
from imp.errors import AdapterParseError
from imp.signature import Field, Signature
from imp.values import coerce_text, coerce_value, load_json, render_value, value_note

__all__ = ["XMLAdapter"]

MAX_REPLY_CHARS = 1_000_000
MAX_DEPTH = 64
MAX_ELEMENTS = 10_000
_FORBIDDEN = re.compile(r"<!DOCTYPE|<!ENTITY|<\?xml", re.IGNORECASE)
_OPEN = re.compile(r"<([A-Za-z_][\w.-]*)(?:\s[^<>]*)?>")
_ENTITIES = {"&lt;": "<", "&gt;": ">", "&quot;": '"', "&apos;": "'", "&amp;": "&"}
_ENTITY = re.compile("|".join(map(re.escape, _ENTITIES)))


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _unescape(text: str) -> str:
    return _ENTITY.sub(lambda m: _ENTITIES[m.group(0)], text)


class _Budget:
    def __init__(self) -> None:
        self.elements = 0

    def spend(self) -> None:
        self.elements += 1
        if self.elements > MAX_ELEMENTS:
            raise ValueError(f"more than {MAX_ELEMENTS} XML elements")


def _elements(text: str, budget: _Budget) -> list[tuple[str, str]]:
    """Top-level `<tag>inner</tag>` elements of text, in order (text between them ignored)."""
    found: list[tuple[str, str]] = []
    pos = 0
    while True:
        match = _OPEN.search(text, pos)
        if match is None:
            return found
        tag = match.group(1)
        close = _matching_close(text, tag, match.end())
        if close is None:
            pos = match.end()
            continue
        budget.spend()
        found.append((tag, text[match.end() : close]))
        pos = close + len(tag) + 3


def _matching_close(text: str, tag: str, start: int) -> int | None:
    opening = re.compile(rf"<{re.escape(tag)}(?:\s[^<>]*)?>|</{re.escape(tag)}\s*>")
    depth = 1
    for match in opening.finditer(text, start):
        depth += -1 if match.group(0).startswith("</") else 1
        if depth == 0:
            return match.start()
    return None


def _to_value(inner: str, depth: int, budget: _Budget) -> Any:
    if depth > MAX_DEPTH:
        raise ValueError(f"XML nested deeper than {MAX_DEPTH}")
    children = _elements(inner, budget)
    if not children:
        return _unescape(inner.strip())
    if all(tag == "item" for tag, _ in children):
        return [_to_value(body, depth + 1, budget) for _, body in children]
    out: dict[str, Any] = {}
    for tag, body in children:
        out.setdefault(tag, _to_value(body, depth + 1, budget))
    return out


def _structured(annotation: Any) -> bool:
    annotation = base_annotation(annotation)
    origin = typing.get_origin(annotation)
    return (
        origin in (list, dict)
        or annotation in (list, dict)
        or (isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel))
    )


def _to_xml(value: Any, indent: str = "") -> str:
    if isinstance(value, Mapping):
        return "\n".join(f"{indent}<{k}>{_nested(v, indent)}</{k}>" for k, v in value.items())
    if isinstance(value, list | tuple):
        return "\n".join(f"{indent}<item>{_nested(v, indent)}</item>" for v in value)
    return _escape(render_value(value))


def _nested(value: Any, indent: str) -> str:
    if isinstance(value, Mapping | list | tuple):
        return "\n" + _to_xml(value, indent + "  ") + "\n" + indent
    return _escape(render_value(value))


class XMLAdapter(Adapter):
    """Fields in `<name>...</name>` tags; lists as `<item>` children, objects as child tags."""

    name = "XMLAdapter"

    def default_system(self, signature: Signature, options: Mapping[str, Any]) -> str:
        agent_line = options.get("agent_line", DEFAULT_AGENT_LINE)
        instructions = "\n".join(
            [signature.instructions, *guidance_lines(signature, options.get("guidance"), agent_line)]
        )
        description = (
            f"Your input fields are:\n{field_descriptions(signature.inputs)}\n"
            f"Your output fields are:\n{field_descriptions(signature.outputs)}"
        )
        sections = [f"<{n}>\n{{{n}}}\n</{n}>" for n in signature.inputs]
        for name, f in signature.outputs.items():
            note = value_note(f)
            sections.append(
                f"<{name}>\n{{{name}}}"
                + (f"        # note: the value you produce {note}" if note else "")
                + f"\n</{name}>"
            )
        structure = "\n\n".join(
            [
                "All interactions will be structured in the following way, with the appropriate values filled in.",
                *sections,
            ]
        )
        return f"{description}\n{structure}\n{objective(instructions)}"

    def input_section(self, field: Field, formatted_value: str) -> str:
        return f"<{field.name}>\n{formatted_value}\n</{field.name}>"

    def default_outputs(self, signature: Signature, outputs: Mapping[str, Any], missing_message: str) -> str:
        parts = []
        for name in signature.outputs:
            if name not in outputs:
                body = _escape(missing_message)
            else:
                value = to_jsonable_python(outputs[name])
                body = _to_xml(value) if isinstance(value, dict | list) else _escape(render_value(outputs[name]))
            parts.append(f"<{name}>\n{body}\n</{name}>")
        return "\n\n".join(parts)

    def response_instruction(self, signature: Signature) -> str | None:
        tags = ", then ".join(f"`<{n}>`" for n in signature.outputs)
        text = f"Respond with the corresponding output fields wrapped in XML tags {tags}."
        nested = [n for n, f in signature.outputs.items() if _structured(f.annotation)]
        if nested:
            text += " Use nested tags for structured values: `<item>` for each list item, a tag per key for objects."
        return text

    def parse_text(self, signature: Signature, text: str) -> dict[str, Any]:
        plain = self.text_field_reply(signature, text)
        if plain is not None:
            return plain
        if _FORBIDDEN.search(text):
            raise AdapterParseError(
                "XML declarations, doctypes, and entities are not allowed", adapter=self.name, completion=text
            )
        if len(text) > MAX_REPLY_CHARS:
            raise AdapterParseError(
                f"the reply is longer than {MAX_REPLY_CHARS} characters", adapter=self.name, completion=text
            )
        found: dict[str, Any] = {}
        budget = _Budget()
        try:
            for name, f in signature.outputs.items():
                match = re.search(rf"<{re.escape(name)}(?:\s[^<>]*)?>", text)
                if match is None:
                    continue
                close = _matching_close(text, name, match.end())
                if close is None:
                    continue
                inner = text[match.end() : close]
                if _structured(f.annotation) and _elements(inner, budget):
                    found[name] = _to_value(inner, 1, budget)
                elif _structured(f.annotation):
                    found[name] = load_json(_unescape(inner.strip())) if inner.strip() else None
                else:
                    found[name] = _unescape(inner.strip())
        except ValueError as exc:
            raise AdapterParseError(str(exc), adapter=self.name, completion=text) from None
        return self.complete(signature, found, completion=text, coerce=_coerce)

    @property
    def fallback(self) -> Adapter | None:
        return JSONAdapter()


def _coerce(field: Field, value: Any) -> Any:
    if isinstance(value, str):
        return coerce_text(field, value)
    if value is None and not field.optional:
        return coerce_text(field, "")
    return coerce_value(field, value)
