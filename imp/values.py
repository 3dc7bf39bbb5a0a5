"""Field values: coercing reply text into a field's type, and writing values into prompts."""

from __future__ import annotations

import datetime as _dt
import enum
import json
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union

import pydantic
from pydantic_core import to_jsonable_python

from imp._annotation import NONE as _NONE
from imp._annotation import base_annotation, is_history
from imp._annotation import choices as _choices
from imp._annotation import is_enum as _is_enum
from imp._json import loads as load_json
from imp._json import loads_object as load_json_object
from imp._json import loads_strict as load_json_strict
from imp._json import unwrap_fence
from imp._typeparse import type_to_text
from imp.errors import ImpError, InvalidInputError
from imp.media import Audio, File, Image, Media, media_marker
from imp.signature import Field

__all__ = [
    "CoercionError",
    "base_annotation",
    "check_input",
    "coerce_text",
    "coerce_value",
    "dump_json",
    "format_requirement",
    "json_schema_hint",
    "load_json",
    "holds_media",
    "load_json_object",
    "media_description",
    "media_text",
    "render_value",
    "type_name",
    "unwrap_fence",
    "value_note",
]

_INT = re.compile(r"[+-]?\d+")
_TRUE = frozenset({"true", "yes", "1"})
_FALSE = frozenset({"false", "no", "0"})


class CoercionError(ImpError, ValueError):
    """A value that does not fit its field; adapters turn it into `AdapterParseError`."""

    def __init__(self, field: str, value: object, reason: str) -> None:
        self.field = field
        self.value = value
        self.reason = reason
        shown = value if isinstance(value, str) and len(value) <= 200 else repr(value)[:200]
        super().__init__(f"field `{field}`: {reason} (got {shown!r})")


# --- annotations in plain words ------------------------------------------------------------


_PLAIN = {
    str: "string",
    int: "integer",
    float: "number",
    bool: "true or false",
    _dt.datetime: "ISO 8601 date and time",
    _dt.date: "ISO 8601 date",
    dict: "object",
    list: "list",
    Any: "any value",
    Image: "image",
    Audio: "audio",
    File: "document",
}
_PLURAL = {
    "string": "strings",
    "integer": "integers",
    "number": "numbers",
    "object": "objects",
    "true or false": "true or false values",
    "ISO 8601 date and time": "ISO 8601 dates and times",
    "ISO 8601 date": "ISO 8601 dates",
    "any value": "values",
    "list": "lists",
    "image": "images",
    "audio": "audio clips",
    "document": "documents",
}


def type_name(annotation: object) -> str:
    """The type in plain words, as prompts show it: `string`, `list of strings`, `one of: a, b`."""
    if is_history(annotation):
        return "conversation history"
    raw = annotation
    annotation = base_annotation(annotation)
    suffix = " or null" if annotation is not raw and _admits_none_only(raw) and annotation is not _NONE else ""
    choices = _choices(annotation)
    if choices is not None:
        return "one of: " + ", ".join(str(c) for c in choices) + suffix
    if annotation in _PLAIN:
        return _PLAIN[annotation] + suffix
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if origin is list:
        item = type_name(args[0]) if args else "any value"
        return "list of " + _plural(item) + suffix
    if origin is dict or annotation is dict:
        return "object" + suffix
    if origin in (Union, types.UnionType):
        return " or ".join(type_name(a) if a is not _NONE else "null" for a in args)
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        return "object" + suffix
    return getattr(annotation, "__name__", str(annotation)) + suffix


def _admits_none_only(annotation: object) -> bool:
    return typing.get_origin(annotation) in (Union, types.UnionType) and _NONE in typing.get_args(annotation)


def _plural(name: str) -> str:
    if name in _PLURAL:
        return _PLURAL[name]
    if name.startswith("list of "):
        return "lists of " + name[len("list of ") :]
    if name.startswith("one of: "):
        return "values, each " + name
    return name + " values"


def format_requirement(field: Field) -> str:
    """The `(must be formatted as ...)` text for an output, or "" for plain text."""
    annotation = base_annotation(field.annotation)
    if annotation is str:
        return ""
    name = type_name(field.annotation)
    if name.startswith(("one of", "true or false")):
        return name
    article = "an" if name[:1].lower() in "aeiou" or name.startswith("ISO") else "a"
    return f"{article} {name}"


