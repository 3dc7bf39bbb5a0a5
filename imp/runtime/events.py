"""What happens in a run, as typed records: one payload type per event kind.

imp's own events are these records (`ModelResponse`, `ToolCalled`, ...); every reader (streaming,
OpenTelemetry, the run's picture, the recorder, the ACP agent) dispatches on their type and reads
their fields. An event a program of your own emits (`emit("lookup", url=...)`) is `Custom`. Each
payload also reads as the mapping it is dumped as (`payload["finish_reason"]`), so code written
for that shape works: a field without a default is always there, one that defaults to None only
when it is set, and a payload cut to size says so with `truncated` and `original_size`.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import ItemsView, Iterator, KeysView, Mapping, ValuesView
from dataclasses import dataclass
from typing import Any, ClassVar, Literal

from imp._frozen import fast_init
from imp._redact import redact
from imp.records import ToolOutcome, Usage, plain

__all__ = [
    "EVENT_KINDS",
    "MAX_EVENT_BYTES",
    "ContextProjected",
    "Custom",
    "EventKind",
    "ModelContent",
    "ModelError",
    "ModelRequest",
    "ModelResponse",
    "ModelRetry",
    "OutputRetry",
    "Payload",
    "Reasoning",
    "RunCancelled",
    "RunFailed",
    "RunFinished",
    "RunStarted",
    "ToolCalled",
    "ToolReturned",
    "bound_payload",
    "payload_of",
]

EventKind = Literal[
    "run_started",
    "run_finished",
    "run_failed",
    "run_cancelled",
    "model_request",
    "model_response",
    "model_error",
    "model_retry",
    "model_content",
    "tool_call",
    "tool_result",
    "reasoning",
    "context_projected",
    "output_retry",
]
"""imp's own event kinds, one payload type each."""

MAX_EVENT_BYTES = 16 * 1024
"""An event payload larger than this (serialized as JSON) is cut: long strings shortened, long
lists and mappings trimmed, and `truncated: True` plus `original_size` (bytes) added."""

_STRING_KEEP = 1024
_ITEMS_KEEP = 32


class Payload:
    """What one event says, by kind; also readable as the mapping it dumps to.

    A plain class registered as a `Mapping` (not derived from the ABC), so telling payloads apart is
    a plain type check on every event a sink receives.
    """

    __slots__ = ()
    kind: ClassVar[str]
    original_size: int | None
    """Set when the payload was cut to `MAX_EVENT_BYTES`: its size before, in bytes (0: it could not be measured)."""

    def dump(self) -> dict[str, Any]:
        """JSON-ready data: the fields that are set (see the module's docstring), then the cut marker."""
        out: dict[str, Any] = {}
        for name, always in _layout(type(self)):
            value = getattr(self, name)
            if value is not None or always:
                out[name] = value.dump() if isinstance(value, Usage) else plain(value)
        if self.original_size is not None:
            out["truncated"] = True
            out["original_size"] = self.original_size
        return out

    def redacted(self) -> Payload:
        """The same payload with secrets replaced in every text and nested value (by key name and shape)."""
        cls: Any = type(self)
        values = {name: _redacted(getattr(self, name)) for name, _ in _layout(cls)}
        made: Payload = cls(**values, original_size=self.original_size)
        return made

    def bounded(self, limit: int = MAX_EVENT_BYTES) -> Payload:
        """This payload when it serializes to at most `limit` bytes, else a cut copy that says so."""
        if not _open_fields(type(self)):
            return self
        try:
            size = _size(self.dump())
        except Exception:  # a circular structure, or a value whose str() raises: size unknown (0)
            return self._with(_preview, 0)
        if size <= limit:
            return self
        cut = self._with(_shrink, size)
        if _size(cut.dump()) <= limit:
            return cut
        return self._with(lambda value: _preview(value, limit // 8), size)

    def _with(self, change: Any, size: int | None) -> Payload:
        cls: Any = type(self)
        values = {
            name: change(value) if name in _open_fields(type(self)) and value is not None else value
            for name, value in ((n, getattr(self, n)) for n, _ in _layout(type(self)))
        }
        made: Payload = cls(**values, original_size=size)
        return made

    # --- the mapping it reads as --------------------------------------------------------------

    def __getitem__(self, key: str) -> Any:
        return self.dump()[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.dump())

    def __len__(self) -> int:
        return len(self.dump())

    def __contains__(self, key: object) -> bool:
        return key in self.dump()

    def get(self, key: str, default: object = None) -> Any:
        """The value under `key` in the payload's mapping, or `default`."""
        return self.dump().get(key, default)

    def keys(self) -> KeysView[str]:
        """The keys of the payload's mapping."""
        return self.dump().keys()

    def items(self) -> ItemsView[str, Any]:
        """The items of the payload's mapping."""
        return self.dump().items()

    def values(self) -> ValuesView[Any]:
        """The values of the payload's mapping."""
        return self.dump().values()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Payload | Mapping):
            return self.dump() == dict(other.items())
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # equal to the mapping it dumps to, which is not hashable

    # Read-only, as an event every sink sees must be (one guard here rather than a frozen
    # dataclass's pair of generated methods in each record: they are built when imp is imported).
    def __setattr__(self, name: str, value: object) -> None:
        raise dataclasses.FrozenInstanceError(f"an event payload is read-only: cannot set {name!r}")

    def __delattr__(self, name: str) -> None:
        raise dataclasses.FrozenInstanceError(f"an event payload is read-only: cannot delete {name!r}")

    def __setstate__(self, state: object) -> None:
        """Unpickling sets the slots past the read-only guard (pickle would call `__setattr__`)."""
        held, slots = state if isinstance(state, tuple) else (state, None)
        for values in (held, slots):
            for name, value in (values or {}).items() if isinstance(values, dict) else ():
                object.__setattr__(self, name, value)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.dump()!r})"


