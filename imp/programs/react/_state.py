"""The records of one turn: its options and state while it runs, and how it ended."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any, Literal

from imp.history import History, Step, ToolCall
from imp.models.base import LM
from imp.runtime.deadline import time_left

if TYPE_CHECKING:
    from imp.adapters.base import Adapter
    from imp.programs.react._finish import FinishRule
    from imp.tools import Tool

__all__ = [
    "CALLS_FIELD",
    "SUBMIT",
    "THOUGHT_FIELD",
    "Ending",
    "FinishMode",
    "HistoryReplay",
    "TerminationCause",
    "TerminationReason",
    "Turn",
    "deadline_passed",
    "incomplete",
]

SUBMIT = "submit"
"""The loop's own tool, whose parameters are the outputs; the name is reserved."""
THOUGHT_FIELD = "next_thought"
"""The step output holding the text a step wrote beside its calls (DSPy's name)."""
CALLS_FIELD = "tool_calls"
"""The step output in which an LM without native tool calling writes its calls."""

FinishMode = Literal["auto", "submit", "tools"]
HistoryReplay = Literal["full", "actions"]
TerminationReason = Literal[
    "answered", "submit", "finished_by_tool", "forced_submit", "extracted", "last_text", "incomplete"
]
TerminationCause = Literal[
    "max_iters",
    "parse_error",
    "prediction_error",
    "empty_tool_calls",
    "invalid_answer",
    "context_window_exceeded",
    "deadline_exceeded",
]


@dataclass(frozen=True, slots=True)
class Ending:
    """How a turn ended: its outputs (None without an answer), the reason, the cause, the finishing tool."""

    outputs: Mapping[str, Any] | None
    reason: TerminationReason
    cause: TerminationCause | None = None
    finished_by: str | None = None

    def interrupted_by(self, cause: TerminationCause | None) -> Ending:
        """The same ending, reached through the last request of a turn interrupted by `cause`."""
        return replace(self, cause=cause)


def deadline_passed() -> bool:
    """Whether the deadline in force has passed."""
    left = time_left()
    return left is not None and left <= 0


def incomplete(cause: TerminationCause | None) -> Ending:
    """A turn that ended without an answer."""
    return Ending(None, "incomplete", cause)


@dataclass(slots=True)
class Turn:
    """The state of one call of the loop: its options for this call, the steps it recorded, its counters."""

    inputs: dict[str, Any]
    pending: dict[str, Any]
    base: History
    rule: FinishRule
    max_iters: int
    note: str | None
    last_request_tools: tuple[str, ...]
    config: dict[str, Any]
    roster: dict[str, Tool]
    lm: LM
    adapter: Adapter
    starts_turn: bool
    written: bool = False
    entries: list[Step] = field(default_factory=list)
    cut: int = 0
    projection_retries: int = 0
    omitted_groups: int = 0
    errors: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    unexecuted: tuple[ToolCall, ...] = ()
    step: int = 0
    overrides: dict[str, Tool] | None = None
    """Per-call tools that replace a live list's tool of the same name (read at the first refresh)."""

    @property
    def finish(self) -> FinishMode:
        """The finish mode in force for this call."""
        return self.rule.mode

    @property
    def history(self) -> History:
        """The history so far: the one given, then this call's steps."""
        return self.base.extend(self.entries)

    def recorded(self) -> History:
        """The history to hand out as the turn ends: the call's inputs kept even when no step recorded them."""
        if self.pending:
            self.add(Step(tool_calls=(), results=()))
        return self.history

    @property
    def newest(self) -> Step | None:
        """The newest step of the history, or None when it is empty."""
        if self.entries:
            return self.entries[-1]
        return self.base[-1] if len(self.base) else None

    def add(self, step: Step) -> Step:
        """Record a step; the call's inputs (and `user_name`) go on its first one."""
        if self.pending:
            pending = dict(self.pending)
            name = pending.pop("user_name", None)
            step = replace(step, fields={**pending, **step.fields}, user_name=step.user_name or name)
            self.pending = {}
        self.entries.append(step)
        return step
