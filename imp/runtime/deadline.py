"""`imp.deadline(seconds)`: a context variable plus an anyio cancel scope; nesting only shortens."""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

import anyio

from imp.errors import DeadlineExceeded

__all__ = ["current_deadline", "deadline", "deadline_passed", "self_ending", "time_left"]

BACKSTOP_SECONDS = 0.01
"""imp's own work ends itself exactly at the deadline (a predict raises, a react turn returns what it
has); the block's cancel scope fires this much later, as a backstop for other code inside it."""

# An absolute time.monotonic() value. (trio's clock carries a random offset, so the loop's own
# clock is only used through relative anyio scopes.)
_deadline: ContextVar[float | None] = ContextVar("imp_deadline", default=None)


class _Backstop:
    """A deadline block's backstop scope, held off while work that ends itself at the deadline runs."""

    __slots__ = ("at", "holds", "scope")

    def __init__(self, scope: anyio.CancelScope, at: float) -> None:
        self.scope = scope
        self.at = at
        self.holds = 0


_backstops: ContextVar[tuple[_Backstop, ...]] = ContextVar("imp_deadline_backstops", default=())


def current_deadline() -> float | None:
    """The absolute `time.monotonic()` deadline in force, or None."""
    return _deadline.get()


def time_left() -> float | None:
    """Seconds until the deadline in force (never negative), or None when there is none."""
    at = _deadline.get()
    if at is None:
        return None
    return max(0.0, at - time.monotonic())


def deadline_passed() -> bool:
    """Whether the deadline in force has passed (False outside a deadline)."""
    left = time_left()
    return left is not None and left <= 0


@contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Cancel the work inside after `seconds` and raise `imp.DeadlineExceeded`.

    Nested deadlines only shorten: the earlier of the two is in force inside.
    """
    if not isinstance(seconds, int | float) or math.isnan(seconds) or seconds < 0:
        raise ValueError(f"a deadline is a non-negative number of seconds, got {seconds!r}")
    outer = _deadline.get()
    at = time.monotonic() + seconds
    if outer is not None:
        at = min(at, outer)
    token = _deadline.set(at)
    try:
        backstop = anyio.current_time() + max(0.0, at - time.monotonic()) + BACKSTOP_SECONDS
        with anyio.CancelScope(deadline=backstop) as scope:
            held = _backstops.set((*_backstops.get(), _Backstop(scope, backstop)))
            try:
                yield
            finally:
                _backstops.reset(held)
        if scope.cancelled_caught:
            raise DeadlineExceeded(f"the deadline of {seconds:g}s passed")
    finally:
        _deadline.reset(token)


@contextmanager
def self_ending() -> Iterator[None]:
    """Inside, the work ends itself at the deadline (a react turn returns what it has): the backstops wait.

    Under load the backstop, 10 ms after the deadline, could fire before the work's own timer has
    unwound; so while such work runs the enclosing deadlines' backstops are held off, and put back
    (at least `BACKSTOP_SECONDS` from now) when the last such work inside them is done.
    """
    held = [b for b in _backstops.get() if not b.scope.cancel_called]
    for backstop in held:
        backstop.holds += 1
        backstop.scope.deadline = math.inf
    try:
        yield
    finally:
        for backstop in held:
            backstop.holds -= 1
            if backstop.holds == 0:
                backstop.scope.deadline = max(backstop.at, anyio.current_time() + BACKSTOP_SECONDS)
