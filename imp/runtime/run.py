"""One `imp.call` as a run: its id, its parent, its authorizer, and its ordered event stream.

Each event is redacted (secrets by key name and by value shape), bounded (a payload over
`MAX_EVENT_BYTES` serialized is cut and says so), numbered within its call, handed to the call's
`on_event` sink, and logged through structlog under the logger `imp` (see `imp.runtime.logging`).

Sinks are called inline, on the event loop, in order: a sink must be quick. A sink that raises
is reported once (a WARNING on the `imp` logger) and keeps receiving events; the program never
sees the error. For a slow sink (a network write, a database), wrap it in `buffered_sink`, which
hands events to a background task through a bounded queue and drops (and counts) what does not fit.
"""

from __future__ import annotations

import contextlib
import inspect
import itertools
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from contextlib import asynccontextmanager
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import Any

import anyio
from anyio.streams.memory import MemoryObjectSendStream

from imp.runtime.events import MAX_EVENT_BYTES, Custom, Payload, bound_payload, payload_of
from imp.runtime.logging import event_level, get_logger, logs_enabled

__all__ = [
    "MAX_EVENT_BYTES",
    "Custom",
    "Payload",
    "BufferedSink",
    "RawSink",
    "Event",
    "EventSink",
    "Run",
    "add_process_sink",
    "bound_payload",
    "buffered_sink",
    "current_run",
    "emit",
    "remove_process_sink",
    "run_needed",
    "run_scope",
    "stream_tap",
    "unstreamed",
]

_RESERVED = frozenset({"event", "level", "logger", "timestamp", "call_id", "parent_id", "seq", "at"})
"""Payload keys that would collide with a log line's own keys: logged as `payload_<key>`."""
_ids = itertools.count(1)


@dataclass(frozen=True, slots=True, init=False)
class Event:
    """One thing that happened in a run, redacted: ordered by `seq` within its call.

    `payload` is the kind's record (`imp.runtime.events`); a mapping given for it is read into
    that record (or `Custom`, for a kind of your own).
    """

    seq: int
    call_id: str
    parent_id: str | None
    kind: str
    at: float
    payload: Payload

    def __init__(
        self,
        seq: int,
        call_id: str,
        parent_id: str | None,
        kind: str,
        at: float,
        payload: Payload | Mapping[str, object],
    ) -> None:
        _set_seq(self, seq)
        _set_call_id(self, call_id)
        _set_parent_id(self, parent_id)
        _set_kind(self, kind)
        _set_at(self, at)
        _set_payload(self, payload if isinstance(payload, Payload) else payload_of(kind, payload))

    def dump(self) -> dict[str, Any]:
        """A JSON-friendly dict."""
        return {
            "seq": self.seq,
            "call_id": self.call_id,
            "parent_id": self.parent_id,
            "kind": self.kind,
            "at": self.at,
            **self.payload.dump(),
        }


# Each slot set through its own descriptor: an Event is built for every event a sink receives.
_set_seq = Event.__dict__["seq"].__set__
_set_call_id = Event.__dict__["call_id"].__set__
_set_parent_id = Event.__dict__["parent_id"].__set__
_set_kind = Event.__dict__["kind"].__set__
_set_at = Event.__dict__["at"].__set__
_set_payload = Event.__dict__["payload"].__set__


EventSink = Callable[[Event], object]


def _log_only(event: Event) -> None:
    """The sink of a run without one while the `imp` logger is on: events are only logged."""


