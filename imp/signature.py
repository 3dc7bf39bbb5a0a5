"""Signatures: the declared inputs and outputs of a task, from a string or a class.

The fields themselves (`Field`, `InputField`, `OutputField`, `MISSING`) live in `imp._field`,
below; they are re-exported here, where they have always been imported from.
"""

from __future__ import annotations

import inspect
import re
import sys
import types
import typing
from collections.abc import Hashable, Iterable, Mapping
from functools import cached_property
from types import MappingProxyType
from typing import Any

import pydantic

from imp._annotation import is_history
from imp._field import MISSING, Field, FieldKind, FieldSpec, InputField, OutputField, load_field
from imp._field_names import RESERVED_INPUT_NAMES, RESERVED_OUTPUT_NAMES, name_problem, reserved_name_problem
from imp._jsondata import JSONObject
from imp._typeparse import parse_type, type_to_text
from imp.errors import SignatureError
from imp.media import media_in

_CONSTRAINT_KEYS = ("gt", "ge", "lt", "le", "multiple_of", "min_length", "max_length", "pattern")

__all__ = [
    "MISSING",
    "RESERVED_INPUT_NAMES",
    "RESERVED_OUTPUT_NAMES",
    "Field",
    "FieldKind",
    "InputField",
    "OutputField",
    "Signature",
    "SignatureLike",
    "as_signature",
    "reserved_name_problem",
    "signature",
]


class _SignatureMeta(type):
    """Turns `class X(imp.Signature): ...` into a Signature value rather than a new class."""

    def __new__(mcls, name: str, bases: tuple[type, ...], ns: dict[str, Any], **kwargs: object) -> Any:
        if not bases:
            return super().__new__(mcls, name, bases, ns, **kwargs)
        return Signature._from_class(name, ns)