def value_note(field: Field, *, by_alias: bool = True) -> str:
    """The `# note: the value you produce ...` hint beside an output's placeholder ("" for text), in DSPy's words.

    As DSPy does, the hint follows the declared annotation (only `Annotated[...]` is looked
    through): `int | None` is described by its JSON schema, `int` as "a single int value". The XML
    adapter asks for its schema by field names (`by_alias=False`), the names its tags are.
    """
    annotation = field.annotation
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if field.kind == "input" or annotation is str:
        return ""
    if annotation is bool:
        return "must be True or False"
    if annotation in (int, float):
        return f"must be a single {annotation.__name__} value"
    if _is_enum(annotation):
        return "must be one of: " + "; ".join(str(m.value) for m in annotation)
    if typing.get_origin(annotation) is Literal:
        return "must exactly match (no extra characters) one of: " + "; ".join(
            str(a) for a in typing.get_args(annotation)
        )
    hint = json_schema_hint(annotation, by_alias=by_alias)
    return "must adhere to the JSON schema: " + json.dumps(hint, ensure_ascii=False)


def json_schema_hint(annotation: Any, *, by_alias: bool = True) -> object:
    """An annotation's JSON schema as prompts show it: keys sorted, `type` first, at every level."""
    return _type_first(pydantic.TypeAdapter(annotation).json_schema(by_alias=by_alias))


def _type_first(node: object) -> object:
    # Models follow a schema better when each level says its type first (DSPy writes it so).
    if isinstance(node, dict):
        return {k: _type_first(v) for k, v in sorted(node.items(), key=lambda kv: (kv[0] != "type", kv[0]))}
    if isinstance(node, list):
        return [_type_first(v) for v in node]
    return node


# --- writing values into prompts ------------------------------------------------------------


def dump_json(value: object) -> str:
    """Complete, compact JSON with `", "` and `": "` separators (never truncated)."""
    return json.dumps(to_jsonable_python(value), ensure_ascii=False)


def holds_media(value: object) -> bool:
    """Whether a value is, or holds, media an adapter places as content parts (see `media_text`)."""
    if isinstance(value, Media):
        return True
    if isinstance(value, list | tuple):
        return bool(value) and all(isinstance(v, Media) for v in value)
    parts = getattr(value, "content_parts", None)
    return callable(parts) and not isinstance(value, type)


def media_description(value: Any) -> str:
    """A value holding media as plain text: each media value by its short description."""
    if isinstance(value, Media):
        return str(value)
    if isinstance(value, list | tuple):
        return "\n".join(str(v) for v in value)
    if isinstance(value, str):
        return str.__str__(value)  # a result that is its own text (an MCP result)
    parts = value.content_parts()
    return "".join(str(p) for p in parts)


def media_text(value: object, origin: str | None) -> str | None:
    """A media value (or a list of them, or a result holding media, such as an MCP tool's) written as
    markers the adapter turns into content parts where they stand; None for anything else."""
    if isinstance(value, Media):
        return media_marker(value, origin)
    if isinstance(value, list | tuple) and value and all(isinstance(v, Media) for v in value):
        return "\n".join(media_marker(v, origin) for v in value)
    parts = getattr(value, "content_parts", None)
    if callable(parts) and not isinstance(value, type):
        return "".join(p if isinstance(p, str) else media_marker(p, origin) for p in parts())
    return None


def render_value(value: object, field: Field | None = None, *, origin: str | None = None) -> str:
    """How a value is written into a prompt (a media value: a marker the adapter places as a part)."""
    if type(value) is str:
        return value
    if origin is None and field is not None:
        origin = f"the {field.kind} `{field.name}`"
    marked = media_text(value, origin)
    if marked is not None:
        return marked
    if isinstance(value, str):
        return value
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple) and field is not None and base_annotation(field.annotation) is str:
        return _numbered(value)
    if isinstance(value, enum.Enum):
        return render_value(value.value)
    if isinstance(value, _dt.datetime | _dt.date):
        return value.isoformat()
    jsonable = to_jsonable_python(value, fallback=repr)
    if isinstance(jsonable, dict | list):
        return json.dumps(jsonable, ensure_ascii=False)
    return str(jsonable)


