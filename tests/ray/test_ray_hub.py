"""The hub's bookkeeping, in-process (no cluster): slots, the rate's spacing, pauses, a dead worker's slots, the stop."""

from __future__ import annotations

import asyncio
import time

import pytest

from imp.ray._limits import Hub, Limits


class Handle:
    """Stands for a worker's actor handle: records what the hub tells it."""

    def __init__(self) -> None:
        self.told: list[tuple[str, object]] = []
        self.pause = self._method("pause")
        self.stop = self._method("stop")

    def _method(self, name: str) -> object:
        handle = self

        class Method:
            def remote(self, *args: object) -> None:
                handle.told.append((name, args))

        return Method()


async def test_the_rate_spaces_starts_and_a_burst_lets_some_through_at_once() -> None:
    hub = Hub(Limits(requests_per_second=20, burst=3), None)
    started = time.monotonic()
    times = []
    for number in range(7):
        await hub.acquire(0, number)
        times.append(time.monotonic() - started)
        hub.release(0, number)
    assert times[2] < 0.03  # the burst of 3 goes at once
    assert times[6] >= 4 * 0.05 * 0.95  # then one every 50 ms
    assert hub.stats() == {"granted": 7, "held": 0, "pending": 0}


async def test_in_flight_slots_wait_for_a_release_and_a_cancelled_wait_gives_its_turn_back() -> None:
    hub = Hub(Limits(max_in_flight=2), None)
    await hub.acquire(0, 0)
    await hub.acquire(1, 0)
    waiting = asyncio.ensure_future(hub.acquire(0, 1))
    await asyncio.sleep(0.02)
    assert not waiting.done()
    hub.release(0, 1)  # the worker gave up on request 1 while it waited
    hub.release(1, 0)
    await waiting
    assert hub.stats()["held"] == 1  # the abandoned ticket did not keep the freed slot
    assert hub.release_worker(0) == 1  # worker 0 died holding request 0
    await asyncio.wait_for(hub.acquire(2, 0), 0.5)
    await asyncio.wait_for(hub.acquire(2, 1), 0.5)


async def test_a_pause_holds_every_start_and_is_told_to_every_worker() -> None:
    hub = Hub(Limits(requests_per_second=1000), None)
    a, b = Handle(), Handle()
    hub.register(0, a)
    hub.register(1, b)
    hub.pause(0.2)
    started = time.monotonic()
    await hub.acquire(0, 0)
    assert time.monotonic() - started >= 0.19
    assert a.told == b.told == [("pause", (0.2,))]


@pytest.mark.parametrize("limit", [1, 3])
def test_max_errors_stops_every_worker_once(limit: int) -> None:
    hub = Hub(Limits(), limit)
    a, b = Handle(), Handle()
    hub.register(0, a)
    hub.register(1, b)
    answers = [hub.error() for _ in range(limit + 2)]
    assert answers == [False] * (limit - 1) + [True] * 3
    assert a.told == b.told == [("stop", ())]
