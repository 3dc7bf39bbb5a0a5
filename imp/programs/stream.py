"""`imp.stream(program, inputs)`: the run of `imp.call`, yielding its answer as it is written."""

from __future__ import annotations

import asyncio
import contextvars
import math
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from contextlib import nullcontext, suppress
from typing import Any

import anyio
import anyio.lowlevel

from imp.programs._stream_tap import StreamPart, Tap, current_path, current_tap, set_tap
from imp.programs.base import Program, call
from imp.runtime.deadline import deadline as imp_deadline
from imp.runtime.events import ToolCalled, ToolReturned
from imp.runtime.run import Event, EventSink

__all__ = ["StreamPart", "stream"]


class _Done:
    """The run's end: its error, if it raised."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException | None) -> None:
        self.error = error


async def stream(
    program: Program,
    inputs: Mapping[str, object] | None = None,
    /,
    *,
    authorize: object = None,
    on_event: EventSink | None = None,
    deadline: float | None = None,
    partial: bool = False,
    **fields: Any,
) -> AsyncIterator[StreamPart]:
    """Run a program as `imp.call` does and yield its `StreamPart`s in order, the last one `final`
    with the Prediction.

    Every LM request of the run is streamed, whichever way the program reaches its predictors
    (`imp.call`, `.acall`, `imp.parallel`, a function program, a tool loop's steps), each part
    naming its predictor (`part.path`): each output field's text comes as it is written, for
    every adapter; reasoning deltas where the provider sends them; for `react`, each tool call
    when it is decided and each result when it arrives. A program a tool calls is not streamed:
    it answers as the tool's result. `partial=True` adds `partial` parts whose `value` is the
    outputs so far, typed. A turn that pauses awaiting approval ends with a `pending` part
    instead of `final`; `imp.stream(program, resume=pending, decisions=...)` streams the rest.
    Leaving the loop, or cancelling the task that reads it, cancels the run and its LM request.
    An error ends the stream, raised as `imp.call` would raise it. `deadline` (seconds) runs the
    call under `imp.deadline`: a deadline block around the loop works too, but an async
    generator's `yield` inside a cancel scope is fragile (FastAPI's streaming endpoints are such
    generators).
    """
    if not isinstance(program, Program):
        raise TypeError(
            f"imp.stream runs an imp program (predict, chain_of_thought, react), got {type(program).__name__}"
        )
    if not isinstance(partial, bool):
        raise TypeError(f"imp.stream's partial= is True or False, got {type(partial).__name__}")
    send, receive = anyio.create_memory_object_stream[StreamPart | _Done](max_buffer_size=math.inf)
    tap = Tap(send.send_nowait, program, partial)

    def forward(event: Event) -> None:
        payload = event.payload
        # Sinks are called inline, where the event happens: a tool event of a loop this stream
        # follows sees its tap (a loop inside a tool's body does not).
        if isinstance(payload, ToolCalled | ToolReturned) and current_tap() is tap:
            if isinstance(payload, ToolCalled):
                send.send_nowait(
                    StreamPart(
                        "tool_call",
                        tool_name=payload.tool_name,
                        tool_call_id=payload.tool_call_id,
                        arguments=payload.arguments,
                        path=current_path(),
                    )
                )
            else:
                send.send_nowait(
                    StreamPart(
                        "tool_result",
                        tool_name=payload.tool_name,
                        tool_call_id=payload.tool_call_id,
                        output=payload.output,
                        error=payload.error,
                        outcome=payload.outcome,
                        path=current_path(),
                    )
                )
        if on_event is not None:
            on_event(event)

    async def run() -> None:
        set_tap(tap)
        try:
            with imp_deadline(deadline) if deadline is not None else nullcontext():
                prediction = await call(program, inputs, authorize=authorize, on_event=forward, **fields)
        except anyio.get_cancelled_exc_class():
            raise
        except BaseException as exc:
            send.send_nowait(_Done(exc))
            return
        pending = prediction.metadata.pending
        if pending is not None:  # the turn paused: the pending calls are the stream's last word
            send.send_nowait(StreamPart("pending", prediction=prediction, pending=pending))
        else:
            send.send_nowait(StreamPart("final", prediction=prediction))
        send.send_nowait(_Done(None))

    task = _spawn(run)
    reader = _Reader(task, lambda: send.send_nowait(_Done(RuntimeError(_READER_GONE))))
    try:
        async with receive:
            async for item in receive:
                if isinstance(item, _Done):
                    if item.error is not None:
                        raise item.error
                    return
                reader.follow()
                yield item
    finally:
        reader.stop()
        await task.cancel_and_wait()
        send.close()


class _Task:
    """A run in a task of its own, which the stream cancels and waits for when it ends."""

    def __init__(self, cancel: Callable[[], None]) -> None:
        self.cancel = cancel
        self.done = anyio.Event()

    async def cancel_and_wait(self) -> None:
        self.cancel()
        with anyio.CancelScope(shield=True):
            await self.done.wait()


_READER_GONE = (
    "this stream's run was cancelled when the task reading it was cancelled or failed; start a new imp.stream"
)


class _Reader:
    """Cancels the run when the task reading the stream is cancelled or fails while the stream
    waits at a part.

    A consumer cancelled outside the generator leaves it suspended, unclosed until garbage
    collection: FastAPI's SSE endpoints read a generator from a producer task that is cancelled
    when the client goes away, and the LM request would run on meanwhile. Watched on asyncio only;
    trio closes a dropped generator through its own hooks.
    """

    __slots__ = ("_end", "_run", "_task")

    def __init__(self, run: _Task, end: Callable[[], None]) -> None:
        self._run = run
        self._end = end
        self._task: asyncio.Task[Any] | None = None

    def _ended(self, task: asyncio.Task[Any]) -> None:
        # A reader that returned may have handed the stream on; one cancelled or failed has not.
        if task.cancelled() or task.exception() is not None:
            self._run.cancel()
            with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):  # nobody left to tell
                self._end()  # a later reader is told so, not left waiting

    def follow(self) -> None:
        """Watch the task that reads now (the generator may be handed from one task to another)."""
        try:
            current = asyncio.current_task()
        except RuntimeError:  # not on asyncio
            return
        if current is self._task:
            return
        self.stop()
        if current is not None:
            current.add_done_callback(self._ended)
            self._task = current

    def stop(self) -> None:
        if self._task is not None:
            self._task.remove_done_callback(self._ended)
            self._task = None


def _spawn(work: Callable[[], Coroutine[Any, Any, None]]) -> _Task:
    """Start `work` in its own task, in a copy of this context.

    Not a task group: the stream is an async generator, which may be closed from another task
    (asyncio's finalizer closes a generator left by `break`), and a task group must be left by the
    task that entered it.
    """
    context = contextvars.copy_context()
    # anyio's token holds the running loop itself on asyncio, and a TrioToken on trio: which loop
    # runs here, without sniffio (a dependency of neither anyio's current releases nor imp).
    loop = anyio.lowlevel.current_token().native_token
    if not isinstance(loop, asyncio.AbstractEventLoop):
        import trio

        scope = trio.CancelScope()
        handle = _Task(scope.cancel)

        async def hosted() -> None:
            try:
                with scope:
                    await work()
            finally:
                handle.done.set()

        trio.lowlevel.spawn_system_task(hosted, context=context)
        return handle

    task = loop.create_task(work(), context=context)

    def cancel() -> None:
        task.cancel()

    handle = _Task(cancel)
    task.add_done_callback(lambda _: handle.done.set())  # also when cancelled before it started
    return handle
