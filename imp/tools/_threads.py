"""imp's own worker threads for sync tools, and the limiter that bounds them per event loop.

What it buys: the threads live for the process, not for one event loop. `imp.call_sync` starts a
loop per call, and anyio's worker threads belong to their loop, so under
`anyio.to_thread.run_sync` every `call_sync` turn would start its tools' threads cold. The pool
is woken from a worker through the loop's own thread-safe callback (`call_soon_threadsafe` on
asyncio, `run_sync_soon` on trio), reached through `anyio.lowlevel.current_token()`: that is
the one anyio internal it leans on.

Measured with `benchmarks/fanout.py` (eight 0.1 s sync tools in one step, `imp.call_sync` per
turn; 2 shared cores, 5 runs of 30-60 turns): a turn takes 103.0-103.7 ms (median) with this
pool and 104.4-118.9 ms with `anyio.to_thread.run_sync`; imp's own time above the 100 ms ideal
is 3-4 ms against 4-19 ms, and only the pool keeps `call_sync` within the benchmark's 10%
target in every run. `await imp.call` (one loop for every turn) is the same either way.
"""

from __future__ import annotations

import contextlib
import contextvars
import threading
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor

import anyio
import anyio.lowlevel
from anyio.lowlevel import RunVar

__all__ = ["DEFAULT_TOOL_THREADS", "run_in_tool_thread", "tool_thread_limiter"]

DEFAULT_TOOL_THREADS = 32
"""How many sync tools may run in worker threads at once, per event loop, by default."""

_thread_limiter: RunVar[anyio.CapacityLimiter] = RunVar("imp_tool_thread_limiter")


_pool: ThreadPoolExecutor | None = None
_pool_lock = threading.Lock()


def _tool_pool() -> ThreadPoolExecutor:
    global _pool
    with _pool_lock:
        if _pool is None:
            _pool = ThreadPoolExecutor(max_workers=DEFAULT_TOOL_THREADS * 2, thread_name_prefix="imp-tool")
        return _pool


async def run_in_tool_thread[T](fn: Callable[[], T]) -> T:
    """Run a sync tool on imp's process-wide worker threads and wait for it without blocking the loop.

    The threads outlive any one event loop, so `imp.call_sync`, which starts a loop per call, does
    not start its tools' threads cold each time. The caller's context variables go with the call.
    Cancelling the waiting task abandons the call (a thread cannot be interrupted; it finishes on
    its own and its value is dropped), as `anyio.to_thread.run_sync(..., abandon_on_cancel=True)` does.
    """
    call_soon = _call_soon_threadsafe()
    finished = anyio.Event()

    def wake(_: Future[T]) -> None:
        with contextlib.suppress(RuntimeError):  # the loop has finished: nobody is waiting any more
            call_soon(finished.set)

    future = _tool_pool().submit(contextvars.copy_context().run, fn)
    future.add_done_callback(wake)
    if not future.done():
        await finished.wait()
    return future.result()


def _call_soon_threadsafe() -> Callable[[Callable[[], object]], object]:
    """This event loop's way to schedule a callback from another thread without waiting for it.

    A worker thread must never block on the loop: a loop that has stopped would hold the thread
    (and the interpreter's exit) forever.
    """
    native = anyio.lowlevel.current_token().native_token
    schedule = getattr(native, "call_soon_threadsafe", None) or getattr(native, "run_sync_soon", None)
    if schedule is None:
        raise RuntimeError(f"imp cannot wake this event loop from a worker thread ({type(native).__name__})")
    return schedule  # type: ignore[no-any-return]


def tool_thread_limiter() -> anyio.CapacityLimiter:
    """The event loop's limiter for sync tools (`DEFAULT_TOOL_THREADS` tokens), made on first use.

    Set `limiter.total_tokens` to change it for the whole loop, or pass `limiter=` per step.
    """
    try:
        return _thread_limiter.get()
    except LookupError:
        limiter = anyio.CapacityLimiter(DEFAULT_TOOL_THREADS)
        _thread_limiter.set(limiter)
        return limiter
