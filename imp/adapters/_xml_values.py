"""Values as nested XML tags, both ways: written from JSON-like data, read back by the field's type.

Lists are `<item>` children and objects a tag per key. An object whose keys are not XML names (a
pydantic alias with a space, a number) is written as JSON inside its tag rather than as tags that
are not XML, and an empty list or object as `[]` or `{}`; `<items />` and `<items></items>` are
read as empty too. Reading follows the annotation, so an empty element is an empty list or object where
one is expected, a leaf is read as its own type, and a key named `item` is still a key.
"""

from __future__ import annotations

import dataclasses
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Union

import pydantic

from imp._annotation import base_annotation
from imp._json import OverLimit, limits, loads_strict
from imp.signature import Field
from imp.values import CoercionError, coerce_text, dump_json, load_json, render_value

__all__ = [
    "MAX_ELEMENTS",
    "MAX_TAGS",
    "Budget",
    "Tags",
    "element_bounds",
    "escape",
    "read_value",
    "structured",
    "takes_tags",
    "to_xml",
]

MAX_ELEMENTS = 10_000
MAX_TAGS = 200_000
"""Tags read over one reply, counted at every level a nested value is read at: the work's bound."""
_TAG = re.compile(r"<(?:([A-Za-z_][\w.-]*)(\s[^<>]*+)?/?>|/([A-Za-z_][\w.-]*)\s*+>)")
_XML_NAME = re.compile(r"[A-Za-z_][\w.-]*\Z")
_ENTITIES = {"&lt;": "<", "&gt;": ">", "&quot;": '"', "&apos;": "'", "&amp;": "&"}
_ENTITY = re.compile("|".join(map(re.escape, _ENTITIES)))
_SEQUENCES = (list, tuple, set, frozenset)


def escape(text: str) -> str:
    """Text safe between tags."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def unescape(text: str) -> str:
    """Text between tags as written before escaping."""
    return _ENTITY.sub(lambda m: _ENTITIES[m.group(0)], text)


class Budget:
    """Counts the elements one reply opens and the tags read, so a hostile reply cannot make parsing unbounded."""

    def __init__(self) -> None:
        self.elements = 0
        self.tags = 0

    def spend(self) -> None:
        self.elements += 1
        if self.elements > MAX_ELEMENTS:
            raise ValueError(f"more than {MAX_ELEMENTS} XML elements")

    def read_tags(self, count: int) -> None:
        self.tags += count
        if self.tags > MAX_TAGS:
            raise ValueError(f"more than {MAX_TAGS} XML tags read (nested values read again at each level)")


@dataclasses.dataclass(frozen=True, slots=True)
class Tags:
    """Every tag of a text read in one pass: the openings in order, and where each one closes.

    An opening closes at the first closing tag of its name that brings that name's depth back to
    zero; one that never closes has no entry (so an unclosed tag costs one look, not a scan)."""

    openings: list[tuple[int, int, str, bool]]
    """(start, end, name, self-closing) of each opening tag, in order."""
    closes: dict[int, tuple[int, int]]
    """An opening's start -> (its closing tag's start, end)."""

    @classmethod
    def read(cls, text: str, budget: Budget | None = None) -> Tags:
        """The tags of `text`; refuses (`OverLimit`) elements nested deeper than `ParseLimits.max_depth`."""
        openings: list[tuple[int, int, str, bool]] = []
        closes: dict[int, tuple[int, int]] = {}
        open_by_name: dict[str, list[int]] = {}
        for match in _TAG.finditer(text):
            name = match.group(1)
            if name is None:
                waiting = open_by_name.get(match.group(3))
                if waiting:
                    closes[waiting.pop()] = (match.start(), match.end())
                continue
            alone = match.group().endswith("/>")
            openings.append((match.start(), match.end(), name, alone))
            if not alone:
                open_by_name.setdefault(name, []).append(match.start())
        if budget is not None:
            budget.read_tags(len(openings) + len(closes))
        _check_depth(closes)
        return cls(openings, closes)


def _check_depth(closes: dict[int, tuple[int, int]]) -> None:
    """Refuse elements nested deeper than the limit (only elements that close count: a stray `<br>` does not)."""
    limit = limits().max_depth
    if len(closes) <= limit:
        return
    starts = sorted(closes)
    ends = sorted(end for _, end in closes.values())
    depth = deepest = 0
    j = 0
    for start in starts:
        while ends[j] <= start:
            depth -= 1
            j += 1
        depth += 1
        deepest = max(deepest, depth)
    if deepest > limit:
        raise OverLimit(
            f"XML nested deeper than {limit} levels (imp.ParseLimits.max_depth, set with imp.configure(parse_limits=...))"
        )


def element_bounds(text: str, tag: str, start: int = 0, tags: Tags | None = None) -> tuple[int, int, int] | None:
    """Where the first `<tag>...</tag>` (or `<tag />`) at or after `start` is: (inner start, inner end, end)."""
    tags = tags or Tags.read(text)
    for begin, end, name, alone in tags.openings:
        if begin < start or name != tag:
            continue
        if alone:
            return end, end, end
        close = tags.closes.get(begin)
        if close is not None:
            return end, close[0], close[1]
    return None


def elements(text: str, budget: Budget) -> list[tuple[str, str]]:
    """Top-level `<tag>inner</tag>` elements of text, in order (text between them ignored)."""
    tags = Tags.read(text, budget)
    found: list[tuple[str, str]] = []
    pos = 0
    for begin, end, name, alone in tags.openings:
        if begin < pos:
            continue
        if alone:
            budget.spend()
            found.append((name, ""))
            pos = end
            continue
        close = tags.closes.get(begin)
        if close is None:
            continue
        budget.spend()
        found.append((name, text[end : close[0]]))
        pos = close[1]
    return found


# --- writing -----------------------------------------------------------------------------


def to_xml(value: Any, indent: str = "") -> str:
    """JSON-like data as nested tags (objects with non-XML keys, and empty ones, as JSON text)."""
    if isinstance(value, Mapping | list | tuple) and not value:
        # `[]` rather than an empty element: in `str | list[int]` an empty element is "".
        return "{}" if isinstance(value, Mapping) else "[]"
    if isinstance(value, Mapping):
        if not all(isinstance(k, str) and _XML_NAME.match(k) for k in value):
            return escape(dump_json(value))
        return "\n".join(f"{indent}<{k}>{_nested(v, indent)}</{k}>" for k, v in value.items())
    if isinstance(value, list | tuple):
        return "\n".join(f"{indent}<item>{_nested(v, indent)}</item>" for v in value)
    return escape(render_value(value))


def _nested(value: Any, indent: str) -> str:
    if isinstance(value, Mapping | list | tuple):
        inner = to_xml(value, indent + "  ")
        return f"\n{inner}\n{indent}" if inner.lstrip().startswith("<") else inner
    return escape(render_value(value))


# --- reading -----------------------------------------------------------------------------


def structured(annotation: Any) -> bool:
    """Whether values of this annotation are written as nested tags (lists, objects, models)."""
    annotation = base_annotation(annotation)
    origin = typing.get_origin(annotation)
    if origin in (*_SEQUENCES, dict) or annotation in (*_SEQUENCES, dict):
        return True
    if typing.is_typeddict(annotation) or (isinstance(annotation, type) and dataclasses.is_dataclass(annotation)):
        return True
    return isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)


def takes_tags(annotation: Any) -> bool:
    """Whether a field's value may be written as nested tags: structured, or a union with a structured member."""
    base = base_annotation(annotation)
    if structured(base):
        return True
    return typing.get_origin(base) in (Union, types.UnionType) and any(structured(a) for a in typing.get_args(base))