Mapping.register(Payload)

_LAYOUTS: dict[type, tuple[tuple[str, bool], ...]] = {}
_OPEN: dict[type, frozenset[str]] = {}


def _layout(cls: type) -> tuple[tuple[str, bool], ...]:
    """Each field but the cut marker, and whether it is shown when None (it has no default)."""
    layout = _LAYOUTS.get(cls)
    if layout is None:
        layout = tuple(
            (f.name, f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING)
            for f in dataclasses.fields(cls)
            if f.name != "original_size"
        )
        _LAYOUTS[cls] = layout
    return layout


def _open_fields(cls: type) -> frozenset[str]:
    """The fields whose size the payload does not bound by itself (text and values from outside)."""
    found = _OPEN.get(cls)
    if found is None:
        found = frozenset(getattr(cls, "_open", ()))
        _OPEN[cls] = found
    return found


def _redacted(value: object) -> object:
    if value is None or isinstance(value, bool | int | float | Usage):
        return value
    return redact(value)


def _size(value: object) -> int:
    return len(json.dumps(value, default=str, ensure_ascii=False).encode())


def _shrink(value: object, depth: int = 0) -> Any:
    if isinstance(value, str):
        if len(value) <= _STRING_KEEP:
            return value
        return f"{value[:_STRING_KEEP]}... [{len(value) - _STRING_KEEP} more characters]"
    if isinstance(value, Mapping):
        items = list(value.items())
        kept = {str(k): _shrink(v, depth + 1) for k, v in items[: _ITEMS_KEEP * 2]}
        if len(items) > _ITEMS_KEEP * 2:
            kept["..."] = f"{len(items) - _ITEMS_KEEP * 2} more keys"
        return kept
    if isinstance(value, list | tuple):
        shown = [_shrink(v, depth + 1) for v in value[:_ITEMS_KEEP]]
        if len(value) > _ITEMS_KEEP:
            shown.append(f"... {len(value) - _ITEMS_KEEP} more items")
        return shown
    return value


def _preview(value: object, keep: int = _STRING_KEEP) -> str:
    try:
        text = value if isinstance(value, str) else json.dumps(value, default=str, ensure_ascii=False)
    except Exception:
        try:
            text = repr(value)
        except Exception:
            return f"<{type(value).__name__} that cannot be shown>"
    return text[:keep]


