"""A run as typed records for a picture: timeline bars, steps, totals, read from events or a prediction."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from imp._json import loads_strict
from imp._redact import redact, redact_text
from imp.prediction import Prediction
from imp.runtime.events import (
    ContextProjected,
    ModelContent,
    ModelError,
    ModelRequest,
    ModelResponse,
    ModelRetry,
    Payload,
    Reasoning,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    ToolCalled,
    ToolReturned,
)
from imp.runtime.run import Event

__all__ = ["Bar", "Picture", "Source", "Step", "ToolRow", "load_events", "picture_of"]

BarKind = Literal["lm", "tool"]
"""An LM request's bar or a tool call's."""


class _Recorded(Protocol):
    """Anything holding a run's events, such as `imp.observe.Recorder`."""

    @property
    def events(self) -> list[Event]: ...


Source = Prediction | _Recorded | Iterable[Event | Mapping[str, Any]]
"""What a picture is drawn from: a prediction, a recorder, or a run's events."""


@dataclass(slots=True)
class Bar:
    """One LM request or tool call on the time axis, in seconds from the run's start."""

    kind: BarKind
    label: str
    call_id: str
    start: float
    end: float
    lane: int = 0
    error: str | None = None
    retries: int = 0
    step: int | None = None


@dataclass(slots=True)
class ToolRow:
    """One tool call of a step: its arguments and its result or error."""

    name: str
    call_id: str
    arguments: Any = None
    output: Any = None
    error: str | None = None
    outcome: str | None = None
    duration: float | None = None


@dataclass(slots=True)
class Step:
    """One LM request and what came of it: the thought, the tool calls, tokens, duration."""

    number: int
    call_id: str
    model: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    duration: float | None = None
    finish_reason: str | None = None
    thought: str | None = None
    tools: list[ToolRow] = field(default_factory=list)
    error: str | None = None
    retries: list[str] = field(default_factory=list)
    projection: str | None = None
    forced: bool = False
    asked: list[str] | None = None
    """The tools the reply asked for (None until the reply came)."""
    messages: list[Mapping[str, Any]] = field(default_factory=list)
    """The messages sent, when the run was recorded with content (`imp.observe.Recorder`)."""
    reply: Any = None
    fields: Mapping[str, Any] | None = None
    """The turn's recorded fields, for a picture drawn from a prediction's history."""


@dataclass(slots=True)
class Picture:
    """Everything a run's page shows."""

    program: str = ""
    """The root call's program, when the run's events say it."""
    reason: str | None = None
    cause: str | None = None
    complete: bool | None = None
    error: str | None = None
    outputs: Mapping[str, Any] | None = None
    duration: float | None = None
    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    tool_calls: int = 0
    retries: int = 0
    projections: int = 0
    bars: list[Bar] = field(default_factory=list)
    steps: list[Step] = field(default_factory=list)
    calls: dict[str, str] = field(default_factory=dict)
    """Each call's id and program name, in the order the calls started."""


def load_events(path: str | Path) -> list[Event]:
    """The events of a JSON Lines file, one `Event.dump()` per line (blank lines skipped)."""
    events = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            data = loads_strict(line)
        except ValueError as exc:
            raise ValueError(f"{path}:{number} is not a JSON event line: {exc}") from None
        events.append(_event(data, f"{path}:{number}"))
    return events


def _number(value: object, where: str, name: str) -> float:
    if value is None:
        return 0.0
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value or abs(value) == float("inf"):
        raise ValueError(f"{where}: `{name}` is a number, got {value!r:.80}")
    return float(value)


def _count(value: object) -> int:
    """A count from a recorded payload; anything else (a hostile file's text) counts as 0."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _event(data: object, where: str) -> Event:
    if isinstance(data, Event):
        return data
    if not isinstance(data, Mapping) or not isinstance(data.get("kind"), str):
        raise ValueError(f"{where}: an event is an imp.Event or its dump() with a `kind`, got {data!r:.80}")
    payload = {k: v for k, v in data.items() if k not in ("seq", "call_id", "parent_id", "kind", "at")}
    parent = data.get("parent_id")
    return Event(
        int(_number(data.get("seq"), where, "seq")),
        str(data.get("call_id") or "call"),
        None if parent is None else str(parent),
        data["kind"],
        _number(data.get("at"), where, "at"),
        payload,
    )


def _name(value: object) -> str | None:
    """A name from a recorded payload, as text (None stays None)."""
    return None if value is None else str(value)


def _text(value: object) -> str:
    return redact_text(value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str))


def picture_of(source: Source) -> Picture:
    """The picture of a prediction (its history, no timings) or of a run's events (with a timeline)."""
    if isinstance(source, Prediction):
        return _from_prediction(source)
    recorded = getattr(source, "events", None)  # an imp.observe.Recorder
    if isinstance(recorded, list):
        source = recorded
    if isinstance(source, str | bytes | Mapping) or not isinstance(source, Iterable):
        raise TypeError("trace_html draws an imp.Prediction or a list of events (imp.Event or Event.dump() dicts)")
    events = [_event(e, f"event {i}") for i, e in enumerate(source)]
    if not events:
        raise ValueError("trace_html got no events: record them with imp.call(..., on_event=events.append)")
    return _from_events(events)


