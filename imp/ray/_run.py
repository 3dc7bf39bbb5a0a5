"""The driver's side of a run: start the hub and the workers, hand out batches, retry a dead worker's batch once.

Why async actors driven from here, not `Dataset.map_batches`: the run must know which batch went
to which worker, to retry a dead worker's batch exactly once and then report its rows as failed
(Ray Data retries a task its own way and fails the whole dataset when it gives up), to stop every
worker when `max_errors` is reached, and to count progress as batches come back. Each worker
takes one batch at a time, so a worker's death never takes an innocent batch with it.
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import anyio.to_thread

from imp.models.base import LM
from imp.ray._limits import Hub, Limits
from imp.ray._rows import BatchResult, WorkerStartError
from imp.ray._worker import Worker

__all__ = ["Batch", "RunOptions", "run_batches"]

Kind = Literal["evaluate", "map"]
"""Which worker method a batch goes to."""


@dataclass(frozen=True, slots=True)
class RunOptions:
    """What every worker of a run is built with, checked by the public functions."""

    workers: int
    concurrency: int
    batch_size: int
    timeout: float | None
    limits: Limits
    num_cpus: float
    lm_factory: Callable[[], LM] | None
    registry: Mapping[str, object] | None
    max_errors: int | None


@dataclass(frozen=True, slots=True)
class Batch:
    """A run of consecutive items, each with its index in the input."""

    number: int
    items: tuple[tuple[int, Any], ...]


class _Pool:
    """The run's hub and workers; a dead worker is replaced by a fresh one."""

    def __init__(self, ray: Any, document: Mapping[str, object], options: RunOptions) -> None:
        self._ray = ray
        self._document = document
        self._options = options
        self._worker_class = ray.remote(Worker)
        self.hub = (
            ray.remote(Hub).options(num_cpus=0, max_concurrency=100_000).remote(options.limits, options.max_errors)
        )
        self._next_id = 0
        self.handles: dict[int, Any] = {}

    def spawn(self) -> int:
        """Start one worker; returns its id."""
        options = self._options
        worker_id = self._next_id
        self._next_id += 1
        handle = self._worker_class.options(num_cpus=options.num_cpus, max_concurrency=100_000).remote(
            worker_id,
            self._document,
            options.registry,
            options.lm_factory,
            self.hub,
            options.limits,
            options.concurrency,
            options.timeout,
        )
        self.handles[worker_id] = handle
        self.hub.register.remote(worker_id, handle)
        return worker_id

    def lost(self, worker_id: int) -> None:
        """Forget a dead worker and free the request slots it held."""
        self.handles.pop(worker_id, None)
        self.hub.release_worker.remote(worker_id)

    def close(self) -> None:
        """End every worker and the hub."""
        for handle in [*self.handles.values(), self.hub]:
            with contextlib.suppress(Exception):  # already gone
                self._ray.kill(handle)
        self.handles.clear()


def batches(items: Sequence[object], size: int) -> deque[tuple[Batch, int]]:
    """The items cut into batches, each with its attempt number (1)."""
    return deque(
        (Batch(n, tuple((i, items[i]) for i in range(start, min(start + size, len(items))))), 1)
        for n, start in enumerate(range(0, len(items), size))
    )


async def run_batches(
    ray: Any,
    kind: Kind,
    document: Mapping[str, object],
    items: Sequence[object],
    options: RunOptions,
    *,
    extra: tuple[Any, ...],
    collect: Callable[[Batch, BatchResult], bool],
    lost: Callable[[Batch, str], bool],
) -> None:
    """Run every batch on the workers; `collect` takes each result and `lost` each batch that died
    twice (its reason); either returning True stops the run (workers finish the rows in flight)."""
    from ray.exceptions import RayActorError

    queue = batches(items, options.batch_size)
    if not queue:
        return
    pool = _Pool(ray, document, options)
    try:
        idle = [pool.spawn() for _ in range(min(options.workers, len(queue)))]
        await _started(ray, pool, idle)
        running: dict[Any, tuple[int, Batch, int]] = {}
        stopping = False
        while (queue and not stopping) or running:
            while queue and idle and not stopping:
                batch, attempt = queue.popleft()
                worker_id = idle.pop()
                method = getattr(pool.handles[worker_id], f"{kind}_batch")
                running[method.remote(batch.items, *extra)] = (worker_id, batch, attempt)
            wait = functools.partial(ray.wait, list(running), num_returns=1, timeout=1.0)
            ready, _ = await anyio.to_thread.run_sync(wait)
            for ref in ready:
                worker_id, batch, attempt = running.pop(ref)
                try:
                    result: BatchResult = await anyio.to_thread.run_sync(ray.get, ref)
                except RayActorError as exc:
                    pool.lost(worker_id)
                    idle.append(pool.spawn())
                    if attempt == 1:
                        queue.appendleft((batch, 2))
                        continue
                    stop = lost(batch, _reason(exc))
                else:
                    idle.append(worker_id)
                    stop = collect(batch, result) or result.stopped
                if stop and not stopping:
                    stopping = True
                    pool.hub.stop.remote()
    finally:
        pool.close()


async def _started(ray: Any, pool: _Pool, ids: list[int]) -> None:
    """Wait until every first worker loaded its program; a worker that cannot start is the caller's error."""
    from ray.exceptions import RayActorError

    refs = [pool.handles[i].ready.remote() for i in ids]
    try:
        await anyio.to_thread.run_sync(ray.get, refs)
    except RayActorError as exc:
        raise WorkerStartError(f"imp.ray: a worker could not start: {_reason(exc)}") from None


def _reason(error: BaseException) -> str:
    """What Ray said about a dead worker: its first sentence and, when a traceback follows, the error it ends on."""
    lines = [line.strip() for line in re.sub(r"\x1b\[[0-9;]*m", "", str(error)).splitlines() if line.strip()]
    if not lines:
        return type(error).__name__
    first = lines[0].split(", ")[0][:200]
    last = next((line for line in reversed(lines[1:]) if re.match(r"^[\w.]+(Error|Exception|Exit)\b", line)), None)
    return first if last is None else f"{first}: {last[:300]}"