@dataclass(slots=True)
class Run:
    """The state of one call: where its events go and who authorizes its tool calls."""

    call_id: str
    parent_id: str | None
    on_event: EventSink | None
    authorize: Any
    _seq: int = 0
    _sink_failed: bool = False
    _announced: int = 0
    _token: Token[Run | None] | None = None

    def __enter__(self) -> Run:
        self._token = _current.set(self)
        return self

    def __exit__(self, *exc: object) -> None:
        if self._token is not None:
            _current.reset(self._token)
            self._token = None

    @property
    def model_request_announced(self) -> bool:
        """Whether the program announced a model request itself (`model_request` not yet answered),
        so the LM request under it adds no `model_request` / `model_response` of its own."""
        return self._announced > 0

    def emit(self, payload: Payload, kind: str | None = None) -> None:
        """Deliver one redacted, bounded event; a failing sink is reported once and never breaks the run."""
        kind = kind or payload.kind
        if kind == "model_request":
            self._announced += 1
        elif kind in ("model_response", "model_error") and self._announced:
            self._announced -= 1
        self.deliver(payload, kind)

    def deliver(self, payload: Payload, kind: str | None = None) -> None:
        """`emit` without the bookkeeping of announced model requests (the LM request's own events)."""
        sink = self.on_event
        if sink is None:
            return
        kind = kind or payload.kind
        self._seq += 1
        level = event_level(kind)
        logged = logs_enabled(level)
        if sink is _log_only and not logged:
            return
        if not logged and type(sink) is _WithProcessSinks and sink.raw is not None:
            # Only process-wide sinks that read the payload themselves (OpenTelemetry's, which
            # redacts what it exports): no Event to build, redact and measure for them.
            at = time.time()
            for raw in sink.raw:
                try:
                    raw(self, kind, payload, at)
                except Exception as exc:
                    self._report(kind, f"{type(exc).__name__}: {exc}")
            return
        event = Event(self._seq, self.call_id, self.parent_id, kind, time.time(), payload.redacted().bounded())
        if sink is not _log_only:
            try:
                result = sink(event)
            except Exception as exc:
                self._report(kind, f"{type(exc).__name__}: {exc}")
            else:
                if inspect.isawaitable(result):
                    if inspect.iscoroutine(result):
                        result.close()
                    self._report(kind, "on_event returned an awaitable; wrap an async sink in buffered_sink()")
        if logged:
            fields = {(f"payload_{k}" if k in _RESERVED else str(k)): v for k, v in event.payload.items()}
            with contextlib.suppress(Exception):  # a broken log pipeline must not break the program either
                get_logger().log(
                    level, kind, call_id=self.call_id, parent_id=self.parent_id, seq=event.seq, at=event.at, **fields
                )

    def _report(self, kind: str, error: str) -> None:
        if not self._sink_failed:
            self._sink_failed = True
            get_logger().warning("event_sink_failed", call_id=self.call_id, kind=kind, error=error)


_current: ContextVar[Run | None] = ContextVar("imp_run", default=None)


def current_run() -> Run | None:
    """The run this code is part of, if any."""
    return _current.get()


stream_tap: ContextVar[Any] = ContextVar("imp_stream_tap", default=None)
"""Where `imp.stream` sends this context's pieces (its `Tap`), or None when nothing streams here."""


@contextlib.contextmanager
def unstreamed() -> Iterator[None]:
    """A block whose LM requests are not streamed into the enclosing `imp.stream`: a tool's body
    (a program a tool calls answers as the tool's result, not as parts of the caller's answer)."""
    if stream_tap.get() is None:
        yield
        return
    token = stream_tap.set(None)
    try:
        yield
    finally:
        stream_tap.reset(token)


def emit(event: Payload | str, /, **fields: Any) -> None:
    """Emit an event on the current run: one of imp's payload records, or a kind of your own and its
    fields (`emit("lookup", url=...)`). Nothing happens outside a run, or with no sink and logging off."""
    run = _current.get()
    if run is not None and run.on_event is not None:
        if isinstance(event, Payload):
            run.emit(event)
        else:
            run.emit(payload_of(event, fields) if fields else payload_of(event, {}), event)


_process_sinks: tuple[EventSink, ...] = ()
"""Sinks that see every run's events in this process (`imp.instrument_otel` installs one)."""


@dataclass(frozen=True, slots=True)
class _WithProcessSinks:
    """A run's own sink (or none) followed by the process-wide sinks, each guarded on its own."""

    own: EventSink | None
    extra: tuple[EventSink, ...]
    raw: tuple[RawSink, ...] | None = None
    """With no sink of the run's own and every process sink able to take raw payloads: their
    `raw_event` methods, handed the payload as emitted (they redact what they keep)."""

    def __call__(self, event: Event) -> None:
        failure: Exception | None = None
        for sink in self.extra if self.own is None else (self.own, *self.extra):
            try:
                result = sink(event)
            except Exception as exc:  # the others still get the event; the run reports the first failure
                failure = failure or exc
            else:
                if inspect.iscoroutine(result):
                    result.close()
                    failure = failure or TypeError(
                        "on_event returned an awaitable; wrap an async sink in buffered_sink()"
                    )
        if failure is not None:
            raise failure


RawSink = Callable[["Run", str, Payload, float], object]
"""`raw_event(run, kind, payload, at)`: a process sink's way to take a payload before it is made an
`Event` (unredacted and unbounded: the sink redacts whatever it keeps or exports)."""


def _raw_sinks(sinks: tuple[EventSink, ...]) -> tuple[RawSink, ...] | None:
    raw = tuple(getattr(sink, "raw_event", None) for sink in sinks)
    return None if None in raw else raw  # type: ignore[return-value]


def add_process_sink(sink: EventSink) -> None:
    """Hand every run's events in this process to `sink` too, besides each call's own `on_event`."""
    global _process_sinks
    if sink not in _process_sinks:
        _process_sinks = (*_process_sinks, sink)


def remove_process_sink(sink: EventSink) -> None:
    """Stop handing events to a sink given to `add_process_sink` (nothing happens if it was not)."""
    global _process_sinks
    _process_sinks = tuple(s for s in _process_sinks if s != sink)  # equal, not identical: `events.append` twice


