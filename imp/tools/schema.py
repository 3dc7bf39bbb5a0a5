"""Argument schemas: built from type hints through pydantic, decoded from JSON, and checked.

The checker covers the JSON-schema subset tool parameters use (`type`, `enum`, `const`,
bounds, string lengths, `pattern`, `required`, `properties`, `additionalProperties`, `items`,
array sizes, `anyOf` / `oneOf` / `allOf` and local `$ref`). It answers with readable problems,
never with an exception, so a model's bad call becomes a sentence it can act on.
"""

from __future__ import annotations

import functools
import inspect
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, get_type_hints

import pydantic
import pydantic_core

from imp._json import OverLimit, loads
from imp._jsondata import JSONObject, JSONValue
from imp.records import UnreadArguments

__all__ = [
    "EMPTY_OBJECT_SCHEMA",
    "SchemaProblem",
    "annotated",
    "arguments_model",
    "check_arguments",
    "decode_arguments",
    "describe_problems",
    "model_schema",
]

EMPTY_OBJECT_SCHEMA: Mapping[str, object] = {"type": "object", "properties": {}}
"""What an empty schema is sent as: an object with no properties."""

_MAX_PROBLEMS = 3


@dataclass(frozen=True, slots=True)
class SchemaProblem:
    """One way a value misses its schema: where (a dotted path, empty at the root) and what."""

    path: str
    message: str

    def sentence(self) -> str:
        """The problem as a clause, naming its place: "`team` must be one of ..."."""
        where = f"`{self.path}`" if self.path else "the arguments"
        return f"{where} {self.message}"


@functools.lru_cache(maxsize=256)
def _pattern(pattern: str) -> pydantic_core.SchemaValidator | None:
    """A linear-time matcher for a schema's `pattern` (Rust's regex engine, through pydantic-core).

    A schema can come from a saved file or an MCP server, and Python's `re` backtracks: `(a+)+$`
    against 30 a's and a `!` would hold the event loop for minutes. A pattern the linear engine
    cannot read (lookaround, backreferences) constrains nothing here.
    """
    try:
        return pydantic_core.SchemaValidator(
            pydantic_core.core_schema.str_schema(pattern=pattern),
            pydantic_core.core_schema.CoreConfig(regex_engine="rust-regex"),
        )
    except pydantic_core.SchemaError:
        return None


def _matches(pattern: str, value: str) -> bool:
    matcher = _pattern(pattern)
    return matcher is None or matcher.isinstance_python(value)


# --- decoding ---------------------------------------------------------------------------------


def decode_arguments(raw: object) -> tuple[dict[str, Any] | None, str | None]:
    """Arguments as a dict, from a mapping or from (possibly broken) JSON text.

    Returns `(arguments, None)`, or `(None, reason)` when the arguments are not a JSON object.
    Text is read by imp's one lenient reader (`imp._json.loads`: repairs, code fences).
    Keys stay text; nothing here turns a model's text into a Python name.
    """
    if raw is None:
        return {}, None
    if isinstance(raw, UnreadArguments):
        return None, f"are not a JSON object: {_preview(raw.text)}"
    if isinstance(raw, Mapping):
        return {str(k): v for k, v in raw.items()}, None
    if isinstance(raw, bytes | bytearray):
        raw = bytes(raw).decode("utf-8", errors="replace")
    if isinstance(raw, str):
        text = raw.strip()
        if not text:
            return {}, None
        try:
            value = loads(text)
        except OverLimit as exc:
            return None, f"are not read: {exc}"
        except ValueError:
            value = None
        if isinstance(value, Mapping):
            return {str(k): v for k, v in value.items()}, None
        return None, f"are not a JSON object: {_preview(raw)}"
    return None, f"are not a JSON object: {_preview(raw)}"


# --- schemas from type hints ------------------------------------------------------------------