def _blob(item: object) -> str:
    text = item if isinstance(item, str) else render_value(item)
    if "\n" not in text and "«" not in text and "»" not in text:
        return f"«{text}»"
    return "«««\n    " + text.replace("\n", "\n    ") + "\n»»»"


def _numbered(items: list[object] | tuple[object, ...]) -> str:
    if not items:
        return "N/A"
    if len(items) == 1:
        return _blob(items[0])
    return "\n".join(f"[{i + 1}] {_blob(item)}" for i, item in enumerate(items))


# --- reading values out of replies ----------------------------------------------------------


Coercer = Callable[[str], Any]


def _validate(field: Field, value: object) -> object:
    try:
        return field.type_adapter.validate_python(value)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        reason = first.get("msg", "invalid value")
        raise CoercionError(field.name, value, f"{reason}{f' at {where}' if where else ''}") from None


def _match_choice(field: Field, choices: list[object], text: str, annotation: Any) -> object:
    """A Literal's value or an Enum's member for reply text: by value, then (an Enum) by member name."""
    by_text = {str(c): c for c in choices}
    candidate = text.strip()
    if candidate not in by_text:
        wrapped = re.fullmatch(r"(?:Literal|str)\[(.*)\]", candidate, re.DOTALL)
        if wrapped:
            candidate = wrapped.group(1).strip()
        candidate = _unquote(candidate)
    if candidate in by_text:
        value = by_text[candidate]
        return annotation(value) if _is_enum(annotation) else value
    if _is_enum(annotation):
        # A model may answer with the member's name (`RED`) rather than its value (`red`), as
        # DSPy also accepts: values are tried first, so a name that is another member's value
        # still means that member.
        member = annotation.__members__.get(candidate)
        if member is not None:
            return member
    raise CoercionError(field.name, text, "must be one of: " + ", ".join(str(c) for c in choices))


def _unquote(text: str) -> str:
    """Text without one layer of matching quotes (`"5"` -> `5`)."""
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1].strip()
    return text


def _wants_json_container(annotation: object) -> bool:
    origin = typing.get_origin(annotation)
    if origin in (list, dict, tuple, set, frozenset) or annotation in (list, dict):
        return True
    if typing.is_typeddict(annotation):
        return True
    return isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel)


_SCALARS = (int, float, bool, _dt.datetime, _dt.date)


def _member(field: Field, annotation: object) -> Field:
    """A field like this one with one member of its union as the annotation."""
    return Field(field.name, field.kind, annotation, constraints=field.constraints)


def _coerce_union(field: Field, text: str, members: list[object]) -> object:
    """A union's value from text: JSON read against the whole union, else each member in order.

    `str` is one member like the others, so text that is nothing else stays text (never "").
    """
    body = unwrap_fence(text.strip()).strip()
    for member in members:  # a literal choice written as itself is that choice (`'true'`, not True)
        choices = _choices(member)
        if choices is not None and any(isinstance(c, str) and c == body for c in choices):
            return coerce_text(_member(field, member), text)
    try:
        candidate = load_json_strict(body)
    except ValueError:
        pass
    else:
        try:
            value = _validate(field, candidate)
        except CoercionError:
            pass
        else:
            if not (isinstance(candidate, bool) and not isinstance(value, bool)):
                return value  # (a bool that only fits as a number is not taken for it)
    reasons = []
    for member in members:
        if member is bool and str in members:
            # Beside `str`, only JSON's `true` / `false` (read above) are booleans: the lenient
            # spellings (`Yes`, `TRUE`, `0`) are as likely text, and text imp wrote must read back as text.
            continue
        try:
            return coerce_text(_member(field, member), text)
        except CoercionError as exc:
            reasons.append(exc.reason)
    raise CoercionError(field.name, text, f"expected {type_name(field.annotation)} ({'; '.join(reasons)})")