def _from_prediction(prediction: Prediction) -> Picture:
    meta = prediction.metadata
    usage = meta.usage
    picture = Picture(
        reason=meta.termination_reason,
        cause=meta.termination_cause,
        complete=prediction.complete,
        outputs=redact(dict(prediction.fields)),
        requests=usage.requests if usage is not None else meta.lm_calls,
        input_tokens=usage.input_tokens if usage is not None else 0,
        output_tokens=usage.output_tokens if usage is not None else 0,
    )
    history = meta.history
    turns: list[Any] = list(history.dump().get("messages", [])) if history is not None else []
    for number, turn in enumerate(turns, 1):
        step = _turn_step(number, redact(turn) if isinstance(turn, Mapping) else {"turn": redact(turn)})
        picture.tool_calls += len(step.tools)
        picture.steps.append(step)
    if meta.context_projection:
        picture.projections = 1
    return picture


_THOUGHT, _CALLS, _RESULTS = "next_thought", "tool_calls", "tool_call_results"
"""The keys of a history turn's dump (`History.dump()`) that a step shows as its thought and calls."""


def _turn_step(number: int, turn: Mapping[str, Any]) -> Step:
    """A step from one dumped history turn: its thought, its tool calls paired with their results,
    and the rest of its fields (inputs, outputs, notes) as they are."""
    rest = {k: v for k, v in turn.items() if k not in (_THOUGHT, _CALLS, _RESULTS)}
    step = Step(number, "call", fields=rest or None)
    thought = turn.get(_THOUGHT)
    if isinstance(thought, str) and thought:
        step.thought = redact_text(thought)
    results_list = turn.get(_RESULTS)
    calls = turn.get(_CALLS)
    results = {
        str(r.get("id")): r for r in (results_list if isinstance(results_list, list) else ()) if isinstance(r, Mapping)
    }
    for call in calls if isinstance(calls, list) else ():
        if not isinstance(call, Mapping):
            continue
        result = results.get(str(call.get("id")), {})
        error = result.get("error")
        step.tools.append(
            ToolRow(
                str(call.get("name", "tool")),
                str(call.get("id", "")),
                arguments=call.get("arguments"),
                output=result.get("result"),
                error=_text(error) if error is not None else None,
                outcome=None if result.get("outcome") is None else str(result.get("outcome")),
            )
        )
    return step


