"""Values as nested XML tags, both ways: written from JSON-like data, read back by the field's type.

Lists are `<item>` children and objects a tag per key. A pydantic model's tags are its field
names, as DSPy writes them (an alias need not be an XML name: `postal code`); reading maps them
back to the keys the model validates by. A dict whose keys are not XML names (a number, a space)
is written as JSON inside its tag rather than as tags that are not XML, and an empty list or object
as `[]` or `{}`; `<items />` and `<items></items>` are read as empty too. Reading follows the
annotation, so an empty element is an empty list or object where one is expected (None where the
type is optional), a leaf is read as its own type, and a key named `item` is still a key; it is
lenient where DSPy is (a list without `<item>`s is one item, a list member's repeated tags add up,
a union's member is the one whose tags fit).
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
import typing
from collections.abc import Mapping
from typing import Any, Union

import pydantic

from imp._annotation import admits_none, base_annotation
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
    "skeleton",
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
_ENTITY = re.compile("|".join(map(re.escape, _ENTITIES)) + r"|&#(\d{1,7});|&#[xX]([0-9A-Fa-f]{1,6});")
_SEQUENCES = (list, tuple, set, frozenset)


def escape(text: str) -> str:
    """Text safe between tags."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def unescape(text: str) -> str:
    """Text between tags as written before escaping: the five named entities, and character
    references (`&#34;`, `&#x22;`), which XML defines too and a model writes when its prompt was
    HTML-escaped by the server (llama-cpp-python's chatml-function-calling)."""
    return _ENTITY.sub(_unescaped, text)


def _unescaped(match: re.Match[str]) -> str:
    decimal, hexadecimal = match.group(1), match.group(2)
    if decimal is None and hexadecimal is None:
        return _ENTITIES[match.group(0)]
    code = int(decimal) if decimal is not None else int(hexadecimal, 16)
    if code in (0x9, 0xA, 0xD) or 0x20 <= code <= 0xD7FF or 0xE000 <= code <= 0xFFFD or 0x10000 <= code <= 0x10FFFF:
        return chr(code)
    return match.group(0)  # not a character XML allows: kept as written


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


def to_xml(value: object, indent: str = "") -> str:
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


def _nested(value: object, indent: str) -> str:
    if isinstance(value, Mapping | list | tuple):
        inner = to_xml(value, indent + "  ")
        return f"\n{inner}\n{indent}" if inner.lstrip().startswith("<") else inner
    return escape(render_value(value))


def skeleton(annotation: object, seen: frozenset[Any] = frozenset()) -> str | None:
    """The nested tags a structured value is written as, `...` for each leaf (`<city>...</city>`), as
    the system message shows it; None for a type written as text (or a dict's free keys)."""
    base = base_annotation(annotation)
    if typing.get_origin(base) in (Union, types.UnionType):
        shaped = [a for a in typing.get_args(base) if structured(a)]
        return skeleton(shaped[0], seen) if shaped else None
    if not structured(base):
        return None
    origin = typing.get_origin(base) or base
    if origin in _SEQUENCES:
        args = typing.get_args(base)
        inner = skeleton(args[0], seen) if args else None
        return f"<item>{inner or '...'}</item>"
    if origin is dict:
        return None
    if base in seen:  # a recursive model: its own tags are shown once
        return "..."
    if isinstance(base, type) and issubclass(base, pydantic.BaseModel):
        tags = {name: info.annotation for name, info in base.model_fields.items()}
    else:
        tags = dict(typing.get_type_hints(base))
    return "".join(f"<{tag}>{skeleton(member, seen | {base}) or '...'}</{tag}>" for tag, member in tags.items())


# --- reading -----------------------------------------------------------------------------


def structured(annotation: object) -> bool:
    """Whether values of this annotation are written as nested tags (lists, objects, models)."""
    annotation = base_annotation(annotation)
    origin = typing.get_origin(annotation)
    if origin in (*_SEQUENCES, dict) or annotation in (*_SEQUENCES, dict):
        return True
    if typing.is_typeddict(annotation) or (isinstance(annotation, type) and dataclasses.is_dataclass(annotation)):
        return True
    return isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)


def takes_tags(annotation: object) -> bool:
    """Whether a field's value may be written as nested tags: structured, or a union with a structured member."""
    base = base_annotation(annotation)
    if structured(base):
        return True
    return typing.get_origin(base) in (Union, types.UnionType) and any(structured(a) for a in typing.get_args(base))


def _members(annotation: object) -> dict[str, tuple[str, Any]] | None:
    """An object annotation's members by tag: tag -> (the key validation takes, the member's type), or None.

    A pydantic model's tags are its field names (always XML names, as DSPy writes them); its alias,
    when it is an XML name, is read too. The key is what the model validates by: the alias when
    there is one.
    """
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        found: dict[str, tuple[str, Any]] = {}
        for name, info in annotation.model_fields.items():
            given = info.validation_alias if isinstance(info.validation_alias, str) else info.alias
            key = given or name
            found[name] = (key, info.annotation)
            if given and _XML_NAME.match(given):
                found.setdefault(given, (key, info.annotation))
        return found
    if typing.is_typeddict(annotation) or (isinstance(annotation, type) and dataclasses.is_dataclass(annotation)):
        return {name: (name, hint) for name, hint in typing.get_type_hints(annotation).items()}
    return None


