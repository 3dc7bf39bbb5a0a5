"""A hook for limits shared beyond one LM value: asked before each HTTP attempt, told of each 429.

`imp.ray` sets one per worker so that every worker's requests pass one shared rate limit and one
shared concurrency, and a Retry-After seen by one worker pauses them all. Nothing is set by default,
and then an attempt costs one context-variable read more.
"""

from __future__ import annotations

from contextvars import ContextVar
from typing import Protocol

__all__ = ["RequestGate", "request_gate"]


class RequestGate(Protocol):
    """What an HTTP attempt asks before it is sent and tells when the provider throttled it."""

    async def enter(self) -> object:
        """Wait until a request may be sent; returns a ticket for `leave`."""
        ...

    def leave(self, ticket: object) -> None:
        """The request a ticket let through is over (answered, failed or cancelled)."""
        ...

    def rate_limited(self, retry_after: float | None) -> None:
        """The provider answered 429; `retry_after` is its wait hint in seconds, when it gave one."""
        ...


request_gate: ContextVar[RequestGate | None] = ContextVar("imp_request_gate", default=None)
"""The gate the current task's HTTP attempts pass (inherited by the tasks it starts)."""