def bound_payload(payload: dict[str, Any], limit: int = MAX_EVENT_BYTES) -> dict[str, Any]:
    """A mapping payload itself when it serializes to at most `limit` bytes, else a cut copy that says so."""
    try:
        size = _size(payload)
    except Exception:  # a circular structure, or a value whose str() raises: keep a preview
        try:
            preview = repr(payload)[:_STRING_KEEP]
        except Exception:
            preview = f"<{type(payload).__name__} that cannot be shown>"
        return {"truncated": True, "original_size": None, "preview": preview}
    if size <= limit:
        return payload
    cut = _shrink(payload)
    if _size(cut) > limit:
        preview = json.dumps(cut, default=str, ensure_ascii=False)[: limit // 2]
        cut = {"preview": preview}
    return {**cut, "truncated": True, "original_size": size}


# --- the run ---------------------------------------------------------------------------------------


@fast_init
@dataclass(slots=True, eq=False, repr=False)
class RunStarted(Payload):
    """A call began: which program (its class name)."""

    kind: ClassVar[str] = "run_started"
    program: str
    original_size: int | None = None


@fast_init
@dataclass(slots=True, eq=False, repr=False)
class RunFinished(Payload):
    """A call returned its Prediction: whether complete, and why the turn ended (a loop's reason and cause)."""

    kind: ClassVar[str] = "run_finished"
    complete: bool
    termination_reason: str | None
    termination_cause: str | None
    original_size: int | None = None


@fast_init
@dataclass(slots=True, eq=False, repr=False)
class RunFailed(Payload):
    """A call raised: the error as `Type: message`."""

    kind: ClassVar[str] = "run_failed"
    _open: ClassVar[tuple[str, ...]] = ("error",)
    error: str
    original_size: int | None = None


@fast_init
@dataclass(slots=True, eq=False, repr=False)
class RunCancelled(Payload):
    """A call was cancelled."""

    kind: ClassVar[str] = "run_cancelled"
    original_size: int | None = None


# --- LM requests -----------------------------------------------------------------------------------


@fast_init
@dataclass(slots=True, eq=False, repr=False)
class ModelRequest(Payload):
    """An LM request is sent: the model (`provider:model`) and how many messages; a loop adds its step."""

    kind: ClassVar[str] = "model_request"
    model: str | None = None
    messages: int | None = None
    step: int | None = None
    forced: bool | None = None
    """The loop's last request of an interrupted turn."""
    program: str | None = None
    """The program that announced the request itself (a trajectory loop)."""
    extract: bool | None = None
    """The trajectory loop's extraction."""
    original_size: int | None = None


@fast_init
@dataclass(slots=True, eq=False, repr=False)
class ModelResponse(Payload):
    """An LM request was answered: the model, finish reason, the tools the reply called, usage, duration."""

    kind: ClassVar[str] = "model_response"
    model: str | None = None
    finish_reason: str | None = None
    tool_calls: tuple[str, ...] = ()
    """The names of the tools the reply called."""
    usage: Usage | None = None
    cache_hit: bool | None = None
    duration: float | None = None
    """Seconds from the request to its answer."""
    step: int | None = None
    forced: bool | None = None
    original_size: int | None = None

    def dump(self) -> dict[str, Any]:
        out = Payload.dump(self)
        if self.model is not None and "finish_reason" not in out:
            out = {"model": self.model, "finish_reason": None, **out}  # a provider's answer says it, even when None
        return out


@fast_init
@dataclass(slots=True, eq=False, repr=False)
class ModelError(Payload):
    """An LM request failed: the model, status, error type and whether it was retryable, the error, duration."""

    kind: ClassVar[str] = "model_error"
    _open: ClassVar[tuple[str, ...]] = ("error",)
    model: str
    status: int | None
    error_type: str
    retryable: bool
    error: str
    duration: float
    step: int | None = None
    forced: bool | None = None
    original_size: int | None = None


@fast_init
@dataclass(slots=True, eq=False, repr=False)
class ModelRetry(Payload):
    """One attempt of an LM request failed and is retried after `wait` seconds."""

    kind: ClassVar[str] = "model_retry"
    _open: ClassVar[tuple[str, ...]] = ("error",)
    model: str
    attempt: int
    status: int | None
    error_type: str
    error: str
    wait: float
    original_size: int | None = None


@fast_init
@dataclass(slots=True, eq=False, repr=False)
class ModelContent(Payload):
    """What an answered or failed LM request sent and got back (`imp.observe.Recorder(content=True)`)."""

    kind: ClassVar[str] = "model_content"
    _open: ClassVar[tuple[str, ...]] = ("messages", "reply")
    messages: list[Any]
    """The messages sent, as JSON-ready data."""
    reply: Mapping[str, Any] | None = None
    """The reply's `text`, and its `fields` and `tool_calls` when it has them."""
    original_size: int | None = None


# --- a loop's steps --------------------------------------------------------------------------------


@fast_init
@dataclass(slots=True, eq=False, repr=False)
class ToolCalled(Payload):
    """A tool call was received (before its lookup, policy, schema and authorization): `index` in its step."""

    kind: ClassVar[str] = "tool_call"
    _open: ClassVar[tuple[str, ...]] = ("arguments",)
    tool_call_id: str
    tool_name: str
    index: int | None = None
    arguments: Mapping[str, Any] | str | None = None
    original_size: int | None = None


@fast_init
@dataclass(slots=True, eq=False, repr=False)
class ToolReturned(Payload):
    """A tool call ended: its output or error, its outcome, and the seconds since its `tool_call`."""

    kind: ClassVar[str] = "tool_result"
    _open: ClassVar[tuple[str, ...]] = ("output", "error")
    tool_call_id: str
    tool_name: str
    index: int | None = None
    output: Any = None
    error: str | None = None
    outcome: ToolOutcome | None = None
    duration: float | None = None
    original_size: int | None = None


@fast_init
@dataclass(slots=True, eq=False, repr=False)
class Reasoning(Payload):
    """A loop step's thought (the text the model wrote beside its calls, or alone)."""

    kind: ClassVar[str] = "reasoning"
    _open: ClassVar[tuple[str, ...]] = ("text",)
    step: int
    text: str
    forced: bool = False
    original_size: int | None = None


@fast_init
@dataclass(slots=True, eq=False, repr=False)
class ContextProjected(Payload):
    """A request over the context window is sent again with older steps left out."""

    kind: ClassVar[str] = "context_projected"
    reason: str
    recovery_requests: int
    omitted_prior_entries: int | None = None
    """`react`: the steps of the given history left out."""
    omitted_prior_groups: int | None = None
    """`react`: the episodes they make."""
    omitted_steps: int | None = None
    """`react_trajectory`: the oldest steps of the trajectory left out."""
    original_size: int | None = None


@fast_init
@dataclass(slots=True, eq=False, repr=False)
class OutputRetry(Payload):
    """An answer was refused (its program's validator raised `imp.Retry`, or the reply could not be
    read) and the model is asked again: `attempt` is the refused one's number, from 1."""

    kind: ClassVar[str] = "output_retry"
    _open: ClassVar[tuple[str, ...]] = ("reason",)
    attempt: int
    reason: str
    program: str | None = None
    original_size: int | None = None


class Custom(dict[str, Any], Payload):  # type: ignore[misc]  # a dict, so it serializes as emitted; dict's own get and views
    """An event of a program's own (`emit("lookup", url=...)`), or one that does not fit its kind's record:
    the mapping as emitted (redacted and cut to size like any payload)."""

    __slots__ = ()
    kind: ClassVar[str] = "custom"

    @property
    def original_size(self) -> int | None:  # type: ignore[override]
        """The size before the payload was cut, when it was (see `Payload.original_size`)."""
        size = self.get("original_size") if self.get("truncated") else None
        return size if isinstance(size, int) else None

    def dump(self) -> dict[str, Any]:
        return dict(self)

    def redacted(self) -> Payload:
        return Custom(redact(dict(self)))

    def bounded(self, limit: int = MAX_EVENT_BYTES) -> Payload:
        cut = bound_payload(self, limit)
        return self if cut is self else Custom(cut)

    def __repr__(self) -> str:
        return f"Custom({dict.__repr__(self)})"


PAYLOADS: dict[str, type[Payload]] = {
    cls.kind: cls
    for cls in (
        RunStarted,
        RunFinished,
        RunFailed,
        RunCancelled,
        ModelRequest,
        ModelResponse,
        ModelError,
        ModelRetry,
        ModelContent,
        ToolCalled,
        ToolReturned,
        Reasoning,
        ContextProjected,
        OutputRetry,
    )
}
"""Each of imp's kinds and its payload type."""
EVENT_KINDS = frozenset(PAYLOADS)


def payload_of(kind: str, data: Mapping[str, Any]) -> Payload:
    """The payload record of a kind from its mapping (a dump, or `emit`'s keywords); `Custom` when the
    kind is not imp's or the keys do not fit its record (a cut payload's marker is read back)."""
    if isinstance(data, Payload):
        return data
    cls = PAYLOADS.get(kind)
    if cls is None:
        return Custom(dict(data))
    values = {k: v for k, v in data.items() if k not in ("truncated", "original_size")}
    if any(k not in _BLANKS[cls] for k in values):
        return Custom(dict(data))
    for name, blank in _BLANKS[cls].items():
        if name not in values and blank is not _OPTIONAL:
            values[name] = blank  # a dump written by hand, or by an older imp, may leave a field out
    if cls is ModelResponse:
        usage = values.get("usage")
        if isinstance(usage, Mapping):
            values["usage"] = Usage(**{k: v for k, v in usage.items() if k in _USAGE_KEYS})
        if values.get("tool_calls") is not None:
            values["tool_calls"] = tuple(values["tool_calls"])
    size = data.get("original_size") if data.get("truncated") else None
    build: Any = cls
    try:
        made: Payload = build(**values, original_size=size if isinstance(size, int) else None)
        return made
    except TypeError:
        return Custom(dict(data))


_USAGE_KEYS = frozenset(f.name for f in dataclasses.fields(Usage))
_OPTIONAL: Any = object()


def _blank(field: dataclasses.Field[Any]) -> object:
    """What a field left out of a dump reads as: its default, else None, "", 0 or False by its type."""
    if field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING:
        return _OPTIONAL
    annotation = str(field.type)
    if "None" in annotation:
        return None
    return {"str": "", "int": 0, "float": 0.0, "bool": False}.get(annotation.split("[")[0].strip())


_BLANKS: dict[type[Payload], dict[str, Any]] = {
    cls: {f.name: _blank(f) for f in dataclasses.fields(cls) if f.name != "original_size"}  # type: ignore[arg-type]
    for cls in PAYLOADS.values()
}
