"""A signature's field: its name, kind, type, description, default and constraints, the validator
of its type, and the class form's `InputField` / `OutputField` declarations.

`imp.signature` re-exports these; a signature is built from fields here, in a layer above.
"""

from __future__ import annotations

import enum
import functools
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from types import MappingProxyType
from typing import Any, Literal, TypedDict, Unpack

import pydantic
import pydantic_core

from imp._annotation import admits_none, base_annotation
from imp._jsondata import JSONObject
from imp._typeparse import parse_type, type_to_text
from imp.errors import SignatureError

__all__ = [
    "MISSING",
    "Field",
    "FieldKind",
    "FieldOptions",
    "FieldSpec",
    "InputField",
    "OutputField",
    "load_field",
]

FieldKind = Literal["input", "output"]


class _Missing:
    """The default of a field that has none."""

    _instance: _Missing | None = None

    def __new__(cls) -> _Missing:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: object = _Missing()


@dataclass(frozen=True, eq=False)
class Field:
    """One declared input or output: name, kind, type annotation, description, default, constraints."""

    name: str
    kind: FieldKind
    annotation: Any = str
    desc: str = ""
    default: object = MISSING
    constraints: Mapping[str, Any] = field(default_factory=lambda: MappingProxyType({}))

    def __post_init__(self) -> None:
        object.__setattr__(self, "constraints", MappingProxyType(dict(self.constraints)))
        if "pattern" in self.constraints:
            _check_pattern(self.name, self.constraints["pattern"])

    @cached_property
    def optional(self) -> bool:
        """Whether the field's type admits None."""
        return admits_none(self.annotation)

    @cached_property
    def base_annotation(self) -> object:
        """The annotation without `Annotated[...]` and without the `None` of an optional."""
        return base_annotation(self.annotation)

    @cached_property
    def type_adapter(self) -> pydantic.TypeAdapter[Any]:
        """The pydantic validator of the annotation with the field's constraints."""
        try:
            return _type_adapter(self.annotation, tuple(sorted(self.constraints.items())))
        except TypeError:  # an unhashable annotation or constraint: this field's own validator
            return _make_type_adapter(self.annotation, tuple(self.constraints.items()))

    @property
    def has_default(self) -> bool:
        """Whether a default was declared."""
        return self.default is not MISSING

    @property
    def required(self) -> bool:
        """Whether a value must be given (no default, and None is not allowed)."""
        return not self.has_default and not self.optional

    @cached_property
    def is_plain_text(self) -> bool:
        """An unconstrained string field."""
        return self.annotation is str and not self.constraints

    def replace(self, **changes: object) -> Field:
        """A copy with some attributes changed."""
        values = {
            "name": self.name,
            "kind": self.kind,
            "annotation": self.annotation,
            "desc": self.desc,
            "default": self.default,
            "constraints": self.constraints,
        }
        values.update(changes)
        return Field(**values)

    def dump(self) -> JSONObject:
        """A JSON-friendly copy."""
        out: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "type": type_to_text(self.annotation),
            "desc": self.desc,
            "optional": self.optional,
            "constraints": dict(self.constraints),
        }
        if self.has_default:
            out["default"] = self.default
        return out

    def _key(self) -> tuple[Any, ...]:
        return (
            self.name,
            self.kind,
            type_to_text(self.annotation),
            self.desc,
            repr(self.default),
            dict(self.constraints),
        )

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Field) and self._key() == other._key()

    def __hash__(self) -> int:
        return hash((self.name, self.kind))

    def __deepcopy__(self, memo: dict[int, object]) -> Field:
        return self  # an immutable value (its constraints are a read-only mapping, which copy cannot copy)

    def __repr__(self) -> str:
        return f"Field({self.name!r}, {self.kind}, {type_to_text(self.annotation)})"


_REBUILT_ORIGINS = (list, dict, tuple, set, frozenset)


