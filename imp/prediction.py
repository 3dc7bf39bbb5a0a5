"""Prediction (a program's outputs plus metadata) and Example (a labelled data point)."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from imp._frozen import fast_init
from imp.history import History
from imp.records import ToolCall, Usage

__all__ = ["Example", "Prediction", "PredictionMetadata"]


@fast_init
@dataclass(frozen=True, slots=True)
class PredictionMetadata:
    """How a prediction came about: the loop's account, usage, and what the provider said."""

    history: History | None = None
    termination_reason: str | None = None
    termination_cause: str | None = None
    termination_error: Any = None
    finished_by_tool: str | None = None
    unexecuted_tool_calls: tuple[ToolCall, ...] = ()
    context_projection: Mapping[str, Any] | None = None
    finish_reason: str | None = None
    usage: Usage | None = None
    usage_by_model: Mapping[str, Usage] | None = None
    adapter: str | None = None
    json_fallback: bool = False
    lm_calls: int = 0
    replayed: int = 0
    """Steps of a journaled run (LM exchanges, tool calls) answered from the journal, not run again."""
    model: str | None = None
    """`"provider:model"` of the member of an `imp.fallback` chain that answered a predict's request
    (None for a plain LM: it is the one that answered)."""
    pending: Any = None
    """A paused turn's `imp.Pending` (`termination_reason == "awaiting_approval"`, or a resume that ran
    nothing because its deadline had passed: the turn still waits), else None."""
    extra: Mapping[str, Any] = field(default_factory=dict)

    def __getitem__(self, key: str) -> Any:
        if key in _METADATA_KEYS:
            return getattr(self, key)
        try:
            return self.extra[key]
        except KeyError:
            known = ", ".join([*sorted(_METADATA_KEYS), *self.extra])
            raise KeyError(f"prediction metadata has no key {key!r} (keys: {known})") from None

    def get(self, key: str, default: object = None) -> Any:
        """The value under `key`, or `default`."""
        try:
            return self[key]
        except KeyError:
            return default

    def replace(self, **changes: Any) -> PredictionMetadata:
        """A copy with some keys changed."""
        return replace(self, **changes)


_METADATA_KEYS = frozenset(f.name for f in fields(PredictionMetadata)) - {"extra"}


class _Fields:
    """Read-only access to a mapping of fields, as attributes and as items."""

    __slots__ = ("_fields",)
    _fields: dict[str, Any]
    _noun: str = "value"

    def __getattr__(self, name: str) -> Any:
        fields_ = object.__getattribute__(self, "_fields")
        try:
            return fields_[name]
        except KeyError:
            raise AttributeError(self._no_field(name)) from None

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} values are immutable")

    def __getitem__(self, name: str) -> Any:
        try:
            return self._fields[name]
        except KeyError:
            raise KeyError(self._no_field(name)) from None

    def _no_field(self, name: object) -> str:
        known = ", ".join(self._fields) or "none"
        return f"this {self._noun} has no field {name!r} (fields: {known})"

    def __contains__(self, name: object) -> bool:
        return name in self._fields

    def __iter__(self) -> Iterator[str]:
        return iter(self._fields)

    def __len__(self) -> int:
        return len(self._fields)

    def get(self, name: str, default: object = None) -> Any:
        """The field's value, or `default`."""
        return self._fields.get(name, default)

    def keys(self) -> list[str]:
        """The field names."""
        return list(self._fields)

    def items(self) -> list[tuple[str, Any]]:
        """The fields as pairs."""
        return list(self._fields.items())

    __hash__ = None  # type: ignore[assignment]

    def _body(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self._fields.items())


class Prediction(_Fields):
    """A program's output fields (as attributes and items) and its metadata."""

    __slots__ = ("_complete", "_metadata")
    _noun = "prediction"
    _metadata: PredictionMetadata
    _complete: bool

    def __init__(
        self,
        fields: Mapping[str, object] | None = None,
        metadata: PredictionMetadata | None = None,
        *,
        complete: bool = True,
    ) -> None:
        # Straight through the slots' descriptors (`__setattr__` refuses): one Prediction per call.
        _set_fields(self, dict(fields) if fields else {})
        _set_metadata(self, PredictionMetadata() if metadata is None else metadata)
        _set_complete(self, complete)

    @property
    def fields(self) -> dict[str, Any]:
        """The output fields (a copy)."""
        return dict(self._fields)

    @property
    def metadata(self) -> PredictionMetadata:
        """The loop's account, usage and provider details; never mixed with the outputs."""
        return self._metadata

    @property
    def complete(self) -> bool:
        """False exactly when the turn has no answer."""
        return self._complete

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Prediction):
            return self._fields == other._fields and self._complete == other._complete
        return NotImplemented

    def __reduce__(self) -> tuple[Any, ...]:
        return (_prediction, (self._fields, self._metadata, self._complete))

    def __repr__(self) -> str:
        tail = "" if self._complete else ", complete=False"
        return f"Prediction({self._body()}{tail})"


_set_fields = _Fields.__dict__["_fields"].__set__
_set_metadata = Prediction.__dict__["_metadata"].__set__
_set_complete = Prediction.__dict__["_complete"].__set__


class Example(_Fields):
    """A data point: fields, and which of them are the inputs (`with_inputs`)."""

    __slots__ = ("_input_keys",)
    _noun = "example"
    _input_keys: tuple[str, ...] | None

    def __init__(self, base: Mapping[str, object] | None = None, /, **fields: Any) -> None:
        object.__setattr__(self, "_fields", {**dict(base or {}), **fields})
        object.__setattr__(self, "_input_keys", None)

    def with_inputs(self, *names: str) -> Example:
        """A copy that marks these fields as the inputs; the rest are labels."""
        unknown = [n for n in names if n not in self._fields]
        if unknown:
            raise KeyError(f"with_inputs names fields this example does not have: {unknown}")
        copy = Example(self._fields)
        object.__setattr__(copy, "_input_keys", tuple(names))
        return copy

    def _keys(self) -> tuple[str, ...]:
        if self._input_keys is None:
            raise ValueError("this example has no declared inputs; call .with_inputs('field', ...) first")
        return self._input_keys

    def inputs(self) -> dict[str, Any]:
        """The input fields."""
        return {k: self._fields[k] for k in self._keys()}

    def labels(self) -> dict[str, Any]:
        """The fields that are not inputs."""
        keys = self._keys()
        return {k: v for k, v in self._fields.items() if k not in keys}

    def to_dict(self) -> dict[str, Any]:
        """Every field."""
        return dict(self._fields)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Example):
            return self._fields == other._fields and self._input_keys == other._input_keys
        return NotImplemented

    def __reduce__(self) -> tuple[Any, ...]:
        return (_example, (self._fields, self._input_keys))

    def __repr__(self) -> str:
        body = self._body()
        marks = f", inputs={list(self._input_keys)}" if self._input_keys is not None else ""
        return f"Example({body}{marks})"


def _prediction(fields: dict[str, Any], metadata: PredictionMetadata, complete: bool) -> Prediction:
    return Prediction(fields, metadata, complete=complete)


def _example(fields: dict[str, Any], input_keys: tuple[str, ...] | None) -> Example:
    example = Example(fields)
    return example.with_inputs(*input_keys) if input_keys is not None else example
