"""The type expressions of the string signature form, in imp's plain words and Python's spelling."""

from __future__ import annotations

import ast
import datetime as _dt
import difflib
import enum
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union

from imp._annotation import history_type
from imp.errors import SignatureError
from imp.media import MEDIA_CLASSES

__all__ = ["parse_type", "type_to_text"]

_SIMPLE: dict[str, Any] = {
    "string": str,
    "str": str,
    "integer": int,
    "int": int,
    "float": float,
    "number": float,
    "boolean": bool,
    "bool": bool,
    "datetime": _dt.datetime,
    "object": dict[str, Any],
    "dict": dict[str, Any],
    "map": dict[str, Any],
    "array": list[Any],
    "list": list[Any],
    "List": list[Any],
    "Dict": dict[str, Any],
    "Any": Any,
    "any": Any,
    "None": type(None),
    "null": type(None),
    **MEDIA_CLASSES,
}
_GENERIC = {"array", "list", "List", "dict", "Dict", "Optional", "Union", "Literal", "enum", "class"}
_KNOWN = sorted({*_SIMPLE, *_GENERIC, "History"})
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class _Parser:
    """Recursive descent over one type expression; positions are offsets into the whole signature."""

    def __init__(self, text: str, source: str, offset: int, names: Mapping[str, object]) -> None:
        self.names = names
        self.text = text
        self.source = source
        self.offset = offset
        self.pos = 0

    def error(self, message: str, at: int | None = None) -> SignatureError:
        return SignatureError(message, text=self.source, position=self.offset + (self.pos if at is None else at))

    def skip(self) -> None:
        while self.pos < len(self.text) and self.text[self.pos].isspace():
            self.pos += 1

    def peek(self) -> str:
        self.skip()
        return self.text[self.pos] if self.pos < len(self.text) else ""

    def expect(self, char: str) -> None:
        if self.peek() != char:
            found = f"`{self.text[self.pos]}`" if self.pos < len(self.text) else "the end"
            raise self.error(f"expected `{char}` in the type, found {found}")
        self.pos += 1

    def parse(self) -> object:
        result = self.union()
        if self.peek():
            char = self.text[self.pos]
            hint = '; a description is written in double quotes: `name: type "description"`' if char == "'" else ""
            raise self.error(f"unexpected `{char}` after the type{hint}")
        return result

    def union(self) -> object:
        members = [self.primary()]
        while self.peek() == "|":
            self.pos += 1
            members.append(self.primary())
        return members[0] if len(members) == 1 else _union(members)

    def primary(self) -> object:
        self.skip()
        match = _NAME.match(self.text, self.pos)
        if not match:
            raise self.error("expected a type name")
        start, name = self.pos, match.group(0)
        self.pos = match.end()
        has_args = self.peek() == "["
        if name in ("enum", "class"):
            return self.enum_values(start)
        if name == "Literal":
            return self.literal_values(start)
        if name in self.names and not has_args:
            return self.names[name]
        if name == "History":
            history = history_type()
            if history is None:
                raise self.error("the `History` type is defined in `imp.history`; import imp first", start)
            return history
        if not has_args:
            if name in _SIMPLE:
                return _SIMPLE[name]
            if name in ("Optional", "Union"):
                raise self.error(f"`{name}` needs a type in brackets, e.g. `{name}[str]`", start)
            raise self.unknown(name, start)
        if name not in _GENERIC:
            raise self.unknown(name, start)
        self.expect("[")
        args = [self.union()]
        while self.peek() == ",":
            self.pos += 1
            args.append(self.union())
        self.expect("]")
        if name in ("array", "list", "List"):
            if len(args) != 1:
                raise self.error(f"`{name}[...]` takes one item type", start)
            return list[args[0]]  # type: ignore[valid-type]
        if name in ("dict", "Dict"):
            if len(args) != 2:
                raise self.error(f"`{name}[...]` takes a key type and a value type", start)
            return dict[args[0], args[1]]  # type: ignore[valid-type]
        if name == "Optional":
            if len(args) != 1:
                raise self.error("`Optional[...]` takes one type", start)
            return _union([args[0], type(None)])
        return _union(args)

    def bracket_body(self, start: int) -> tuple[str, int]:
        self.expect("[")
        depth, begin = 1, self.pos
        quote = ""
        while self.pos < len(self.text):
            char = self.text[self.pos]
            if quote:
                quote = "" if char == quote else quote
            elif char in "'\"":
                quote = char
            elif char == "[":
                depth += 1
            elif char == "]":
                depth -= 1
                if depth == 0:
                    body = self.text[begin : self.pos]
                    self.pos += 1
                    return body, begin
            self.pos += 1
        raise self.error("`[` is never closed", start)

    def enum_values(self, start: int) -> object:
        if self.peek() != "[":
            raise self.error("`enum` lists its values in brackets, e.g. `enum[atlas, harbor]`", start)
        body, begin = self.bracket_body(start)
        values = [v.strip().strip("'\"").strip() for v in re.split(r"[,|]", body)]
        if not all(values):
            raise self.error("an enum value is empty", begin)
        return Literal[tuple(dict.fromkeys(values))]

    def literal_values(self, start: int) -> object:
        if self.peek() != "[":
            raise self.error("`Literal` lists its values in brackets, e.g. `Literal['a', 'b']`", start)
        body, begin = self.bracket_body(start)
        try:
            parsed = ast.literal_eval(f"({body},)")
        except (ValueError, SyntaxError):
            raise self.error("`Literal[...]` takes quoted strings, numbers, True, False or None", begin) from None
        return Literal[tuple(parsed)]

    def unknown(self, name: str, start: int) -> SignatureError:
        rest = ""
        if self.peek() == "[":
            body, _ = self.bracket_body(start)
            rest = f"[{body}]"
        close = difflib.get_close_matches(name, _KNOWN, n=1, cutoff=0.5)
        hint = f"; did you mean `{close[0]}{rest}`?" if close else ""
        return SignatureError(f"unknown type `{name}`{hint}", text=self.source, position=self.offset + start)


def _union(members: list[object]) -> object:
    return Union[tuple(members)]  # noqa: UP007


def parse_type(
    text: str, *, source: str | None = None, offset: int = 0, names: Mapping[str, object] | None = None
) -> object:
    """Parse one type expression into a Python annotation, raising `SignatureError` with its position.

    `names` resolves type names of your own (pydantic models, enums) by their class name.
    """
    return _Parser(text, source if source is not None else text, offset, names or {}).parse()


def type_to_text(annotation: object) -> str:
    """Python's spelling of an annotation, readable by `parse_type` for the types it knows."""
    if annotation is type(None):
        return "None"
    if annotation is Any:
        return "Any"
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is typing.Annotated:
        return type_to_text(args[0])
    if origin is Literal:
        return f"Literal[{', '.join(repr(a) for a in args)}]"
    if origin in (Union, types.UnionType):
        return " | ".join(type_to_text(a) for a in args)
    if origin is list:
        return f"list[{type_to_text(args[0]) if args else 'Any'}]"
    if origin is dict:
        return f"dict[{', '.join(type_to_text(a) for a in args)}]" if args else "dict"
    if annotation is dict:
        return "dict"
    if annotation is list:
        return "list"
    if annotation is _dt.datetime:
        return "datetime"
    if isinstance(annotation, type):
        if issubclass(annotation, enum.Enum):
            return annotation.__name__
        return annotation.__name__
    return str(annotation)
