"""imp.call_sync: in a script, and inside a running loop (a notebook's) on a helper thread that
sees the caller's settings and deadline and is cancelled by a Ctrl-C."""

from __future__ import annotations

import asyncio
import signal
import threading
import time
from typing import Any

import anyio
import pytest
from imp_backends import both_backends
from runtime_lms import answering_lm, echo

import imp
from imp.runtime.sync import running_async_library

QA = imp.signature("question -> answer")


def test_in_a_script_it_runs_on_its_own_loop_in_this_thread() -> None:
    threads: list[threading.Thread] = []

    def answer(inputs: dict[str, str]) -> dict[str, str]:
        threads.append(threading.current_thread())
        return echo(inputs)

    assert running_async_library() is None
    pred = imp.call_sync(imp.predict(QA, lm=answering_lm(answer)), question="hi")
    assert pred.answer == "HI" and threads == [threading.current_thread()]


def test_in_a_notebook_cell_it_runs_on_a_helper_thread() -> None:
    """A notebook runs an asyncio loop in its thread and awaits each cell on it."""
    seen: list[tuple[str, str | None]] = []

    def answer(inputs: dict[str, str]) -> dict[str, str]:
        seen.append((threading.current_thread().name, running_async_library()))
        return echo(inputs)

    async def cell() -> imp.Prediction:
        return imp.call_sync(imp.predict(QA, lm=answering_lm(answer)), question="hi")

    loop = asyncio.new_event_loop()
    try:
        pred = loop.run_until_complete(cell())
    finally:
        loop.close()
    assert pred.answer == "HI"
    assert seen == [("imp.call_sync", "asyncio")]
    assert not [t for t in threading.enumerate() if t.name == "imp.call_sync"]


@both_backends
async def test_inside_a_loop_it_uses_the_same_library_and_the_callers_settings(backend: str) -> None:
    libraries: list[str | None] = []

    def answer(inputs: dict[str, str]) -> dict[str, str]:
        libraries.append(running_async_library())
        return echo(inputs)

    with imp.context(lm=answering_lm(answer)):
        pred = imp.call_sync(imp.predict(QA), question="from the context")
    assert pred.answer == "FROM THE CONTEXT" and libraries == [backend]


@both_backends
async def test_inside_a_loop_its_errors_are_raised_as_themselves() -> None:
    with pytest.raises(ValueError, match="boom"):
        imp.call_sync(imp.predict(QA, lm=answering_lm(echo)), question="boom")


@both_backends
async def test_inside_a_loop_the_callers_deadline_holds() -> None:
    program = imp.predict(QA, lm=answering_lm(echo, delay=30.0))
    started = time.monotonic()
    with pytest.raises(imp.DeadlineExceeded), imp.deadline(0.3):
        imp.call_sync(program, question="slow")
    assert time.monotonic() - started < 5.0


def test_a_ctrl_c_while_a_notebook_cell_waits_cancels_the_call() -> None:
    if threading.current_thread() is not threading.main_thread():
        pytest.skip("a signal is delivered to the main thread")
    if signal.getsignal(signal.SIGINT) is not signal.default_int_handler:
        pytest.skip("SIGINT has a handler other than Python's default here")
    cancelled = threading.Event()
    waiting = threading.Event()

    async def hang(messages: Any, options: Any) -> Any:
        waiting.set()
        try:
            await anyio.sleep(30)
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        return {"answer": "never"}

    async def cell() -> imp.Prediction:
        return imp.call_sync(imp.predict(QA, lm=imp.StaticLM(hang)), question="wait")

    def interrupt_once_waiting() -> None:  # on a loaded machine the request may start late
        if waiting.wait(10.0):
            signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGINT)

    timer = threading.Thread(target=interrupt_once_waiting, daemon=True)
    loop = asyncio.new_event_loop()
    started = time.monotonic()
    timer.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            loop.run_until_complete(cell())
    finally:
        timer.join()
        loop.close()
    assert time.monotonic() - started < 10.0
    assert cancelled.is_set()
    assert not [t for t in threading.enumerate() if t.name == "imp.call_sync"]
