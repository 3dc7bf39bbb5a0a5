"""A speed trick, on trio only: `imp.parallel`'s workers as plain trio tasks in a trio nursery
instead of an anyio task group (asyncio has its own in `imp.evaluation._asyncio_fanout`).

Why: anyio's task group on trio wraps every task in a task handle with its own cancel scopes,
status, sets and event: 11 more objects per worker for the garbage collector to walk than a bare
nursery's task (tests/runtime/test_in_flight_footprint.py counts them), which at thousands of
items in flight is most of what `imp.parallel` keeps over the bare event loop.

The semantics are the anyio path's: anyio on trio runs on trio's own cancel scopes, so a
cancelled caller (an `imp.deadline`, a closed request) cancels every worker and waits for them;
`stop` (max_errors) cancels the nursery's scope, which the nursery absorbs, and the run ends
normally; a Ctrl-C leaves the nursery in a `BaseExceptionGroup`, as it leaves anyio's, and the
caller unwraps it the same way.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from imp.evaluation._asyncio_fanout import Worker

__all__ = ["running_on_trio", "trio_workers"]


def running_on_trio() -> bool:
    """Whether this task runs under trio (trio already imported: it is what runs it)."""
    trio: Any = sys.modules.get("trio")
    if trio is None:
        return False
    try:
        trio.lowlevel.current_task()
    except RuntimeError:
        return False
    return True


async def trio_workers(worker: Worker, count: int, cancelled: Callable[[], bool]) -> None:
    """Run `count` workers as tasks of one trio nursery; `cancelled` tells a worker its scope is cancelled."""
    import trio

    async with trio.open_nursery() as nursery:
        stop = nursery.cancel_scope.cancel  # one bound method for every worker, not one each
        for _ in range(count):
            nursery.start_soon(worker, stop, cancelled, name="imp.parallel worker")
