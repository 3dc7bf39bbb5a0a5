"""The XML adapter: fields in tags, nested values as nested tags, read back safely."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

import pydantic
from pydantic_core import PydanticSerializationError, to_jsonable_python

from imp._json import check_size
from imp.adapters._fields import field_descriptions
from imp.adapters._registry import register_adapter
from imp.adapters._split import FieldSplitter, Splitter, with_plain_text
from imp.adapters._xml_values import (
    Budget,
    Tags,
    element_bounds,
    escape,
    read_value,
    skeleton,
    takes_tags,
    to_xml,
    unescape,
)
from imp.adapters.base import DEFAULT_AGENT_LINE, Adapter, loop_lines, objective
from imp.adapters.json import JSONAdapter
from imp.errors import AdapterParseError
from imp.signature import Field, Signature
from imp.values import coerce_text, coerce_value, render_value, value_note

__all__ = ["XMLAdapter"]

_FORBIDDEN = re.compile(r"<!DOCTYPE|<!ENTITY|<\?xml", re.IGNORECASE)


class XMLAdapter(Adapter):
    """Fields in `<name>...</name>` tags; lists as `<item>` children, objects as child tags."""

    name = "XMLAdapter"

    def default_system(self, signature: Signature, options: Mapping[str, Any]) -> str:
        agent_line = options.get("agent_line", DEFAULT_AGENT_LINE)
        instructions = "\n".join([signature.instructions, *loop_lines(options.get("guidance"), agent_line)])
        description = (
            f"Your input fields are:\n{field_descriptions(signature.inputs)}\n"
            f"Your output fields are:\n{field_descriptions(signature.outputs)}"
        )
        sections = [f"<{n}>\n{{{n}}}\n</{n}>" for n in signature.inputs]
        for name, f in signature.outputs.items():
            note = value_note(f, by_alias=False)
            # A structured value's nested tags in place of the placeholder, as DSPy shows them.
            layout = skeleton(f.annotation) or f"{{{name}}}"
            sections.append(
                f"<{name}>\n{layout}"
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

    def field_section(self, name: str, text: str) -> str:
        return f"<{name}>\n{text}\n</{name}>"

    def default_outputs(self, signature: Signature, outputs: Mapping[str, object], missing_message: str) -> str:
        parts = []
        for name in signature.outputs:
            if name not in outputs:
                body = escape(missing_message)
            else:
                field = signature.outputs[name]
                value = _tag_data(field, outputs[name]) if takes_tags(field.annotation) else outputs[name]
                value = to_jsonable_python(value)
                body = to_xml(value) if isinstance(value, dict | list) else escape(render_value(outputs[name]))
            parts.append(f"<{name}>\n{body}\n</{name}>")
        return "\n\n".join(parts)

    def response_instruction(self, signature: Signature) -> str | None:
        tags = ", then ".join(f"`<{n}>`" for n in signature.outputs)
        text = f"Respond with the corresponding output fields wrapped in XML tags {tags}."
        nested = {n: skeleton(f.annotation) for n, f in signature.outputs.items() if takes_tags(f.annotation)}
        if nested:
            text += " Use nested tags for structured values: `<item>` for each list item, a tag per key for objects"
            shown = [f"<{n}>{layout}</{n}>" for n, layout in nested.items() if layout]
            text += (": " + " ".join(shown) + ".") if shown else "."
        return text

    def parse_text(self, signature: Signature, text: str) -> dict[str, Any]:
        try:
            check_size(text, "XML")
        except ValueError as exc:
            raise AdapterParseError(str(exc), adapter=self.name, completion=text) from None
        plain = self.text_field_reply(signature, text)
        if plain is not None:
            return plain
        if _FORBIDDEN.search(text):
            raise AdapterParseError(
                "XML declarations, doctypes, and entities are not allowed", adapter=self.name, completion=text
            )
        found: dict[str, Any] = {}
        budget = Budget()
        try:
            tags = Tags.read(text, budget)
            for name, f in signature.outputs.items():
                bounds = element_bounds(text, name, tags=tags)
                if bounds is None:
                    continue
                inner = text[bounds[0] : bounds[1]]
                if takes_tags(f.annotation):
                    found[name] = read_value(inner, f.annotation, budget)
                else:
                    found[name] = unescape(inner.strip())
        except ValueError as exc:
            raise AdapterParseError(str(exc), adapter=self.name, completion=text) from None
        return self.complete(signature, found, completion=text, coerce=_coerce)

    def field_splitter(self, signature: Signature) -> Splitter:
        names = list(signature.outputs)
        opening = re.compile(r"<(" + "|".join(re.escape(n) for n in names) + r")(\s[^<>]*)?>")

        def find_open(buf: str, pos: int) -> tuple[str, int, int] | None:
            match = opening.search(buf, pos)
            return (match.group(1), match.start(), match.end()) if match is not None else None

        def find_close(buf: str, pos: int, field: str) -> tuple[int, int] | None:
            match = re.compile(rf"</{re.escape(field)}\s*>").search(buf, pos)
            return (match.start(), match.end()) if match is not None else None

        opens = tuple(f"<{n}>" for n in names) + tuple(f"<{n} " for n in names)

        def markers(field: str) -> tuple[str, ...]:
            return (*opens, f"</{field}>", f"</{field} >") if field else (*opens, *(f"</{n} >" for n in names))

        return with_plain_text(FieldSplitter(find_open, find_close, markers, _decode), signature, "<")

    def value_form(self, field: Field) -> Literal["json", "tags"]:
        return "tags" if takes_tags(field.annotation) else "json"

    def field_value(self, field: Field, text: str) -> Any:
        if takes_tags(field.annotation):
            return _coerce(field, read_value(text, field.annotation, Budget()))
        return coerce_text(field, text)

    @property
    def fallback(self) -> Adapter | None:
        return JSONAdapter()


_ENTITIES = {"&lt;": "<", "&gt;": ">", "&amp;": "&", "&quot;": '"', "&apos;": "'"}
_ENTITY = re.compile("|".join(re.escape(e) for e in _ENTITIES))


def _decode(text: str) -> str:
    """A streamed piece of a text value with XML's five entities decoded."""
    return _ENTITY.sub(lambda m: _ENTITIES[m.group(0)], text)


def _tag_data(field: Field, value: object) -> Any:
    """A structured value as JSON-like data keyed by field names, as DSPy writes it: a pydantic
    alias need not be an XML name (`postal code`), a field name always is; reading maps it back.
    A value that does not validate (a demo's partial object) is written as it was given."""
    adapter = field.type_adapter
    try:
        return adapter.dump_python(adapter.validate_python(value), mode="json", by_alias=False)
    except (pydantic.ValidationError, PydanticSerializationError, TypeError, ValueError):
        return value


def _coerce(field: Field, value: object) -> Any:
    if isinstance(value, str):
        return coerce_text(field, value)
    if value is None and not field.optional:
        return coerce_text(field, "")
    return coerce_value(field, value)


register_adapter(XMLAdapter, saved="XMLAdapter", option="xml")