def run_needed() -> bool:
    """Whether a call with no sink and no authorizer of its own still needs a run: it is nested in
    one (whose sink and authorizer it inherits), a process-wide sink listens, or the `imp` logger
    is on (its events are logged)."""
    return _current.get() is not None or bool(_process_sinks) or logs_enabled()


def run_scope(*, on_event: EventSink | None = None, authorize: object = None) -> Run:
    """Open a run for one call (`with run_scope(...) as run:`); a nested call inherits its parent's
    sink and authorizer.

    A run with no sink of its own or inherited still produces events while the `imp` logger is
    on (they are only logged); otherwise it builds none. (The `Run` is its own context manager:
    this is entered once per `imp.call`, so it allocates as little as it can.)
    """
    parent = _current.get()
    if parent is None:
        sink = on_event
        parent_id = None
    else:
        sink = on_event if on_event is not None else parent.on_event
        parent_id = parent.call_id
        if authorize is None:
            authorize = parent.authorize
    if _process_sinks and not (isinstance(sink, _WithProcessSinks) and sink.extra == _process_sinks):
        own = sink.own if isinstance(sink, _WithProcessSinks) else sink
        sink = _WithProcessSinks(own, _process_sinks, _raw_sinks(_process_sinks) if own is None else None)
    if sink is None and logs_enabled():
        sink = _log_only
    return Run(f"call-{next(_ids)}", parent_id, sink, authorize)


AsyncOrSyncSink = Callable[[Event], object | Awaitable[object]]


@dataclass(slots=True)
class BufferedSink:
    """An `on_event` sink that queues events for a background task (see `buffered_sink`).

    `delivered`, `dropped` (the queue was full, or the block had ended) and `failed` (the wrapped
    sink raised) count events.
    """

    sink: AsyncOrSyncSink
    delivered: int = 0
    dropped: int = 0
    failed: int = 0
    _send: MemoryObjectSendStream[Event] | None = None

    def __call__(self, event: Event) -> None:
        send = self._send
        if send is None:
            self.dropped += 1
            return
        try:
            send.send_nowait(event)
        except (anyio.WouldBlock, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.dropped += 1


@asynccontextmanager
async def buffered_sink(
    sink: AsyncOrSyncSink, *, max_queue: int = 1000, drain_timeout: float | None = 5.0
) -> AsyncIterator[BufferedSink]:
    """Hand events to `sink` (sync or async) from a background task, never slowing the program.

    ```python
    async with buffered_sink(send_to_collector, max_queue=1000) as sink:
        await imp.call(agent, inputs, on_event=sink)
    print(sink.dropped)
    ```

    Emitting puts the event on a bounded in-memory queue and returns at once; when the queue is
    full the event is dropped and counted. A sink that raises is reported once and keeps
    receiving events. Leaving the block delivers what is queued, waiting at most `drain_timeout`
    seconds (None: as long as it takes); what is left after that is counted as dropped.
    """
    if isinstance(max_queue, bool) or not isinstance(max_queue, int) or max_queue < 1:
        raise ValueError(f"max_queue is a positive integer, got {max_queue!r}")
    send, receive = anyio.create_memory_object_stream[Event](max_queue)
    buffered = BufferedSink(sink, _send=send)
    reported = False

    async def drain() -> None:
        nonlocal reported
        async with receive:
            async for event in receive:
                try:
                    result = sink(event)
                    if inspect.isawaitable(result):
                        await result
                except Exception as exc:
                    buffered.failed += 1
                    if not reported:
                        reported = True
                        get_logger().warning(
                            "event_sink_failed",
                            call_id=event.call_id,
                            kind=event.kind,
                            error=f"{type(exc).__name__}: {exc}",
                        )
                else:
                    buffered.delivered += 1
        drained.set()

    def stop_now() -> None:
        buffered._send = None
        send.close()
        buffered.dropped += receive.statistics().current_buffer_used
        group.cancel_scope.cancel()

    drained = anyio.Event()
    failure: BaseException | None = None
    async with anyio.create_task_group() as group:
        group.start_soon(drain)
        try:
            yield buffered
        except anyio.get_cancelled_exc_class():
            stop_now()
            raise
        except BaseException as exc:
            # Re-raised below, outside the task group, so that the program's own error (or a Ctrl-C)
            # reaches the caller as itself rather than wrapped in an exception group.
            failure = exc
            stop_now()
        else:
            buffered._send = None
            send.close()  # the drain ends once the queue is empty
            with anyio.move_on_after(drain_timeout if drain_timeout is not None else math.inf):
                await drained.wait()
            if not drained.is_set():
                buffered.dropped += receive.statistics().current_buffer_used
                group.cancel_scope.cancel()
    if failure is not None:
        raise failure