class _Builder:
    """Folds a run's events, in order, into a Picture."""

    def __init__(self, events: list[Event]) -> None:
        self.events = events
        self.t0 = min(e.at for e in events)
        self.picture = Picture()
        self.open_lm: dict[str, tuple[Bar, Step]] = {}
        self.open_tools: dict[tuple[str, str], tuple[Bar, ToolRow]] = {}
        self.last_step: dict[str, Step] = {}
        self.root: str | None = None

    def build(self) -> Picture:
        for event in self.events:
            self._on(event, event.payload.redacted())
        end = max(e.at for e in self.events) - self.t0
        for bar, _ in (*self.open_lm.values(), *self.open_tools.values()):
            bar.end = end
            bar.error = bar.error or "unfinished"
        picture = self.picture
        if picture.duration is None:
            picture.duration = end
        _pack_lanes(picture.bars)
        return picture

    def _at(self, event: Event) -> float:
        return event.at - self.t0

    def _on(self, event: Event, payload: Payload) -> None:
        call_id = event.call_id
        at = self._at(event)
        picture = self.picture
        match payload:
            case RunStarted():
                picture.calls[call_id] = str(payload.program)
                if self.root is None:
                    self.root = call_id
                    picture.program = picture.calls[call_id]
            case RunFinished() if call_id == self.root:
                picture.reason = _name(payload.termination_reason)
                picture.cause = _name(payload.termination_cause)
                picture.complete = payload.complete if isinstance(payload.complete, bool) else None
                picture.duration = at
            case RunFailed() if call_id == self.root:
                picture.error = _text(payload.error)
                picture.reason = "failed"
                picture.complete = False
                picture.duration = at
            case RunCancelled() if call_id == self.root:
                picture.reason = "cancelled"
                picture.complete = False
                picture.duration = at
            case ModelRequest():
                self._model_request(call_id, at, payload)
            case ModelRetry():
                picture.retries += 1
                opened = self.open_lm.get(call_id)
                if opened is not None:
                    opened[0].retries += 1
                    status = f" ({payload.status})" if payload.status else ""
                    opened[1].retries.append(
                        f"attempt {payload.attempt} failed{status}: {_text(payload.error)}; waited {payload.wait} s"
                    )
            case ModelResponse():
                self._model_response(call_id, at, payload)
            case ModelError():
                lm = self.open_lm.pop(call_id, None)
                if lm is not None:
                    bar, step = lm
                    bar.end = at
                    step.error = bar.error = _text(payload.error)
                    step.duration = payload.duration
                    picture.requests += 1
            case ModelContent():
                newest = self.last_step.get(call_id)
                if newest is not None:
                    newest.messages = [m for m in payload.messages if isinstance(m, Mapping)]
                    newest.reply = payload.reply
            case Reasoning():
                newest = self.last_step.get(call_id)
                if newest is not None and payload.text:
                    newest.thought = _text(payload.text)
            case ContextProjected():
                picture.projections += 1
                newest = self.open_lm.get(call_id, (None, self.last_step.get(call_id)))[1]
                if newest is not None:
                    newest.projection = _text(payload.dump())
            case ToolCalled():
                self._tool_call(call_id, at, payload)
            case ToolReturned():
                tool = self.open_tools.pop((call_id, payload.tool_call_id), None)
                if tool is not None:
                    bar, row = tool
                    bar.end = at
                    row.output = payload.output
                    row.outcome = _name(payload.outcome)
                    row.duration = payload.duration
                    if payload.error is not None:
                        row.error = bar.error = _text(payload.error)

    def _model_request(self, call_id: str, at: float, payload: ModelRequest) -> None:
        step = Step(len(self.picture.steps) + 1, call_id, model=payload.model or "")
        step.forced = bool(payload.forced)
        label = step.model.partition(":")[2] or step.model or "LM"
        bar = Bar("lm", label, call_id, at, at, step=step.number)
        self.picture.steps.append(step)
        self.picture.bars.append(bar)
        self.open_lm[call_id] = (bar, step)
        self.last_step[call_id] = step

    def _model_response(self, call_id: str, at: float, payload: ModelResponse) -> None:
        opened = self.open_lm.pop(call_id, None)
        if opened is None:
            return
        bar, step = opened
        bar.end = at
        usage = payload.usage
        # A loaded file's payload may hold anything where a number or a name belongs (a hostile file).
        step.input_tokens = _count(usage.input_tokens) if usage is not None else 0
        step.output_tokens = _count(usage.output_tokens) if usage is not None else 0
        step.duration = payload.duration if payload.duration is not None else bar.end - bar.start
        step.finish_reason = _name(payload.finish_reason)
        step.asked = [str(name) for name in payload.tool_calls] if isinstance(payload.tool_calls, tuple) else []
        self.picture.requests += 1
        self.picture.input_tokens += step.input_tokens
        self.picture.output_tokens += step.output_tokens

    def _tool_call(self, call_id: str, at: float, payload: ToolCalled) -> None:
        row = ToolRow(payload.tool_name, payload.tool_call_id, arguments=payload.arguments)
        step = self.last_step.get(call_id)
        bar = Bar("tool", payload.tool_name, call_id, at, at)
        if step is not None:
            step.tools.append(row)
            bar.step = step.number
        self.picture.bars.append(bar)
        self.picture.tool_calls += 1
        self.open_tools[(call_id, row.call_id)] = (bar, row)


def _from_events(events: list[Event]) -> Picture:
    return _Builder(events).build()


def _pack_lanes(bars: list[Bar]) -> None:
    """Give each bar the first lane of its call free at its start, so concurrent calls sit side by side."""
    ends: dict[str, list[float]] = {}
    for bar in sorted(bars, key=lambda b: (b.start, b.kind != "lm")):
        lanes = ends.setdefault(bar.call_id, [])
        for lane, end in enumerate(lanes):
            if end <= bar.start:
                bar.lane = lane
                lanes[lane] = bar.end
                break
        else:
            bar.lane = len(lanes)
            lanes.append(bar.end)