def _member_types(annotation: Any) -> dict[str, Any] | None:
    """The declared key -> type of an object annotation (by alias where the model has one), or None."""
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return {(f.alias or name): f.annotation for name, f in annotation.model_fields.items()}
    if typing.is_typeddict(annotation) or (isinstance(annotation, type) and dataclasses.is_dataclass(annotation)):
        return dict(typing.get_type_hints(annotation))
    return None


def read_value(inner: str, annotation: Any, budget: Budget, depth: int = 1) -> Any:
    """An element's content as a value of `annotation`: nested tags by the type, leaves by their own type.

    What cannot be read as its type is left as text, for the field's validation to report.
    """
    if depth > limits().max_depth:
        raise OverLimit(
            f"XML nested deeper than {limits().max_depth} levels "
            "(imp.ParseLimits.max_depth, set with imp.configure(parse_limits=...))"
        )
    base = base_annotation(annotation)
    text = inner.strip()
    if not structured(base):
        children = elements(inner, budget) if base is Any or typing.get_origin(base) is not None else []
        if not children:
            return _leaf(unescape(text), annotation)
        shaped = _shaped_member(base, children)
        if shaped is not None:
            return read_value(inner, shaped, budget, depth)
        return _untyped(children, budget, depth)
    children = elements(inner, budget)
    origin = typing.get_origin(base) or base
    if not children:
        if not text:
            return [] if origin in _SEQUENCES else {}
        try:
            return load_json(unescape(text))
        except ValueError:
            return unescape(text)  # the field's coercion says what was expected
    args = typing.get_args(base)
    if origin in _SEQUENCES:
        item = args[0] if args else Any
        return [read_value(body, item, budget, depth + 1) for tag, body in children if tag == "item"]
    if origin is dict:
        value_type = args[1] if len(args) == 2 else Any
        return {tag: read_value(body, value_type, budget, depth + 1) for tag, body in children}
    members = _member_types(base) or {}
    out: dict[str, Any] = {}
    for tag, body in children:
        if tag not in out:
            out[tag] = read_value(body, members.get(tag, Any), budget, depth + 1)
    return out


def _shaped_member(annotation: Any, children: list[tuple[str, str]]) -> Any:
    """The member of a union that nested tags are written for: a list's for `<item>`s, else an object's."""
    if typing.get_origin(annotation) not in (Union, types.UnionType):
        return None
    as_list = all(tag == "item" for tag, _ in children)
    for member in typing.get_args(annotation):
        if structured(member):
            origin = typing.get_origin(member) or member
            if (origin in _SEQUENCES) == as_list:
                return member
    return None


def _untyped(children: list[tuple[str, str]], budget: Budget, depth: int) -> Any:
    if all(tag == "item" for tag, _ in children):
        return [read_value(body, Any, budget, depth + 1) for _, body in children]
    out: dict[str, Any] = {}
    for tag, body in children:
        out.setdefault(tag, read_value(body, Any, budget, depth + 1))
    return out


def _leaf(text: str, annotation: Any) -> Any:
    if annotation is Any:
        try:
            return loads_strict(text)
        except ValueError:
            return text
    try:
        return coerce_text(Field("value", "output", annotation), text)
    except CoercionError:
        return text