def coerce_text(field: Field, text: str) -> object:
    """Coerce one field's text from a reply into the field's type (raises `CoercionError`)."""
    annotation = field.base_annotation
    stripped = text.strip()
    if field.optional and stripped in ("null", "None", "") and not (annotation is str and stripped == ""):
        return None
    if annotation is str:
        value: object = text
    elif typing.get_origin(annotation) in (Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not _NONE]
        return _coerce_union(field, text, members)
    elif (choices := _choices(annotation)) is not None:
        value = _match_choice(field, choices, stripped, annotation)
    elif annotation in _SCALARS:
        value = _scalar(field, annotation, _unquote(stripped), text)
    else:
        body = unwrap_fence(stripped).strip()
        if _wants_json_container(annotation) and not body.startswith(("[", "{")):
            raise CoercionError(field.name, text, f"expected {type_name(field.annotation)} written as JSON")
        try:
            value = load_json(body)
        except ValueError as exc:
            raise CoercionError(field.name, text, str(exc)) from None
        try:
            return _validate(field, value)
        except CoercionError as exc:
            raise CoercionError(field.name, text, exc.reason) from None
    if field.constraints:
        return _validate(field, value)
    return value


def _scalar(field: Field, annotation: object, stripped: str, text: str) -> object:
    """An int, float, bool, datetime or date from its text (one layer of quotes already taken off)."""
    if annotation is int:
        if not _INT.fullmatch(stripped):
            raise CoercionError(field.name, text, "expected an integer")
        return int(stripped)
    if annotation is float:
        try:
            return float(stripped)
        except ValueError:
            raise CoercionError(field.name, text, "expected a number") from None
    if annotation is bool:
        lowered = stripped.lower()
        if lowered in _TRUE:
            return True
        if lowered in _FALSE:
            return False
        raise CoercionError(field.name, text, "expected true or false")
    if annotation is _dt.datetime:
        try:
            return _dt.datetime.fromisoformat(stripped)
        except ValueError:
            raise CoercionError(field.name, text, "expected an ISO 8601 date and time") from None
    try:
        return _dt.date.fromisoformat(stripped)
    except ValueError:
        raise CoercionError(field.name, text, "expected an ISO 8601 date") from None


def coerce_value(field: Field, value: object) -> object:
    """Coerce a value given directly (a JSON member, a scripted field) into the field's type."""
    annotation = field.base_annotation
    if value is None:
        if field.optional:
            return None
        raise CoercionError(field.name, value, "must not be null")
    if isinstance(value, str):
        if annotation is str:
            return _validate(field, value) if field.constraints else value
        if typing.get_origin(annotation) in (Union, types.UnionType):
            # A JSON string is already a value: `"false"` in `int | Literal["false"]` is the Literal.
            try:
                return _validate(field, value)
            except CoercionError:
                pass
        return coerce_text(field, value)
    if annotation is str:
        return dump_json(value) if isinstance(value, dict | list) else render_value(value)
    if annotation is bool and isinstance(value, int) and value in (0, 1) and not isinstance(value, bool):
        return bool(value)
    return _validate(field, value)


# --- checking inputs before a request -------------------------------------------------------


def check_input(field: Field, value: object) -> None:
    """Refuse an input value that does not fit its field, before any request (`InvalidInputError`).

    The value is checked, not changed: pydantic's lax mode decides what fits (`"5"` for an int,
    `"2024-05-01"` for a datetime), and the prompt shows the value as given. A text field takes any
    value (a list becomes numbered passages), and checks its constraints when given a string.
    """
    annotation = field.base_annotation
    if annotation is Any or value is None:
        return
    if is_history(annotation):
        if isinstance(annotation, type) and isinstance(value, annotation):
            return
        if isinstance(value, list | tuple) and all(isinstance(t, Mapping) for t in value):
            return
        raise InvalidInputError(
            field.name, f"expected an imp.History or a list of turn mappings, got {_kind(value)}", value=value
        )
    if annotation is str and not isinstance(value, str):
        return
    try:
        field.type_adapter.validate_python(value)
    except pydantic.ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        reason = str(first.get("msg", "invalid value")).removeprefix(
            "Value error, "
        )  # pydantic's word for a check of ours
        at = f" at `{where}`" if where else ""
        raise InvalidInputError(
            field.name,
            f"{reason}{at} (the field is `{type_to_text(field.annotation)}`; got {_kind(value)})",
            value=value,
        ) from None


def _kind(value: object) -> str:
    """A value's type for an error message: the value itself may be a secret."""
    return (
        "a " + type(value).__name__ if type(value).__name__[:1].lower() not in "aeiou" else "an " + type(value).__name__
    )
