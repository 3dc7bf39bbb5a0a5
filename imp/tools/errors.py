"""Errors of the tools package: a tool's own failure, and a cancelled execution."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from imp.errors import ImpError

if TYPE_CHECKING:
    from imp.history import History, ToolOutcome, ToolResult

__all__ = ["ExecutionCancelled", "ToolError"]


class ToolError(Exception):
    """Raised by a tool to report a failure in its own words, with the outcome it knows.

    The message becomes the sentence the model reads after "Error: ". The default outcome is
    `"result"` (the tool answered, with an error of its own); a tool that knows nothing was done
    can say `"refused"` or `"not_sent"`, and one whose credential was refused `"auth_refused"`.
    Any other exception a tool raises is recorded as `"unknown"`: it may have had an effect.
    """

    def __init__(self, message: str, *, outcome: ToolOutcome = "result") -> None:
        if outcome not in ("result", "refused", "auth_refused", "not_sent", "unknown"):
            raise ValueError(f"unknown tool outcome {outcome!r}")
        self.message = message
        self.outcome: ToolOutcome = outcome
        super().__init__(message)


class ExecutionCancelled(ImpError):
    """The authorizer answered `Cancel(reason)`: the whole call (turn) ends here.

    `results` holds every call of the step, in call order, as recorded when the cancel arrived:
    calls that finished keep their results, calls still running are `"unknown"`, and calls that
    never started are `"not_sent"`.
    """

    def __init__(self, reason: str, *, tool_name: str = "", results: Sequence[ToolResult] = ()) -> None:
        self.reason = reason
        self.tool_name = tool_name
        self.results: tuple[ToolResult, ...] = tuple(results)
        self.history: History | None = None
        """The turn's history up to the cancel, when a ReAct loop was running."""
        where = f" at {tool_name}" if tool_name else ""
        super().__init__(
            f"the execution was cancelled{where}: {reason}" if reason else f"the execution was cancelled{where}"
        )