class Signature(metaclass=_SignatureMeta):
    """An immutable task declaration: ordered inputs and outputs, instructions and metadata."""

    __slots__ = ("__dict__", "derived", "inputs", "instructions", "metadata", "name", "outputs")

    inputs: Mapping[str, Field]
    outputs: Mapping[str, Field]
    instructions: str
    metadata: Mapping[str, Any]
    name: str
    derived: dict[Hashable, Any]
    """Values worked out from this signature alone (an adapter's system message), kept with it.

    Only caches belong here, keyed by who derives them (an adapter class), so dialects never
    collide; a signature made by `with_instructions()` and the like starts empty.
    """

    def __init__(
        self,
        inputs: Iterable[Field],
        outputs: Iterable[Field],
        instructions: str | None = None,
        *,
        metadata: Mapping[str, object] | None = None,
        name: str = "Signature",
    ) -> None:
        ins = {f.name: f.replace(kind="input") if f.kind != "input" else f for f in inputs}
        outs = {f.name: f.replace(kind="output") if f.kind != "output" else f for f in outputs}
        _check_fields(list(ins.values()), list(outs.values()))
        object.__setattr__(self, "inputs", MappingProxyType(ins))
        object.__setattr__(self, "outputs", MappingProxyType(outs))
        if instructions is not None and not isinstance(instructions, str):
            raise TypeError(f"a signature's instructions are a string, got {type(instructions).__name__}")
        text = inspect.cleandoc(instructions) if instructions else _default_instructions(ins, outs)
        object.__setattr__(self, "instructions", text)
        object.__setattr__(self, "metadata", MappingProxyType(dict(metadata or {})))
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "derived", {})

    def __setattr__(self, key: str, value: object) -> None:
        raise AttributeError(f"a Signature is immutable; use with_instructions(), prepend_output() ... ({key})")

    def __delattr__(self, key: str) -> None:
        raise AttributeError("a Signature is immutable")

    @cached_property
    def fields(self) -> Mapping[str, Field]:
        """Inputs then outputs, by name."""
        return MappingProxyType({**self.inputs, **self.outputs})

    def _replace(self, **changes: object) -> Signature:
        values: dict[str, Any] = {
            "inputs": self.inputs.values(),
            "outputs": self.outputs.values(),
            "instructions": self.instructions,
            "metadata": self.metadata,
            "name": self.name,
        }
        values.update(changes)
        return Signature(**values)

    def with_instructions(self, instructions: str) -> Signature:
        """The same fields with other instructions."""
        return self._replace(instructions=instructions)

    def with_metadata(self, **metadata: object) -> Signature:
        """The same signature with metadata keys added or replaced."""
        return self._replace(metadata={**self.metadata, **metadata})

    def prepend_output(self, name: str, annotation: object = str, desc: str = "", **kwargs: Any) -> Signature:
        """A signature with a new first output (as chain_of_thought adds `reasoning`)."""
        new = Field(name, "output", annotation, desc, **kwargs)
        return self._replace(outputs=[new, *(f for f in self.outputs.values() if f.name != name)])

    def append_output(self, name: str, annotation: object = str, desc: str = "", **kwargs: Any) -> Signature:
        """A signature with a new last output."""
        new = Field(name, "output", annotation, desc, **kwargs)
        return self._replace(outputs=[*(f for f in self.outputs.values() if f.name != name), new])

    def without(self, *names: str) -> Signature:
        """A signature without these fields."""
        return self._replace(
            inputs=[f for f in self.inputs.values() if f.name not in names],
            outputs=[f for f in self.outputs.values() if f.name not in names],
        )

    @cached_property
    def history_field(self) -> str | None:
        """The name of the input annotated `imp.History`, if any."""
        for f in self.inputs.values():
            if is_history(f.annotation):
                return f.name
        return None

    @cached_property
    def output_model(self) -> type[pydantic.BaseModel]:
        """A pydantic model of the outputs (for their JSON schema)."""
        definitions: dict[str, Any] = {}
        for f in self.outputs.values():
            info = pydantic.Field(
                default=f.default if f.has_default else (None if f.optional else ...),
                description=f.desc or None,
                **dict(f.constraints),
            )
            definitions[f.name] = (f.annotation, info)
        return pydantic.create_model("Outputs", **definitions)

    def json_schema(self) -> JSONObject:
        """The JSON schema of the outputs, as one object."""
        schema = self.output_model.model_json_schema()
        schema["additionalProperties"] = False
        return schema

    def dump(self) -> JSONObject:
        """A JSON-friendly copy, readable by `Signature.load`."""
        return {
            "name": self.name,
            "instructions": self.instructions,
            "inputs": [f.dump() for f in self.inputs.values()],
            "outputs": [f.dump() for f in self.outputs.values()],
            "metadata": dict(self.metadata),
        }

    @classmethod
    def load(cls, data: Mapping[str, Any], *, types: Mapping[str, Any] | None = None) -> Signature:
        """Read a signature from `dump()` output; `types` resolves names of your own classes."""
        try:
            inputs = [load_field(f, "input", types or {}) for f in data["inputs"]]
            outputs = [load_field(f, "output", types or {}) for f in data["outputs"]]
        except KeyError as exc:
            raise SignatureError(f"a signature dump needs {exc.args[0]!r}") from None
        return Signature(
            inputs, outputs, data.get("instructions"), metadata=data.get("metadata"), name=data.get("name", "Signature")
        )

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Signature):
            return NotImplemented
        return (
            list(self.inputs.values()) == list(other.inputs.values())
            and list(self.outputs.values()) == list(other.outputs.values())
            and self.instructions == other.instructions
            and dict(self.metadata) == dict(other.metadata)
        )

    def __hash__(self) -> int:
        return hash((tuple(self.inputs), tuple(self.outputs), self.instructions))

    def __deepcopy__(self, memo: dict[int, object]) -> Signature:
        return self  # an immutable value: `copy.deepcopy(program)` shares it

    def __repr__(self) -> str:
        ins = ", ".join(self.inputs)
        outs = ", ".join(self.outputs)
        return f"Signature({ins} -> {outs})"

    @classmethod
    def _from_class(cls, name: str, ns: dict[str, Any]) -> Signature:
        module = sys.modules.get(ns.get("__module__", ""), None)
        holder = types.new_class(
            name,
            (),
            {},
            lambda body: body.update(
                {"__annotations__": ns.get("__annotations__", {}), "__module__": ns.get("__module__")}
            ),
        )
        try:
            hints = typing.get_type_hints(holder, globalns=vars(module) if module else None, include_extras=True)
        except NameError as exc:
            raise SignatureError(f"signature class {name}: cannot resolve annotation ({exc})") from None
        for field_name in hints:
            if not isinstance(ns.get(field_name), FieldSpec):
                raise SignatureError(
                    f"signature class {name}: field `{field_name}` needs `= imp.InputField()` or `= imp.OutputField()`"
                )
        inputs: list[Field] = []
        outputs: list[Field] = []
        # In the order the class declares them; a field without an annotation is a string field,
        # as in DSPy: nothing declared is dropped.
        for field_name, spec in ns.items():
            if isinstance(spec, FieldSpec):
                annotation = hints.get(field_name, str)
                made = Field(field_name, spec.kind, annotation, spec.desc, spec.default, spec.constraints)
                (inputs if spec.kind == "input" else outputs).append(made)
        doc = ns.get("__doc__")
        return Signature(inputs, outputs, doc, name=name)


SignatureLike = Signature | str


def _default_instructions(inputs: Mapping[str, Field], outputs: Mapping[str, Field]) -> str:
    ins = ", ".join(f"`{n}`" for n in inputs)
    outs = ", ".join(f"`{n}`" for n in outputs)
    return f"Given the fields {ins}, produce the fields {outs}."


