"""One `imp.call` as a run: its id, its parent, its authorizer, and its ordered event stream."""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

import structlog

from imp._redact import redact

__all__ = ["Event", "EventSink", "Run", "current_run", "emit", "run_scope"]

_logger = structlog.get_logger("imp")
_ids = itertools.count(1)


@dataclass(frozen=True, slots=True)
class Event:
    """One thing that happened in a run, redacted: ordered by `seq` within its call."""

    seq: int
    call_id: str
    parent_id: str | None
    kind: str
    at: float
    payload: Mapping[str, Any]

    def dump(self) -> dict[str, Any]:
        """A JSON-friendly dict."""
        return {
            "seq": self.seq,
            "call_id": self.call_id,
            "parent_id": self.parent_id,
            "kind": self.kind,
            "at": self.at,
            **dict(self.payload),
        }


EventSink = Callable[[Event], object]


@dataclass(slots=True)
class Run:
    """The state of one call: where its events go and who authorizes its tool calls."""

    call_id: str
    parent_id: str | None
    on_event: EventSink | None
    authorize: Any
    _seq: int = 0
    _sink_failed: bool = False
    children: list[str] = field(default_factory=list)

    def emit(self, kind: str, **payload: Any) -> None:
        """Deliver one redacted event; a failing sink is reported once and never breaks the run."""
        if self.on_event is None:
            return
        self._seq += 1
        event = Event(self._seq, self.call_id, self.parent_id, kind, time.time(), redact(payload))
        try:
            self.on_event(event)
        except Exception as exc:
            if not self._sink_failed:
                self._sink_failed = True
                _logger.warning("imp.event_sink_failed", kind=kind, error=str(exc) or type(exc).__name__)


_current: ContextVar[Run | None] = ContextVar("imp_run", default=None)


def current_run() -> Run | None:
    """The run this code is part of, if any."""
    return _current.get()


def emit(kind: str, **payload: Any) -> None:
    """Emit an event on the current run (nothing happens outside a run or without a sink)."""
    run = _current.get()
    if run is not None and run.on_event is not None:
        run.emit(kind, **payload)


@contextmanager
def run_scope(*, on_event: EventSink | None = None, authorize: Any = None) -> Iterator[Run]:
    """Open a run for one call; a nested call inherits its parent's sink and authorizer."""
    parent = _current.get()
    run = Run(
        call_id=f"call-{next(_ids)}",
        parent_id=parent.call_id if parent else None,
        on_event=on_event if on_event is not None else (parent.on_event if parent else None),
        authorize=authorize if authorize is not None else (parent.authorize if parent else None),
    )
    token = _current.set(run)
    try:
        yield run
    finally:
        _current.reset(token)
