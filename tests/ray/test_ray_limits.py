"""Limits shared by every worker, counted at the server: requests per second, requests in flight, a Retry-After pause."""

from __future__ import annotations

import functools
from typing import Any

from fake_provider import FakeProvider
from ray_support import Counting, Throttler, devset, max_in_window, metric, program_for, worker_lm

import imp


def _by_worker(fake: FakeProvider) -> dict[str, list[float]]:
    seen: dict[str, list[float]] = {}
    for request in fake.requests:
        seen.setdefault(request.headers["x-worker"], []).append(request.at)
    return seen


async def test_the_rate_limit_holds_across_both_workers(cluster: Any, fake: FakeProvider) -> None:
    factory = functools.partial(worker_lm, fake.base_url)
    program, data = program_for(fake), devset(60)
    await imp.ray.evaluate(program, data, metric, lm_factory=factory, batch_size=10, concurrency=8, progress=False)
    free = [r.at for r in fake.requests]
    fake.requests.clear()
    limits = imp.ray.Limits(requests_per_second=10)
    report = await imp.ray.evaluate(
        program, data, metric, lm_factory=factory, batch_size=10, concurrency=8, limits=limits, progress=False
    )
    assert report.score == 0.5 and len(report.rows) == 60
    times = [r.at for r in fake.requests]
    assert len(times) == 60 and len(_by_worker(fake)) == 2  # both workers sent requests
    span = max(times) - min(times)
    assert span >= 59 / 10 * 0.95  # 60 requests at 10 per second: the hub spaced them, across both workers
    assert max(free) - min(free) < span / 2  # without the limit the same run is far quicker
    # in any one second: 10, the burst of 1, and what a loaded machine's send jitter bunches (up to 0.3 s)
    assert max_in_window(times, 1.0) <= 14


async def test_the_concurrency_limit_is_shared_by_both_workers(cluster: Any, fake: FakeProvider) -> None:
    factory = functools.partial(worker_lm, fake.base_url)
    program, data = program_for(fake), devset(40)
    free = Counting(delay=0.1)
    fake.responder = free
    await imp.ray.evaluate(program, data, metric, lm_factory=factory, batch_size=10, concurrency=8, progress=False)
    capped = Counting(delay=0.1)
    fake.responder = capped
    fake.requests.clear()
    limits = imp.ray.Limits(max_in_flight=3)
    report = await imp.ray.evaluate(
        program, data, metric, lm_factory=factory, batch_size=10, concurrency=8, limits=limits, progress=False
    )
    assert report.score == 0.5
    assert free.most > 3
    assert capped.most == 3 and len(_by_worker(fake)) == 2


async def test_a_retry_after_seen_by_one_worker_pauses_both(cluster: Any, fake: FakeProvider) -> None:
    throttler = Throttler(retry_after=1.0, delay=0.05)
    fake.responder = throttler
    factory = functools.partial(worker_lm, fake.base_url)
    report = await imp.ray.evaluate(
        program_for(fake), devset(40), metric, lm_factory=factory, batch_size=10, concurrency=2, progress=False
    )
    assert report.score == 0.5 and not report.errors  # the throttled row was retried after the wait
    assert throttler.throttled_at is not None
    t0 = throttler.throttled_at
    during = [at for at in (r.at for r in fake.requests) if t0 + 0.3 < at < t0 + 0.95]
    # (a request already past its gate when the pause came is not recalled: the window starts 0.3 s on)
    assert during == [], [round(at - t0, 3) for at in sorted(r.at for r in fake.requests)]
    after = {worker for worker, times in _by_worker(fake).items() if any(at >= t0 + 0.95 for at in times)}
    assert len(after) == 2  # and both carried on after it
