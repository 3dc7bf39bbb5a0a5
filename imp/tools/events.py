"""Tool events: `tool_call` before a call is checked and run, `tool_result` when it has ended.

A small stand-in until imp's runtime events module exists: the runtime will translate these.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from imp._redact import redact
from imp.history import ToolOutcome, ToolResult
from imp.runtime.events import ToolCalled, ToolReturned
from imp.runtime.run import emit

__all__ = ["EventHandler", "ToolEvent", "ToolEventKind", "current_tool_call_id", "forward_tool_event"]

_current_tool_call: ContextVar[str | None] = ContextVar("imp_tool_call", default=None)
"""Set in the task that runs one tool call (each runs in a task of its own)."""


def current_tool_call_id() -> str | None:
    """The id of the tool call this code runs under, if any: a trace nests a program it calls under it."""
    return _current_tool_call.get()


type ToolEventKind = Literal["tool_call", "tool_result"]
"""`tool_call`: the call was received (before lookup, policy, schema and authorization);
`tool_result`: it ended, with its outcome."""


@dataclass(frozen=True, slots=True)
class ToolEvent:
    """One event of a tool call, redacted (secrets replaced by key name and value shape).

    `index` is the call's position in its step. A `tool_call` event holds `arguments`; a
    `tool_result` event holds `output` (on success) or `error`, the `outcome`, and `duration`
    (seconds from the `tool_call` event).
    """

    kind: ToolEventKind
    tool_call_id: str
    tool_name: str
    index: int
    arguments: Mapping[str, Any] | str | None = None
    output: Any = None
    error: str | None = None
    outcome: ToolOutcome | None = None
    duration: float | None = None

    @classmethod
    def call(cls, index: int, call_id: str, name: str, arguments: object) -> ToolEvent:
        """The `tool_call` event of a call, its arguments redacted."""
        shown = redact(arguments) if isinstance(arguments, Mapping | str) else None
        return cls("tool_call", call_id, name, index, arguments=shown)

    @classmethod
    def result(cls, index: int, result: ToolResult, duration: float) -> ToolEvent:
        """The `tool_result` event of a recorded result."""
        output = None if result.error is not None else redact(result.result)
        error = None if result.error is None else redact(result.error)
        return cls(
            "tool_result",
            result.id,
            result.name,
            index,
            output=output,
            error=error,
            outcome=result.outcome,
            duration=duration,
        )

    def payload(self) -> ToolCalled | ToolReturned:
        """The run's event payload of this tool event."""
        if self.kind == "tool_call":
            return ToolCalled(self.tool_call_id, self.tool_name, self.index, self.arguments)
        return ToolReturned(
            self.tool_call_id, self.tool_name, self.index, self.output, self.error, self.outcome, self.duration
        )

    def dump(self) -> dict[str, Any]:
        """A dict of the fields that are set, with `kind` first."""
        out: dict[str, Any] = {"kind": self.kind, "tool_call_id": self.tool_call_id, "tool_name": self.tool_name}
        out["index"] = self.index
        for key in ("arguments", "output", "error", "outcome", "duration"):
            value = getattr(self, key)
            if value is not None:
                out[key] = value
        return out


type EventHandler = Callable[[ToolEvent], object]
"""Receives each `ToolEvent` as it happens, on the event loop; it must not block. An observer
never steers: what it raises is logged and ignored."""


def forward_tool_event(event: ToolEvent) -> None:
    """Report a tool event on the current run: a loop's `tool_call` and `tool_result` events."""
    emit(event.payload())
