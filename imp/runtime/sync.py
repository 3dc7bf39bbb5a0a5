"""Run async work to completion from sync code (`imp.call_sync`), in a script or inside a notebook.

A script has no event loop running: the work runs on a new one, in this thread. A notebook
(Jupyter, IPython) already runs an asyncio loop in this thread, and a second loop cannot start
there; the work then runs on a helper thread with its own loop (the same async library as the
running one), while this thread waits. The running loop is blocked meanwhile: in a notebook that
is what a sync call means, but in async code (a web handler) `await imp.call(...)` is the way.

Context variables (settings, the deadline in force, the current run) are copied to the helper
thread, so the work sees what the caller sees. A Ctrl-C while waiting cancels the work on the
helper thread, waits for it to unwind, and is raised as itself.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import sys
import threading
from collections.abc import Awaitable, Callable

import anyio
import anyio.lowlevel

from imp.runtime._loop import running_async_library
from imp.runtime.deadline import within_deadline

__all__ = ["run_sync", "running_async_library"]


def run_sync[T](work: Callable[[], Awaitable[T]]) -> T:
    """Run `work()` to completion and return its value (or raise its error), from sync code."""
    library = running_async_library()
    if library is None:
        return anyio.run(_under_deadline, work)
    return _on_helper_thread(functools.partial(_under_deadline, work), library)


async def _under_deadline[T](work: Callable[[], Awaitable[T]]) -> T:
    """`work()` under the deadline the sync caller is inside (`with imp.deadline(5): imp.call_sync(...)`)."""
    async with within_deadline():
        return await work()


_WAKE_SECONDS = 0.1
"""How often a thread waiting for a sync call wakes to run a pending Ctrl-C."""


class _Helper[T]:
    """The work's state on the helper thread: its result, its error, and how to cancel it."""

    def __init__(self, work: Callable[[], Awaitable[T]], library: str) -> None:
        self.work = work
        self.library = library
        self.result: T | None = None
        self.error: BaseException | None = None
        self.token: anyio.lowlevel.EventLoopToken | None = None
        self.scope: anyio.CancelScope | None = None
        self.started = threading.Event()
        self.done = threading.Event()
        """Set once the work has ended. Waited on instead of `Thread.join`: a join that a Ctrl-C
        interrupts marks the thread stopped while it still runs (CPython 3.12), so a second join
        would return at once."""

    async def main(self) -> None:
        with anyio.CancelScope() as scope:
            self.scope = scope
            self.token = anyio.lowlevel.current_token()
            self.started.set()
            self.result = await self.work()

    def run(self) -> None:
        sniffio = sys.modules.get("sniffio")
        if sniffio is not None:  # copied from the caller's context, it would say a loop runs here
            sniffio.current_async_library_cvar.set(None)
        try:
            anyio.run(self.main, backend=self.library)
        except BaseException as exc:  # handed to the caller's thread, raised there as itself
            self.error = exc
        finally:
            self.started.set()
            self.done.set()

    def cancel(self) -> None:
        """Cancel the work from the caller's thread (after a Ctrl-C)."""
        self.started.wait()
        import anyio.from_thread

        scope, token = self.scope, self.token
        if scope is not None and token is not None:
            with contextlib.suppress(RuntimeError):  # the loop has already finished
                anyio.from_thread.run_sync(scope.cancel, token=token)


def _on_helper_thread[T](work: Callable[[], Awaitable[T]], library: str) -> T:
    helper = _Helper(work, library)
    context = contextvars.copy_context()
    thread = threading.Thread(target=context.run, args=(helper.run,), name="imp.call_sync", daemon=True)
    try:
        # Inside the `try`: a Ctrl-C can land while `start()` waits for the thread to begin.
        thread.start()
        # In short waits, not one: a Ctrl-C that lands just before this thread blocks on the event's
        # lock does not wake it (the signal came before the wait), and would be raised only when the
        # work ended. Between two waits the interpreter runs the pending handler.
        while not helper.done.wait(_WAKE_SECONDS):
            pass
    except KeyboardInterrupt:
        helper.cancel()
        helper.done.wait()
        raise
    finally:
        if helper.done.is_set():
            thread.join()  # the work has ended; the thread is about to exit
    if helper.error is not None:
        raise helper.error
    return helper.result  # type: ignore[return-value]  # set whenever the work finished without an error