def annotated(fn: Callable[..., object]) -> Callable[..., object]:
    """What holds a callable's type hints and docstring: a partial's function, an object's
    bound `__call__`, or the function itself."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.isroutine(fn) or isinstance(fn, type):
        return fn
    call: Callable[..., object] = getattr(fn, "__call__", fn)  # noqa: B004 - bound to the object
    return call


def arguments_model(
    fn: Callable[..., object], model_name: str, namespace: Mapping[str, object] | None = None
) -> type[pydantic.BaseModel]:
    """A pydantic model of a function's parameters (type hints and defaults), extra keys forbidden.

    `namespace` resolves string annotations that name local classes (the caller's locals).
    Raises TypeError for functions whose arguments cannot be described (`*args`, `**kwargs`,
    positional-only parameters).
    """
    signature = inspect.signature(fn)
    try:
        hints = get_type_hints(annotated(fn), localns=dict(namespace or {}), include_extras=True)
    except Exception as exc:
        raise TypeError(f"cannot read the type hints of {model_name}: {exc}") from exc
    fields: dict[str, Any] = {}
    for name, param in signature.parameters.items():
        if param.kind in (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD):
            raise TypeError(f"tool {model_name!r}: *args and **kwargs cannot be described as a schema; pass `schema=`")
        if param.kind is inspect.Parameter.POSITIONAL_ONLY:
            raise TypeError(f"tool {model_name!r}: positional-only parameter {name!r} cannot take a JSON argument")
        annotation = hints.get(name, Any)
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[name] = (annotation, default)
    config = pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=False)
    try:
        return pydantic.create_model(f"{model_name}_arguments", __config__=config, **fields)
    except (pydantic.PydanticUserError, NameError, TypeError, ValueError) as exc:
        raise TypeError(f"tool {model_name!r}: cannot build a schema from its parameters: {exc}") from exc


def model_schema(model: type[pydantic.BaseModel]) -> JSONObject:
    """The JSON schema of an arguments model, without pydantic's generated titles."""
    stripped = _strip_titles(model.model_json_schema())
    assert isinstance(stripped, dict)  # an object schema stays an object
    return stripped


def _strip_titles(schema: JSONValue) -> JSONValue:
    """Remove `title` keywords from a schema, leaving properties that are named "title" alone."""
    if isinstance(schema, list):
        return [_strip_titles(s) for s in schema]
    if not isinstance(schema, dict):
        return schema
    out: JSONObject = {}
    for key, value in schema.items():
        if key == "title" and isinstance(value, str):
            continue
        if key in ("properties", "$defs", "definitions", "patternProperties") and isinstance(value, dict):
            out[key] = {name: _strip_titles(sub) for name, sub in value.items()}
        else:
            out[key] = _strip_titles(value)
    return out


# --- checking ---------------------------------------------------------------------------------


def check_arguments(schema: Mapping[str, object], arguments: Mapping[str, object]) -> list[SchemaProblem]:
    """Every problem (at most a few) of `arguments` against `schema`; an empty list when they fit.

    An empty schema accepts anything.
    """
    if not schema:
        return []
    problems: list[SchemaProblem] = []
    _Checker(schema).check(schema, arguments, "", problems)
    return problems[:_MAX_PROBLEMS]


def describe_problems(problems: Sequence[SchemaProblem]) -> str:
    """The problems as one clause list, joined by "; "."""
    return "; ".join(p.sentence() for p in problems)


_TYPE_NAMES = {
    "string": "a string",
    "integer": "an integer",
    "number": "a number",
    "boolean": "true or false",
    "array": "an array",
    "object": "an object",
    "null": "null",
}


def _json_type(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, Mapping):
        return "object"
    if isinstance(value, list | tuple):
        return "array"
    return type(value).__name__


def _is_type(value: object, name: str) -> bool:
    match name:
        case "null":
            return value is None
        case "boolean":
            return isinstance(value, bool)
        case "integer":
            if isinstance(value, bool):
                return False
            return isinstance(value, int) or (isinstance(value, float) and value.is_integer())
        case "number":
            return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
        case "string":
            return isinstance(value, str)
        case "array":
            return isinstance(value, list | tuple)
        case "object":
            return isinstance(value, Mapping)
        case _:
            return True  # an unknown type name constrains nothing


def _preview(value: object, limit: int = 40) -> str:
    try:
        text = json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _join(parent: str, key: str | int) -> str:
    if isinstance(key, int):
        return f"{parent}[{key}]"
    return f"{parent}.{key}" if parent else key


def _number(value: object) -> str:
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


class _Checker:
    """Walks one schema (resolving local `$ref`s against its root) and collects problems."""

    def __init__(self, root: Mapping[str, object]) -> None:
        self.root = root

    def resolve(self, schema: Mapping[str, object]) -> Mapping[str, object]:
        seen = 0
        while "$ref" in schema and seen < 32:
            ref = schema["$ref"]
            target: object = self.root
            if not isinstance(ref, str) or not ref.startswith("#"):
                return {}
            for part in ref[1:].split("/"):
                if not part:
                    continue
                part = part.replace("~1", "/").replace("~0", "~")
                target = target.get(part) if isinstance(target, Mapping) else None
            if not isinstance(target, Mapping):
                return {}
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **rest}
            seen += 1
        return schema

    def check(self, schema: Mapping[str, object], value: object, path: str, out: list[SchemaProblem]) -> None:
        if len(out) >= _MAX_PROBLEMS:
            return
        schema = self.resolve(schema)
        if not schema:
            return
        if not self._check_type(schema, value, path, out):
            return
        if "const" in schema and value != schema["const"]:
            out.append(SchemaProblem(path, f"must be {_preview(schema['const'])}"))
            return
        enum = schema.get("enum")
        if isinstance(enum, list) and not any(_same(value, option) for option in enum):
            options = ", ".join(_preview(o) for o in enum)
            out.append(SchemaProblem(path, f"must be one of {options} (got {_preview(value)})"))
            return
        if isinstance(value, str):
            self._check_string(schema, value, path, out)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            self._check_number(schema, value, path, out)
        elif isinstance(value, Mapping):
            self._check_object(schema, value, path, out)
        elif isinstance(value, list | tuple):
            self._check_array(schema, value, path, out)
        self._check_combinators(schema, value, path, out)

    def _check_type(self, schema: Mapping[str, object], value: object, path: str, out: list[SchemaProblem]) -> bool:
        declared = schema.get("type")
        if declared is None:
            if ("properties" in schema or "required" in schema) and not isinstance(value, Mapping):
                out.append(SchemaProblem(path, f"must be an object, not {_TYPE_NAMES.get(_json_type(value), 'that')}"))
                return False
            return True
        listed = declared if isinstance(declared, list) else []
        names = [declared] if isinstance(declared, str) else [n for n in listed if isinstance(n, str)]
        if not names or any(_is_type(value, n) for n in names):
            return True
        wanted = " or ".join(_TYPE_NAMES.get(n, n) for n in names)
        got = _json_type(value)
        shown = "null" if got == "null" else f"{_TYPE_NAMES.get(got, got)} ({_preview(value)})"
        out.append(SchemaProblem(path, f"must be {wanted}, not {shown}"))
        return False

    def _check_string(self, schema: Mapping[str, object], value: str, path: str, out: list[SchemaProblem]) -> None:
        low, high = schema.get("minLength"), schema.get("maxLength")
        if isinstance(low, int) and len(value) < low:
            noun = "character" if low == 1 else "characters"
            out.append(SchemaProblem(path, f"must be at least {low} {noun} long"))
        if isinstance(high, int) and len(value) > high:
            noun = "character" if high == 1 else "characters"
            out.append(SchemaProblem(path, f"must be at most {high} {noun} long"))
        pattern = schema.get("pattern")
        if isinstance(pattern, str) and not _matches(pattern, value):
            out.append(SchemaProblem(path, f"must match the pattern `{pattern}`"))

    def _check_number(self, schema: Mapping[str, object], value: float, path: str, out: list[SchemaProblem]) -> None:
        bounds: list[tuple[str, Callable[[float, float], bool], str]] = [
            ("minimum", lambda v, b: v >= b, "at least"),
            ("exclusiveMinimum", lambda v, b: v > b, "greater than"),
            ("maximum", lambda v, b: v <= b, "at most"),
            ("exclusiveMaximum", lambda v, b: v < b, "less than"),
        ]
        for key, ok, words in bounds:
            bound = schema.get(key)
            if isinstance(bound, int | float) and not isinstance(bound, bool) and not ok(value, bound):
                out.append(SchemaProblem(path, f"must be {words} {_number(bound)} (got {_number(value)})"))
        step = schema.get("multipleOf")
        if isinstance(step, int | float) and not isinstance(step, bool) and step > 0:
            ratio = value / step
            if not math.isclose(ratio, round(ratio), rel_tol=0, abs_tol=1e-9):
                out.append(SchemaProblem(path, f"must be a multiple of {_number(step)}"))

    def _check_object(
        self, schema: Mapping[str, object], value: Mapping[object, object], path: str, out: list[SchemaProblem]
    ) -> None:
        properties = schema.get("properties")
        properties = properties if isinstance(properties, Mapping) else {}
        required = schema.get("required")
        for name in required if isinstance(required, list) else []:
            if isinstance(name, str) and name not in value:
                out.append(SchemaProblem(_join(path, name), "is required"))
        extra = schema.get("additionalProperties", True)
        for key, item in value.items():
            sub = properties.get(key)
            if isinstance(sub, Mapping):
                self.check(sub, item, _join(path, str(key)), out)
            elif extra is False:
                noun = "field" if path else "argument"
                out.append(SchemaProblem(_join(path, str(key)), f"is not a known {noun}"))
            elif isinstance(extra, Mapping):
                self.check(extra, item, _join(path, str(key)), out)
        least = schema.get("minProperties")
        if isinstance(least, int) and len(value) < least:
            out.append(SchemaProblem(path, f"must have at least {least} keys"))

    def _check_array(
        self, schema: Mapping[str, object], value: Sequence[object], path: str, out: list[SchemaProblem]
    ) -> None:
        low, high = schema.get("minItems"), schema.get("maxItems")
        if isinstance(low, int) and len(value) < low:
            out.append(SchemaProblem(path, f"must have at least {low} {'item' if low == 1 else 'items'}"))
        if isinstance(high, int) and len(value) > high:
            out.append(SchemaProblem(path, f"must have at most {high} {'item' if high == 1 else 'items'}"))
        if schema.get("uniqueItems") is True:
            seen: list[object] = []
            for item in value:
                if any(_same(item, s) for s in seen):
                    out.append(SchemaProblem(path, f"must not repeat {_preview(item)}"))
                    break
                seen.append(item)
        prefix = schema.get("prefixItems")
        start = 0
        if isinstance(prefix, list):
            for index, (sub, item) in enumerate(zip(prefix, value, strict=False)):
                if isinstance(sub, Mapping):
                    self.check(sub, item, _join(path, index), out)
            start = len(prefix)
        items = schema.get("items")
        if isinstance(items, Mapping):
            for index in range(start, len(value)):
                self.check(items, value[index], _join(path, index), out)

    def _check_combinators(
        self, schema: Mapping[str, object], value: object, path: str, out: list[SchemaProblem]
    ) -> None:
        every = schema.get("allOf")
        for sub in every if isinstance(every, list) else []:
            if isinstance(sub, Mapping):
                self.check(sub, value, path, out)
        for key in ("anyOf", "oneOf"):
            branches = schema.get(key)
            if not isinstance(branches, list) or not branches:
                continue
            results: list[tuple[Mapping[str, object], list[SchemaProblem]]] = []
            for sub in branches:
                if not isinstance(sub, Mapping):
                    continue
                found: list[SchemaProblem] = []
                self.check(sub, value, path, found)
                results.append((sub, found))
            if any(not found for _, found in results):
                continue
            # Report the branch whose type fits the value, if exactly one does; else the choice.
            fitting = [found for sub, found in results if self._type_fits(sub, value)]
            if len(fitting) == 1:
                out.extend(fitting[0])
            else:
                choices = " or ".join(dict.fromkeys(self._describe(sub) for sub, _ in results))
                out.append(SchemaProblem(path, f"must be {choices}, not {_preview(value)}"))

    def _type_fits(self, schema: Mapping[str, object], value: object) -> bool:
        schema = self.resolve(schema)
        declared = schema.get("type")
        if declared is None:
            return not (("properties" in schema or "required" in schema) and not isinstance(value, Mapping))
        names = [declared] if isinstance(declared, str) else declared if isinstance(declared, list) else []
        return any(_is_type(value, n) for n in names if isinstance(n, str))

    def _describe(self, schema: Mapping[str, object]) -> str:
        schema = self.resolve(schema)
        options = schema.get("enum")
        if isinstance(options, list):
            return "one of " + ", ".join(_preview(o) for o in options)
        declared = schema.get("type")
        if isinstance(declared, str):
            return _TYPE_NAMES.get(declared, declared)
        if "properties" in schema:
            return "an object"
        return "another value"


def _same(a: object, b: object) -> bool:
    """JSON equality: `True` is not `1`, and `1` is `1.0`."""
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    return a == b
