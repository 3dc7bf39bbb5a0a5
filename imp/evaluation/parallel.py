"""`imp.parallel`: run a program over many inputs at bounded concurrency, one result per input, in order."""

from __future__ import annotations

import functools
import math
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from typing import Any, overload

import anyio
import anyio.lowlevel

from imp.errors import DeadlineExceeded
from imp.evaluation._asyncio_fanout import asyncio_workers, running_on_asyncio
from imp.evaluation._trio_fanout import running_on_trio, trio_workers
from imp.prediction import Example, Prediction
from imp.programs._stream_tap import any_tap, streaming_item
from imp.programs.base import Program, start_call
from imp.runtime.deadline import deadline, time_left
from imp.runtime.journal import JournalScope, current_journal_scope

__all__ = ["Inputs", "parallel", "run_jobs"]

type Inputs = Mapping[str, Any] | Example
"""One item's inputs: a mapping of field names to values, or an `imp.Example` with declared inputs."""


def check_concurrency(concurrency: int) -> int:
    """Refuse a concurrency that is not a positive integer."""
    if isinstance(concurrency, bool) or not isinstance(concurrency, int) or concurrency < 1:
        raise ValueError(f"concurrency is a positive integer, got {concurrency!r}")
    return concurrency


def check_timeout(timeout: float | None) -> float | None:
    """Refuse a per-item timeout that is not a non-negative number of seconds (or None)."""
    if timeout is None:
        return None
    if isinstance(timeout, bool) or not isinstance(timeout, int | float) or math.isnan(timeout) or timeout < 0:
        raise ValueError(f"timeout is a non-negative number of seconds per item (or None), got {timeout!r}")
    return float(timeout)


async def run_jobs[T](
    jobs: Sequence[Callable[[], Awaitable[T]]],
    *,
    concurrency: int,
    timeout: float | None = None,  # noqa: ASYNC109 - a per-job bound, applied as an imp.deadline
    on_done: Callable[[int, T | Exception], bool] | None = None,
) -> list[T | Exception]:
    """Run jobs at bounded concurrency; each slot holds its result or the exception it raised.

    `timeout` bounds each job (an `imp.deadline`, so LM retries see it; the slot gets
    `DeadlineExceeded`). `on_done(index, outcome)` is called as each job ends; returning True
    stops the run (jobs not finished keep a `None` slot, so callers that stop must not return them).
    Each call gets its own workers and no shared limiter, so nested runs never deadlock.
    """
    results: list[T | Exception | None] = [None] * len(jobs)
    pending = iter(range(len(jobs)))
    journal = current_journal_scope.get()
    if journal is not None:  # in a journaled run each item is keyed by its index, whatever order it runs in
        jobs = _keyed(jobs, journal.child())

    async def run_timed(index: int) -> T | Exception:
        assert timeout is not None
        left = time_left()
        own = left is None or timeout < left  # this item's timeout, not the caller's deadline, is the bound
        try:
            with deadline(timeout):
                return await jobs[index]()
        except DeadlineExceeded as exc:
            if not own:
                raise
            error = DeadlineExceeded(f"item {index} did not finish within its timeout of {timeout:g}s")
            error.__cause__ = exc
            return error

    halted = False

    async def worker(stop: Callable[[], object], cancelled: Callable[[], bool]) -> None:
        nonlocal halted
        for index in pending:  # one shared iterator: each index is taken by exactly one worker
            outcome: T | Exception
            try:
                if any_tap() is None:
                    outcome = await (jobs[index]() if timeout is None else run_timed(index))
                else:  # under imp.stream: the item's parts say which item they are (`path[i]`)
                    with streaming_item(index):
                        outcome = await (jobs[index]() if timeout is None else run_timed(index))
            except Exception as exc:
                outcome = exc
            results[index] = outcome
            if on_done is not None and on_done(index, outcome):
                halted = True
                stop()
                return
            if halted or cancelled():  # stopped, or cancelled while an item swallowed the cancellation
                return

    workers = min(concurrency, len(jobs))
    if running_on_asyncio():
        await asyncio_workers(worker, workers)
    else:
        try:
            if running_on_trio():
                await trio_workers(worker, workers, _anyio_cancelled)
            else:
                async with anyio.create_task_group() as group:
                    stop = group.cancel_scope.cancel  # one bound method for every worker
                    for _ in range(workers):
                        group.start_soon(worker, stop, _anyio_cancelled, name="imp.parallel worker")
        except BaseExceptionGroup as failures:
            raise_interrupt(failures)
            raise
    # When the caller's deadline passed, items may have ended without reaching a checkpoint;
    # let its cancellation win rather than return a batch the deadline cut short.
    await anyio.lowlevel.checkpoint_if_cancelled()
    raise_if_cut_by_deadline(results)
    return results  # type: ignore[return-value]  # every slot is filled unless on_done stopped the run


def _keyed[T](jobs: Sequence[Callable[[], Awaitable[T]]], group: JournalScope) -> list[Callable[[], Awaitable[T]]]:
    async def keyed(index: int) -> T:
        token = current_journal_scope.set(group.child(f"i{index}"))
        try:
            return await jobs[index]()
        finally:
            current_journal_scope.reset(token)

    return [functools.partial(keyed, index) for index in range(len(jobs))]


