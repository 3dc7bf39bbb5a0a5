"""`imp.deadline(seconds)`: a context variable plus an anyio cancel scope; nesting only shortens."""

from __future__ import annotations

import functools
import inspect
import math
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractContextManager, asynccontextmanager, contextmanager
from contextvars import ContextVar
from typing import Any

import anyio

from imp.errors import DeadlineExceeded
from imp.runtime._loop import running_async_library

__all__ = [
    "DeadlineBlock",
    "current_deadline",
    "deadline",
    "deadline_passed",
    "fail_at_deadline",
    "self_ending",
    "time_left",
    "within_deadline",
]

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
_given: ContextVar[float | None] = ContextVar("imp_deadline_seconds", default=None)
"""The seconds the innermost `imp.deadline` block was given, for the error's message."""


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


def deadline(seconds: float) -> DeadlineBlock:
    """Cancel the work inside after `seconds` and raise `imp.DeadlineExceeded`.

    Nested deadlines only shorten: the earlier of the two is in force inside. In sync code (no
    event loop running in this thread) nothing can be cancelled from here: the deadline is in force
    for imp's sync entry points inside (`imp.call_sync`, a sync function program, `compile_sync`),
    which run their event loop under it (`run_sync`) and raise `imp.DeadlineExceeded`.

    As a decorator (`@imp.deadline(5)`) it bounds each call of the function, sync or async.
    """
    if not isinstance(seconds, int | float) or isinstance(seconds, bool) or math.isnan(seconds) or seconds < 0:
        raise ValueError(f"a deadline is a non-negative number of seconds, got {seconds!r}")
    return DeadlineBlock(seconds)


class DeadlineBlock:
    """What `imp.deadline(seconds)` returns: a `with` block, or a decorator bounding each call.

    A decorated `async def` gets an async wrapper (contextlib's decorator would leave the block
    before the coroutine ran, bounding nothing).
    """

    __slots__ = ("_open", "seconds")

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._open: AbstractContextManager[None] | None = None

    def __enter__(self) -> None:
        if self._open is not None:
            raise RuntimeError("this imp.deadline(...) block is already open; write imp.deadline(seconds) for another")
        block = _block(self.seconds)
        block.__enter__()
        self._open = block

    def __exit__(self, *exc: Any) -> bool | None:
        block, self._open = self._open, None
        assert block is not None
        return block.__exit__(*exc)

    def __call__[**P, R](self, fn: Callable[P, R]) -> Callable[P, R]:
        seconds = self.seconds
        if inspect.iscoroutinefunction(fn):

            @functools.wraps(fn)
            async def bounded_async(*args: P.args, **kwargs: P.kwargs) -> Any:
                with _block(seconds):
                    return await fn(*args, **kwargs)

            return bounded_async  # type: ignore[return-value]

        @functools.wraps(fn)
        def bounded(*args: P.args, **kwargs: P.kwargs) -> R:
            with _block(seconds):
                return fn(*args, **kwargs)

        return bounded

    def __repr__(self) -> str:
        return f"imp.deadline({self.seconds!r})"


@contextmanager
def _block(seconds: float) -> Iterator[None]:
    """One deadline block: the context variable, and a cancel scope where an event loop runs."""
    outer = _deadline.get()
    at = time.monotonic() + seconds
    if outer is not None:
        at = min(at, outer)
    token = _deadline.set(at)
    given = _given.set(seconds)
    try:
        if running_async_library() is None:
            # A script's `with imp.deadline(5): imp.call_sync(...)`: no loop here to hold a cancel
            # scope; each sync entry point starts its loop under this deadline (`within_deadline`).
            yield
        else:
            with _cancel_at(at, seconds, _backstops.get()):
                yield
    finally:
        _given.reset(given)
        _deadline.reset(token)


@contextmanager
def _cancel_at(at: float, seconds: float, outer: tuple[_Backstop, ...]) -> Iterator[None]:
    """A cancel scope (with its backstop) ending at the absolute time `at`; `DeadlineExceeded` when it fired."""
    backstop = anyio.current_time() + max(0.0, at - time.monotonic()) + BACKSTOP_SECONDS
    with anyio.CancelScope(deadline=backstop) as scope:
        held = _backstops.set((*outer, _Backstop(scope, backstop)))
        try:
            yield
        finally:
            _backstops.reset(held)
    if scope.cancelled_caught:
        raise DeadlineExceeded(f"the deadline of {seconds:g}s passed")


@asynccontextmanager
async def within_deadline() -> AsyncIterator[None]:
    """The deadline a sync caller set, as a cancel scope on the event loop its sync entry point started.

    `with imp.deadline(5): imp.call_sync(...)` sets the deadline where no cancel scope can be held;
    `run_sync` enters this first thing on the loop it starts, so everything inside (a predict, an
    evaluation, an optimizer's rounds) ends at the deadline as it would in async code. Backstops
    copied from the caller's context belong to another loop, and are not touched from this one.
    """
    at = _deadline.get()
    if at is None:  # (no deadline, so no backstops either)
        yield
        return
    with _cancel_at(at, _given.get() or max(0.0, at - time.monotonic()), ()):
        yield


@contextmanager
def fail_at_deadline() -> Iterator[None]:
    """A scope that raises `TimeoutError` at the deadline (none without one): for work that ends itself
    there (a react turn returns what it has), so everything it awaits, a user's validator included,
    is bounded too."""
    left = time_left()
    if left is None:
        yield
        return
    with anyio.fail_after(left):
        yield


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
