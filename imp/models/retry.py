"""Transport retry policy (tenacity): which failures to try again, how long to wait, when to stop."""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

import anyio

from imp.errors import DeadlineExceeded, LMError
from imp.runtime.deadline import time_left

if TYPE_CHECKING:
    from tenacity import RetryCallState

__all__ = ["RetryPolicy", "call_with_retries", "longest_wait", "retry_wait", "with_max_retries"]

OnRetry = Callable[[int, LMError, float], None]
"""Told before each wait: the attempt that failed (1-based), its error and the seconds to wait."""


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How an LM retries a retryable failure: count, exponential backoff with jitter, hint cap."""

    max_retries: int = 2
    initial_backoff: float = 0.5
    max_backoff: float = 8.0
    jitter: float = 0.25
    """Each backoff is multiplied by a random factor in [1 - jitter, 1 + jitter]."""
    max_retry_wait: float = 60.0
    """A provider wait hint longer than this is not waited for: the error is raised."""

    def backoff(self, attempt: int) -> float:
        """The backoff after failed attempt `attempt` (1-based), before jitter is capped."""
        base = min(self.max_backoff, self.initial_backoff * (2.0 ** (attempt - 1)))
        return max(0.0, base * random.uniform(1.0 - self.jitter, 1.0 + self.jitter))


def with_max_retries(policy: RetryPolicy, max_retries: int) -> RetryPolicy:
    """`policy` with `max_retries` retries (a client's `max_retries=` setting, or a call's option)."""
    if isinstance(max_retries, bool) or not isinstance(max_retries, int):
        raise TypeError(f"max_retries is a whole number of retries after the first attempt, got {max_retries!r}")
    if max_retries < 0:
        raise ValueError("max_retries must be >= 0")
    return dataclasses.replace(policy, max_retries=max_retries)


_longest: ContextVar[float | None] = ContextVar("imp_longest_retry_wait", default=None)


@contextmanager
def longest_wait(seconds: float) -> Iterator[None]:
    """Inside, a retry that would wait longer than `seconds` is not made: the failure is raised at once
    (a fallback chain moves to its next member instead of sitting out a long Retry-After)."""
    token = _longest.set(seconds)
    try:
        yield
    finally:
        _longest.reset(token)


def retry_wait(policy: RetryPolicy, attempt: int, error: LMError) -> float | None:
    """Seconds to wait before the next attempt, or None when the next attempt should not happen
    (attempts used up, not retryable, the hint too long, the deadline would pass, or the wait is
    longer than the `longest_wait` in force)."""
    if not error.retryable or attempt > policy.max_retries:
        return None
    hint = error.retry_after
    if hint is not None and hint > policy.max_retry_wait:
        return None
    wait = hint if hint is not None else policy.backoff(attempt)
    left = time_left()
    if left is not None and wait >= left:
        return None
    longest = _longest.get()
    if longest is not None and wait > longest:
        return None
    return wait


async def call_with_retries[T](
    attempt_fn: Callable[[int], Awaitable[T]],
    policy: RetryPolicy,
    *,
    on_retry: OnRetry | None = None,
) -> T:
    """Run `attempt_fn(attempt_number)` until it succeeds or a failure should not be retried.

    The first attempt runs directly (the common case costs nothing extra); tenacity drives the
    retries. The last `LMError` is raised with `attempts` set to how many requests were made.
    """
    try:
        return await attempt_fn(1)
    except LMError as error:
        wait = retry_wait(policy, 1, error)
        if wait is None:
            error.attempts = 1
            _raise_if_past_deadline(error)
            raise
        if on_retry is not None:
            on_retry(1, error, wait)
    await anyio.sleep(wait)
    return await _retry(attempt_fn, policy, on_retry)


async def _retry[T](attempt_fn: Callable[[int], Awaitable[T]], policy: RetryPolicy, on_retry: OnRetry | None) -> T:
    """Attempts 2, 3, ... under tenacity, after the first one failed and its wait was slept."""
    from tenacity import AsyncRetrying, retry_if_exception

    decided: dict[int, float | None] = {}

    def decide(state: RetryCallState) -> float | None:
        """The wait after this failed attempt, or None to stop (tenacity asks for both, in either order)."""
        number = state.attempt_number + 1
        if number not in decided:
            outcome = state.outcome
            error = outcome.exception() if outcome is not None else None
            wait = retry_wait(policy, number, error) if isinstance(error, LMError) else None
            decided[number] = wait
            if wait is not None and on_retry is not None and isinstance(error, LMError):
                on_retry(number, error, wait)
        return decided[number]

    def should_stop(state: RetryCallState) -> bool:
        return decide(state) is None

    def wait_for(state: RetryCallState) -> float:
        return decide(state) or 0.0

    retrying = AsyncRetrying(
        retry=retry_if_exception(lambda exc: isinstance(exc, LMError) and exc.retryable),
        stop=should_stop,
        wait=wait_for,
        sleep=anyio.sleep,
        reraise=True,
    )
    number = 1
    try:
        async for attempt in retrying:
            with attempt:
                number = attempt.retry_state.attempt_number + 1
                return await attempt_fn(number)
    except LMError as error:
        error.attempts = number
        _raise_if_past_deadline(error)
        raise
    raise AssertionError("unreachable: tenacity ended without an outcome")  # pragma: no cover


def _raise_if_past_deadline(error: LMError) -> None:
    """A retryable failure that arrives once the deadline has passed ends as `DeadlineExceeded`
    (the provider's error as its cause): nothing past the deadline invites a retry."""
    left = time_left()
    if error.retryable and left is not None and left <= 0:
        raise DeadlineExceeded(f"the deadline passed; the last attempt failed: {error}") from error