def raise_interrupt(failures: BaseExceptionGroup[BaseException]) -> None:
    """Raise the first `KeyboardInterrupt` or `SystemExit` in a task group's failures, as itself.

    Workers keep every `Exception` in its slot, so what leaves their task group is a Ctrl-C or an
    exit; trio (and anyio's task groups) wrap it in a `BaseExceptionGroup`, which a caller's
    `except KeyboardInterrupt` would miss.
    """
    group, _ = failures.split((KeyboardInterrupt, SystemExit))
    interrupt: BaseException | None = group
    while isinstance(interrupt, BaseExceptionGroup):
        interrupt = interrupt.exceptions[0]
    if interrupt is not None:
        raise interrupt from None


def _anyio_cancelled() -> bool:
    """Whether the calling task's cancel scope is cancelled (its effective deadline is minus infinity)."""
    return anyio.current_effective_deadline() == -math.inf


def raise_if_cut_by_deadline(outcomes: Sequence[object]) -> None:
    """Raise `DeadlineExceeded` when the caller's deadline passed and cut some job short."""
    left = time_left()
    if left is not None and left <= 0 and any(isinstance(o, DeadlineExceeded) for o in outcomes):
        raise DeadlineExceeded("the deadline passed before the batch finished")


def _as_inputs(value: object, where: str) -> dict[str, object]:
    if isinstance(value, Example):
        try:
            return value.inputs()
        except ValueError:
            raise ValueError(f"{where} is an Example without declared inputs; call .with_inputs(...)") from None
    if isinstance(value, Mapping):
        return dict(value)
    raise TypeError(f"{where} must be a mapping of inputs or an imp.Example, got {type(value).__name__}")


def _job(program: Program, inputs: dict[str, object]) -> Callable[[], Awaitable[Prediction]]:
    # A partial, not a closure: calling it (in the worker, just before the await) returns the
    # program's `acall` coroutine or `call`'s, no wrapper frame of its own.
    return functools.partial(start_call, program, inputs)


class _Calls(Sequence[Callable[[], Awaitable[Prediction]]]):
    """One program's jobs over many inputs, each made when a worker takes it: a list of partials
    would keep two tracked objects per item alive for the whole run (the garbage collector walks them)."""

    __slots__ = ("_inputs", "_program")

    def __init__(self, program: Program, inputs: list[dict[str, object]]) -> None:
        self._program = program
        self._inputs = inputs

    def __len__(self) -> int:
        return len(self._inputs)

    @overload
    def __getitem__(self, index: int) -> Callable[[], Awaitable[Prediction]]: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Callable[[], Awaitable[Prediction]]]: ...
    def __getitem__(
        self, index: int | slice
    ) -> Callable[[], Awaitable[Prediction]] | Sequence[Callable[[], Awaitable[Prediction]]]:
        if isinstance(index, slice):
            return _Calls(self._program, self._inputs[index])
        return _job(self._program, self._inputs[index])


def _pairs(pairs: Iterable[object]) -> list[Callable[[], Awaitable[Prediction]]]:
    jobs: list[Callable[[], Awaitable[Prediction]]] = []
    for i, pair in enumerate(pairs):
        if not (isinstance(pair, tuple) and len(pair) == 2 and isinstance(pair[0], Program)):
            raise TypeError(f"item {i} of the pairs form must be a (program, inputs) tuple, got {pair!r:.80}")
        jobs.append(_job(pair[0], _as_inputs(pair[1], f"the inputs of pair {i}")))
    return jobs


@overload
async def parallel(
    program: Program,
    inputs: Iterable[Inputs],
    *,
    concurrency: int = 16,
    timeout: float | None = None,  # noqa: ASYNC109 - per item, applied as an imp.deadline
) -> list[Prediction | Exception]: ...


@overload
async def parallel(
    program: Iterable[tuple[Program, Inputs]],
    inputs: None = None,
    *,
    concurrency: int = 16,
    timeout: float | None = None,  # noqa: ASYNC109 - per item, applied as an imp.deadline
) -> list[Prediction | Exception]: ...


async def parallel(
    program: Program | Iterable[tuple[Program, Inputs]],
    inputs: Iterable[Inputs] | None = None,
    *,
    concurrency: int = 16,
    timeout: float | None = None,  # noqa: ASYNC109 - per item, applied as an imp.deadline
) -> list[Prediction | Exception]:
    """Run a program over many inputs (or `[(program, inputs), ...]` pairs); one result per item, in order.

    A slot holds the item's `Prediction`, or the exception it raised (`imp.DeadlineExceeded` when
    it passed its `timeout`). Items inherit the caller's settings, deadline and usage tracking.
    """
    check_concurrency(concurrency)
    check_timeout(timeout)
    if isinstance(program, Program):
        if inputs is None:
            raise TypeError("imp.parallel(program, inputs): give the list of inputs to run the program on")
        if isinstance(inputs, Mapping | Example):
            raise TypeError("imp.parallel takes a list of inputs; wrap a single item in a list")
        jobs: Sequence[Callable[[], Awaitable[Prediction]]] = _Calls(
            program, [_as_inputs(item, f"input {i}") for i, item in enumerate(inputs)]
        )
    else:
        if inputs is not None:
            raise TypeError("the pairs form imp.parallel([(program, inputs), ...]) takes no second argument")
        if isinstance(program, Mapping | str | bytes) or not isinstance(program, Iterable):
            raise TypeError(
                f"imp.parallel takes a program and a list of inputs, or a list of (program, inputs) pairs; "
                f"got {type(program).__name__}"
            )
        jobs = _pairs(program)
    return await run_jobs(jobs, concurrency=concurrency, timeout=timeout)
