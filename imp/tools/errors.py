"""Errors of the tools package: a cancelled execution (and `ToolError`, defined in `imp.errors`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from imp.errors import ImpError, ToolError

if TYPE_CHECKING:
    from imp.history import History, ToolResult

__all__ = ["ExecutionCancelled", "ToolError"]


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
