"""A speed trick, on asyncio only: `imp.parallel`'s workers as plain asyncio tasks instead of an
anyio task group (trio always takes the anyio path in `imp.evaluation.parallel`).

Why: anyio's task group keeps, per task, a wrapper coroutine, a task state, and a done callback
with its closure. With thousands of items in flight that bookkeeping is a large share of what
`imp.parallel` costs over the bare event loop.

What it buys, measured with `benchmarks/concurrency.py --only imp` (`imp.parallel(concurrency=N)`
on a 50 ms LM, wall time; six A/B pairs, alternated, on this project's shared 2-core machine):
at N = 1,000, 0.113 s with it against 0.167 s without (the per-pair median ratio 0.66); at
N = 10,000, 1.14 s against 2.46 s (0.49). It is kept while it buys more than 10% there.

The semantics are the anyio path's: a failure stays in its slot, a cancelled caller (an
`imp.deadline`, a closed request) cancels every worker and waits for them, `stop` (max_errors)
cancels the other workers and the run ends normally, and a Ctrl-C surfaces as itself (asyncio's
`TaskGroup` re-raises a `KeyboardInterrupt` or `SystemExit` unwrapped).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine

__all__ = ["Worker", "asyncio_workers", "running_on_asyncio"]

type Worker = Callable[[Callable[[], object], Callable[[], bool]], Coroutine[object, object, None]]
"""A worker: `worker(stop, cancelled)` takes items until none are left, `stop()` is called, or
`cancelled()` says its task has a cancellation pending."""


def running_on_asyncio() -> bool:
    """Whether this task runs on an asyncio event loop (not trio)."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return False
    return True


async def asyncio_workers(worker: Worker, count: int) -> None:
    """Run `count` workers as plain asyncio tasks in an `asyncio.TaskGroup`.

    asyncio delivers a cancellation once, so a worker also stops taking items while its task has
    one pending (`cancelling()`), even when an item swallowed it.
    """
    tasks: list[asyncio.Task[None]] = []

    def stop() -> None:
        me = asyncio.current_task()
        for task in tasks:
            if task is not me:
                task.cancel()

    def cancelled() -> bool:
        task = asyncio.current_task()
        return task is not None and task.cancelling() > 0

    async with asyncio.TaskGroup() as group:
        for _ in range(count):
            tasks.append(group.create_task(worker(stop, cancelled)))