def _choices_first(annotation: Any) -> object:
    """The annotation with each union's Enum members moved to the front, inside containers too.

    pydantic takes a plain string for an Enum only in lax mode, after the members before it: in
    `bool | Color`, the JSON string `"t"` that names `Color.T` would read as True. Imp writes an
    Enum as its value, so the value must read back as the member; other members keep their order.
    """
    origin = typing.get_origin(annotation)
    args = typing.get_args(annotation)
    if not args:
        return annotation
    if origin in (typing.Union, types.UnionType):
        members = [_choices_first(a) for a in args]
        enums = [m for m in members if isinstance(m, type) and issubclass(m, enum.Enum)]
        if not enums:
            same = all(m is a for m, a in zip(members, args, strict=True))
            return annotation if same else typing.Union[tuple(members)]  # noqa: UP007
        return typing.Union[tuple(enums + [m for m in members if m not in enums])]  # noqa: UP007
    if origin is typing.Annotated:
        inner = _choices_first(args[0])
        return annotation if inner is args[0] else typing.Annotated[(inner, *annotation.__metadata__)]
    if origin in _REBUILT_ORIGINS:
        rebuilt = tuple(a if a is Ellipsis else _choices_first(a) for a in args)
        return annotation if all(r is a for r, a in zip(rebuilt, args, strict=True)) else origin[rebuilt]
    return annotation


def _check_pattern(name: str, pattern: object) -> None:
    """Refuse a pattern the linear-time (Rust) engine cannot run: one from a saved file must not backtrack."""
    try:
        pydantic_core.SchemaValidator(pydantic_core.core_schema.str_schema(pattern=pattern))  # type: ignore[arg-type]
    except (pydantic_core.SchemaError, TypeError) as exc:
        why = f"{str(exc).strip().splitlines()[-1].strip()}; no look-around or back-references"
        raise SignatureError(f"field `{name}`: the pattern {pattern!r:.80} cannot be used ({why})") from None


def _make_type_adapter(annotation: Any, constraints: tuple[tuple[str, Any], ...]) -> pydantic.TypeAdapter[Any]:
    annotation = _choices_first(annotation)
    if constraints:
        annotation = typing.Annotated[annotation, pydantic.Field(**dict(constraints))]
    return pydantic.TypeAdapter(annotation)


# Building a validator costs tens of microseconds; fields copied by `replace()` (a loop's
# per-turn signature) share one per annotation and constraints instead of building their own.
_type_adapter = functools.lru_cache(maxsize=1024)(_make_type_adapter)


@dataclass(frozen=True)
class FieldSpec:
    """What `InputField()` / `OutputField()` leave in a class-form signature's namespace, until the class is read."""

    kind: FieldKind
    desc: str
    default: Any
    constraints: dict[str, Any]


class FieldOptions(TypedDict, total=False):
    """What `InputField` and `OutputField` take: a description, a default, and constraints."""

    desc: str
    default: Any
    gt: float
    ge: float
    lt: float
    le: float
    multiple_of: float
    min_length: int
    max_length: int
    pattern: str


def _spec(kind: FieldKind, options: FieldOptions) -> object:
    values = dict(options)
    unknown = set(values) - set(FieldOptions.__annotations__)
    if unknown:
        raise TypeError(f"unknown field option(s) {sorted(unknown)}; known: {sorted(FieldOptions.__annotations__)}")
    desc = str(values.pop("desc", ""))
    default = values.pop("default", MISSING)
    return FieldSpec(kind, desc, default, {k: v for k, v in values.items() if v is not None})


def InputField(**options: Unpack[FieldOptions]) -> object:
    """Declare an input field in a class-form signature (`desc`, `default`, constraints)."""
    return _spec("input", options)


def OutputField(**options: Unpack[FieldOptions]) -> object:
    """Declare an output field in a class-form signature (`desc`, `default`, constraints)."""
    return _spec("output", options)


def load_field(data: Mapping[str, Any], kind: FieldKind, known: Mapping[str, Any]) -> Field:
    """A field from its `dump()`; `known` names the types the text may mention (`Field.dump`'s `type`)."""
    type_text = str(data.get("type", "str"))
    annotation = parse_type(type_text, names=known)
    return Field(
        str(data["name"]),
        kind,
        annotation,
        str(data.get("desc", "")),
        data.get("default", MISSING),
        data.get("constraints") or {},
    )
