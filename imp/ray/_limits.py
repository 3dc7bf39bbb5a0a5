"""Limits shared by every worker of a run: one hub actor hands out request slots and broadcasts pauses.

Each worker's HTTP attempts pass a `WorkerGate` (the `imp.models` request-gate hook, the point
where retries happen): it waits out a pause locally, then, when the run has a rate limit or a
total concurrency, asks the hub for a slot. A 429 with a Retry-After seen by one worker goes to
the hub, which tells every worker to pause, so ten workers never keep hammering a throttled
provider. The hub's clock is the one clock the rate is counted on.
"""

from __future__ import annotations

import asyncio
import itertools
import math
import time
from dataclasses import dataclass
from typing import Any

__all__ = ["Hub", "Limits", "WorkerGate"]


@dataclass(frozen=True, slots=True)
class Limits:
    """A provider's limits, shared by all workers: requests per second (with a burst) and requests in flight."""

    requests_per_second: float | None = None
    """At most this many requests start per second, across every worker (None: no rate limit)."""
    burst: int = 1
    """How many requests may start at once after an idle spell (the token bucket's depth)."""
    max_in_flight: int | None = None
    """At most this many requests are open at once, across every worker (None: no limit)."""

    def __post_init__(self) -> None:
        rate = self.requests_per_second
        if rate is not None and (
            isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate) or rate <= 0
        ):
            raise ValueError(f"Limits.requests_per_second is a positive number or None, got {rate!r}")
        if isinstance(self.burst, bool) or not isinstance(self.burst, int) or self.burst < 1:
            raise ValueError(f"Limits.burst is a positive integer, got {self.burst!r}")
        most = self.max_in_flight
        if most is not None and (isinstance(most, bool) or not isinstance(most, int) or most < 1):
            raise ValueError(f"Limits.max_in_flight is a positive integer or None, got {most!r}")

    @property
    def shared(self) -> bool:
        """Whether requests must ask the hub for a slot (a rate or a concurrency is set)."""
        return self.requests_per_second is not None or self.max_in_flight is not None


type Ticket = tuple[int, int]
"""(worker id, request number): one request's claim on the hub."""


class Hub:
    """The run's one coordinating actor: request slots, pauses, and the run-wide error count."""

    def __init__(self, limits: Limits, max_errors: int | None) -> None:
        self._interval = 1.0 / limits.requests_per_second if limits.requests_per_second else 0.0
        self._tolerance = (limits.burst - 1) * self._interval
        self._next = 0.0  # the GCRA's theoretical arrival time of the next request
        self._slots = asyncio.Semaphore(limits.max_in_flight) if limits.max_in_flight else None
        self._paused_until = 0.0
        self._pending: set[Ticket] = set()
        self._held: set[Ticket] = set()
        self._abandoned: set[Ticket] = set()
        self._workers: dict[int, Any] = {}
        self._max_errors = max_errors
        self._errors = 0
        self._stopped = False
        self.granted = 0

    def register(self, worker_id: int, handle: object) -> None:
        """A worker to tell of pauses and stops."""
        self._workers[worker_id] = handle

    async def acquire(self, worker_id: int, number: int) -> None:
        """Wait for a slot (concurrency) and a start time (rate, pauses) for one request."""
        ticket = (worker_id, number)
        self._pending.add(ticket)
        if self._slots is not None:
            await self._slots.acquire()
        while True:
            now = time.monotonic()
            if self._paused_until > now:
                await asyncio.sleep(self._paused_until - now)
                continue
            if not self._interval:
                break
            planned = max(self._next, now)
            start = max(now, planned - self._tolerance)
            self._next = planned + self._interval
            if start > now:
                await asyncio.sleep(start - now)
            if self._paused_until <= time.monotonic():  # a pause that came while waiting: take a new start
                break
        self._pending.discard(ticket)
        if ticket in self._abandoned:  # the request was cancelled while it waited
            self._abandoned.discard(ticket)
            if self._slots is not None:
                self._slots.release()
            return
        self._held.add(ticket)
        self.granted += 1

    def release(self, worker_id: int, number: int) -> None:
        """One request is over; a ticket still waiting is dropped when its turn comes."""
        ticket = (worker_id, number)
        if ticket in self._held:
            self._held.discard(ticket)
            if self._slots is not None:
                self._slots.release()
        elif ticket in self._pending:
            self._abandoned.add(ticket)

    def release_worker(self, worker_id: int) -> int:
        """Free every slot a dead worker held (its requests will never say they are over)."""
        self._workers.pop(worker_id, None)
        held = [t for t in self._held if t[0] == worker_id]
        for ticket in held:
            self.release(*ticket)
        self._abandoned.update(t for t in self._pending if t[0] == worker_id)
        return len(held)

    def pause(self, seconds: float) -> None:
        """A provider asked to wait: no request starts before then, on any worker."""
        self._paused_until = max(self._paused_until, time.monotonic() + seconds)
        for handle in self._workers.values():
            handle.pause.remote(seconds)

    def error(self) -> bool:
        """Count one failed row; True once the run reached `max_errors` (every worker is told to stop)."""
        self._errors += 1
        if self._max_errors is not None and self._errors >= self._max_errors and not self._stopped:
            self.stop()
        return self._stopped

    def stop(self) -> None:
        """Tell every worker to finish the rows in flight and take no more."""
        self._stopped = True
        for handle in self._workers.values():
            handle.stop.remote()

    def stats(self) -> dict[str, int]:
        """How many slots were granted and are held now (for tests and the benchmark)."""
        return {"granted": self.granted, "held": len(self._held), "pending": len(self._pending)}


class WorkerGate:
    """One worker's side of the shared limits: the `imp.models` request gate its LM calls pass."""

    def __init__(self, hub: Any, worker_id: int, limits: Limits) -> None:
        self._hub = hub
        self._worker_id = worker_id
        self._shared = limits.shared
        self._numbers = itertools.count()
        self.paused_until = 0.0

    def pause(self, seconds: float) -> None:
        """Start no request on this worker for `seconds`."""
        self.paused_until = max(self.paused_until, time.monotonic() + seconds)

    async def enter(self) -> object:
        """Wait out a pause, then (with shared limits) for the hub's slot."""
        while (left := self.paused_until - time.monotonic()) > 0:  # noqa: ASYNC110 - a pause may be lengthened meanwhile
            await asyncio.sleep(left)
        if not self._shared:
            return None
        number = next(self._numbers)
        try:
            await self._hub.acquire.remote(self._worker_id, number)
        except BaseException:
            self._hub.release.remote(self._worker_id, number)  # cancelled while waiting: give the turn back
            raise
        return number

    def leave(self, ticket: object) -> None:
        """Give the slot back (sent, not awaited)."""
        if isinstance(ticket, int):
            self._hub.release.remote(self._worker_id, ticket)

    def rate_limited(self, retry_after: float | None) -> None:
        """A 429: with a wait hint, pause here at once and have the hub pause every other worker."""
        if retry_after is not None and retry_after > 0:
            self.pause(retry_after)
            self._hub.pause.remote(retry_after)