def _check_fields(inputs: list[Field], outputs: list[Field]) -> None:
    seen: set[str] = set()
    for f in [*inputs, *outputs]:
        problem = name_problem(f.name, f.kind)
        if problem is not None:
            raise SignatureError(problem)
        if f.name in seen:
            raise SignatureError(f"input and output fields must have distinct names, but found duplicates: '{f.name}'")
        seen.add(f.name)
        unknown = set(f.constraints) - set(_CONSTRAINT_KEYS)
        if unknown:
            raise SignatureError(f"field `{f.name}`: unknown constraint {sorted(unknown)}; known: {_CONSTRAINT_KEYS}")
    for f in outputs:
        if (media := media_in(f.annotation)) is not None:
            raise SignatureError(
                f"output `{f.name}` is {type_to_text(f.annotation)}: imp.{media.__name__} is an input type "
                "(a model replies with text); make it an input, or the output a description of it"
            )


# --- the string form ------------------------------------------------------------------------

_FIELD = re.compile(r"\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?::(.*))?\Z", re.DOTALL)


def _split_top(text: str, sep: str, start: int) -> list[tuple[str, int]]:
    """Split on `sep` outside brackets and quotes; each piece with its offset."""
    pieces: list[tuple[str, int]] = []
    depth, quote, begin, i = 0, "", 0, 0
    while i < len(text):
        char = text[i]
        if quote:
            quote = "" if char == quote else quote
        elif char in "\"'":
            quote = char
        elif char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif depth == 0 and text.startswith(sep, i):
            pieces.append((text[begin:i], start + begin))
            i += len(sep)
            begin = i
            continue
        i += 1
    pieces.append((text[begin:], start + begin))
    return pieces


def _parse_side(text: str, offset: int, kind: FieldKind, source: str) -> list[Field]:
    fields: list[Field] = []
    seen: set[str] = set()
    for piece, at in _split_top(text, ",", offset):
        if not piece.strip():
            continue
        match = _FIELD.match(piece)
        if not match:
            lead = len(piece) - len(piece.lstrip())
            raise SignatureError(
                'expected `name`, `name: type`, or `name: type "description"`', text=source, position=at + lead
            )
        name = match.group(1)
        name_at = at + match.start(1)
        problem = reserved_name_problem(name, kind)
        if problem is not None:
            raise SignatureError(problem, text=source, position=name_at)
        if name in seen:
            raise SignatureError(f"the field `{name}` is declared twice", text=source, position=name_at)
        seen.add(name)
        annotation: object = str
        desc = ""
        rest = match.group(2)
        if rest is not None:
            rest_at = at + match.start(2)
            type_text, desc = _split_desc(rest, rest_at, source)
            if not type_text.strip():
                raise SignatureError(f"the field `{name}` has `:` but no type", text=source, position=rest_at)
            annotation = parse_type(type_text, source=source, offset=rest_at)
        fields.append(Field(name, kind, annotation, desc))
    return fields


def _split_desc(rest: str, at: int, source: str) -> tuple[str, str]:
    depth = 0
    for i, char in enumerate(rest):
        if char == "[":
            depth += 1
        elif char == "]":
            depth -= 1
        elif char == '"' and depth == 0:
            end = rest.find('"', i + 1)
            if end == -1:
                raise SignatureError("the description's `\"` is never closed", text=source, position=at + i)
            if rest[end + 1 :].strip():
                raise SignatureError("unexpected text after the description", text=source, position=at + end + 1)
            return rest[:i], rest[i + 1 : end]
    return rest, ""


def signature(spec: str | Signature, instructions: str | None = None) -> Signature:
    """Build a signature from `"inputs -> outputs"` (or copy one with new instructions)."""
    if isinstance(spec, Signature):
        return spec.with_instructions(instructions) if instructions else spec
    if not isinstance(spec, str):
        raise TypeError(f"imp.signature takes a string like 'question -> answer', got {type(spec).__name__}")
    arrows = _split_top(spec, "->", 0)
    if len(arrows) == 1:
        raise SignatureError(
            'a signature needs exactly one `->` between its inputs and outputs, as in "question -> answer"',
            text=spec,
            position=len(spec.rstrip()),
        )
    if len(arrows) > 2:
        raise SignatureError(
            "a signature has exactly one `->`; found another here", text=spec, position=arrows[2][1] - 2
        )
    (left, left_at), (right, right_at) = arrows
    inputs = _parse_side(left, left_at, "input", spec)
    outputs = _parse_side(right, right_at, "output", spec)
    if not inputs:
        raise SignatureError("a signature needs at least one input field before `->`", text=spec, position=0)
    if not outputs:
        raise SignatureError("a signature needs at least one output field after `->`", text=spec, position=right_at)
    for f in outputs:
        if f.name in {i.name for i in inputs}:
            position = right_at + right.find(f.name)
            raise SignatureError(
                f"input and output fields must have distinct names, but found duplicates: '{f.name}'",
                text=spec,
                position=position,
            )
    return Signature(inputs, outputs, instructions)


def as_signature(value: SignatureLike | type[Signature]) -> Signature:
    """Accept a Signature, a class-form signature or a string spec."""
    if isinstance(value, Signature):
        return value
    if isinstance(value, str):
        return signature(value)
    raise TypeError(f"expected a signature or a string like 'question -> answer', got {type(value).__name__}")