def _rekeyed(value: object, annotation: object, depth: int = 0) -> object:
    """JSON written inside a tag, with a model's field names (as the XML note shows them) turned into
    the keys it validates by (its aliases), at every level."""
    if depth > limits().max_depth:
        return value
    base = base_annotation(annotation)
    if typing.get_origin(base) in (Union, types.UnionType):
        return value
    origin = typing.get_origin(base) or base
    args = typing.get_args(base)
    if isinstance(value, list) and origin in _SEQUENCES:
        return [_rekeyed(v, args[0] if args else Any, depth + 1) for v in value]
    if not isinstance(value, dict):
        return value
    if origin is dict:
        return {k: _rekeyed(v, args[1] if len(args) == 2 else Any, depth + 1) for k, v in value.items()}
    members = _members(base)
    if not members:
        return value
    out: dict[str, Any] = {}
    for tag, item in value.items():
        key, member = members.get(tag, (tag, Any))
        out.setdefault(key, _rekeyed(item, member, depth + 1))
    return out


def _is_sequence(annotation: object) -> bool:
    base = base_annotation(annotation)
    return (typing.get_origin(base) or base) in _SEQUENCES


def _add(out: dict[str, Any], key: str, value: object, member: object) -> None:
    """Put a child's value under its key: the first wins, but a list member's repeated tags add up
    (`<labels>a</labels><labels>b</labels>` is `["a", "b"]`, as DSPy reads it)."""
    if key not in out:
        out[key] = value
    elif _is_sequence(member) and isinstance(held := out[key], list) and isinstance(value, list):
        out[key] = [*held, *value]


def read_value(inner: str, annotation: object, budget: Budget, depth: int = 1) -> Any:
    """An element's content as a value of `annotation`: nested tags by the type, leaves by their own type.

    Read leniently, as DSPy reads it: an empty element of an optional object or list is None; a list
    written without `<item>`s is one item (`<labels>new</labels>` is `["new"]`, an object's tags
    straight inside a list of objects are its one object); JSON inside the tag is read as JSON.
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
        shaped = _shaped_members(base, children)
        if not shaped:
            return _untyped(children, budget, depth)
        first: Any = None
        for index, member in enumerate(shaped):  # the best-fitting member whose value validates
            value = read_value(inner, member, budget, depth)
            if _validates(value, member):
                return value
            first = value if index == 0 else first
        return first
    children = elements(inner, budget)
    origin = typing.get_origin(base) or base
    args = typing.get_args(base)
    if not children:
        if not text:
            if admits_none(annotation):
                return None
            return [] if origin in _SEQUENCES else {}
        try:
            loaded = _rekeyed(load_json(unescape(text)), base)
        except ValueError:
            loaded = unescape(text)  # the field's coercion says what was expected
        if origin in _SEQUENCES and loaded is not None and not isinstance(loaded, list):
            return [read_value(inner, args[0] if args else Any, budget, depth + 1)]
        return loaded
    if origin in _SEQUENCES:
        item = args[0] if args else Any
        if any(tag == "item" for tag, _ in children):
            return [read_value(body, item, budget, depth + 1) for tag, body in children if tag == "item"]
        if _left_over(children, item) and len({tag for tag, _ in children}) == 1:
            # Items under a tag of the model's own choosing (`<tag>a</tag><tag>b</tag>`), not an object's.
            return [read_value(body, item, budget, depth + 1) for _, body in children]
        return [read_value(inner, item, budget, depth + 1)]  # one object, its tags straight inside
    out: dict[str, Any] = {}
    if origin is dict:
        value_type = args[1] if len(args) == 2 else Any
        for tag, body in children:
            _add(out, tag, read_value(body, value_type, budget, depth + 1), value_type)
        return out
    members = _members(base) or {}
    for tag, body in children:
        key, member = members.get(tag, (tag, Any))
        _add(out, key, read_value(body, member, budget, depth + 1), member)
    return out


def _shaped_members(annotation: object, children: list[tuple[str, str]]) -> list[Any]:
    """The members of a union that nested tags may be written for, best first: a list's for `<item>`s,
    else an object's, those whose tags take every child (a repeated tag only where a list is) first."""
    if typing.get_origin(annotation) not in (Union, types.UnionType):
        return []
    as_list = all(tag == "item" for tag, _ in children)
    shaped = [
        member
        for member in typing.get_args(annotation)
        if structured(member) and ((typing.get_origin(member) or member) in _SEQUENCES) == as_list
    ]
    return sorted(shaped, key=lambda member: _left_over(children, member))


def _left_over(children: list[tuple[str, str]], annotation: object) -> int:
    """How many children an object annotation has no place for: unknown tags, and a non-list member's
    repeats (every child, for a type that is not an object)."""
    members = _members(base_annotation(annotation))
    if members is None:
        return len(children) if not structured(annotation) else 0
    taken: set[str] = set()
    left = 0
    for tag, _ in children:
        found = members.get(tag)
        if found is None or (found[0] in taken and not _is_sequence(found[1])):
            left += 1
        else:
            taken.add(found[0])
    return left


def _validates(value: object, annotation: object) -> bool:
    try:
        _validator(annotation).validate_python(value)
    except (pydantic.ValidationError, TypeError, ValueError):
        return False
    return True


@functools.lru_cache(maxsize=256)
def _validator(annotation: Any) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(annotation)


def _untyped(children: list[tuple[str, str]], budget: Budget, depth: int) -> object:
    if all(tag == "item" for tag, _ in children):
        return [read_value(body, Any, budget, depth + 1) for _, body in children]
    out: dict[str, Any] = {}
    for tag, body in children:
        out.setdefault(tag, read_value(body, Any, budget, depth + 1))
    return out


def _leaf(text: str, annotation: object) -> object:
    if annotation is Any:
        try:
            return loads_strict(text)
        except ValueError:
            return text
    try:
        return coerce_text(Field("value", "output", annotation), text)
    except CoercionError:
        return text
