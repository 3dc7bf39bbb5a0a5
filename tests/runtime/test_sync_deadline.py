"""`with imp.deadline(s):` around every sync entry point: it works in a script (no event loop to hold a
cancel scope) and the entry point ends at the deadline, as the async call would."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from runtime_lms import answering_lm, echo

import imp
from imp.runtime.sync import running_async_library

QA = imp.signature("question -> answer")
SLOW = 30.0
"""How long a slow LM would take: far past every deadline here, so only the deadline ends the call."""
BOUND = 5.0
"""Generous: a call cut at a sub-second deadline returns well within this, even on a loaded machine."""


def slow_predict() -> imp.Predict:
    return imp.predict(QA, lm=answering_lm(echo, delay=SLOW))


def slow_react() -> imp.ReAct:
    async def wait(messages: Any, options: Any) -> Any:
        await anyio.sleep(SLOW)
        return {"answer": "late"}

    @imp.tool
    def look(query: str) -> str:
        """Look something up."""
        return query

    return imp.react(QA, [look], lm=imp.StaticLM(wait))


def slow_function() -> Any:
    @imp.fn(lm=answering_lm(echo, delay=SLOW))
    def answer(question: str) -> str:
        """Answer the question."""

    return answer


def exact(example: imp.Example, prediction: imp.Prediction) -> bool:
    return bool(example.answer == prediction.answer)


def slow_compile() -> imp.Program:
    trainset = [imp.Example(question=f"q{i}", answer=f"Q{i}").with_inputs("question") for i in range(4)]
    return imp.BootstrapFewShot(metric=exact).compile_sync(slow_predict(), trainset=trainset)


ENTRY_POINTS: dict[str, Callable[[], Any]] = {
    "call_sync(predict)": lambda: imp.call_sync(slow_predict(), question="slow"),
    "a sync function program": lambda: slow_function()("slow"),
    "a sync function program's .predict": lambda: slow_function().predict("slow"),
    "compile_sync (BootstrapFewShot)": slow_compile,
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
def test_in_a_script_every_sync_entry_point_ends_at_the_deadline(entry: str) -> None:
    assert running_async_library() is None
    started = time.monotonic()
    with pytest.raises(imp.DeadlineExceeded), imp.deadline(0.3):
        ENTRY_POINTS[entry]()
    assert 0.25 <= time.monotonic() - started < BOUND


def test_in_a_script_a_react_turn_returns_what_it_has_at_the_deadline() -> None:
    started = time.monotonic()
    with imp.deadline(0.3):
        prediction = imp.call_sync(slow_react(), question="slow")
    assert time.monotonic() - started < BOUND
    assert not prediction.complete
    assert prediction.metadata.termination_cause == "deadline_exceeded"


def test_in_a_script_work_that_finishes_in_time_is_untouched() -> None:
    with imp.deadline(5):
        prediction = imp.call_sync(imp.predict(QA, lm=answering_lm(echo)), question="quick")
        again = imp.call_sync(imp.predict(QA, lm=answering_lm(echo)), question="again")
    assert (prediction.answer, again.answer) == ("QUICK", "AGAIN")


def test_in_a_script_one_block_bounds_every_call_inside_it() -> None:
    """The deadline is one point in time: a second call gets what the first left, not the whole block."""
    program = imp.predict(QA, lm=answering_lm(echo, delay=0.25))
    started = time.monotonic()
    with pytest.raises(imp.DeadlineExceeded), imp.deadline(0.4):
        imp.call_sync(program, question="first")  # 0.25 s of the 0.4
        imp.call_sync(program, question="second")  # would end at 0.5: cut at 0.4
    assert time.monotonic() - started < BOUND


def test_in_a_script_nested_deadlines_only_shorten() -> None:
    started = time.monotonic()
    with pytest.raises(imp.DeadlineExceeded), imp.deadline(10), imp.deadline(0.2):
        imp.call_sync(slow_predict(), question="slow")
    assert time.monotonic() - started < BOUND
    with pytest.raises(imp.DeadlineExceeded), imp.deadline(0.2), imp.deadline(10):
        imp.call_sync(slow_predict(), question="slow")


def test_in_a_script_a_deadline_already_passed_sends_nothing() -> None:
    sent: list[str] = []

    def answer(inputs: dict[str, str]) -> dict[str, str]:
        sent.append(inputs["question"])
        return echo(inputs)

    with pytest.raises(imp.DeadlineExceeded), imp.deadline(0):
        imp.call_sync(imp.predict(QA, lm=answering_lm(answer)), question="late")
    assert sent == []


def test_in_a_script_a_deadline_around_sync_work_that_is_not_imps_is_harmless(tmp_path: Path) -> None:
    """Nothing in plain sync code can be cancelled: the block neither raises nor interrupts it."""
    with imp.deadline(0.05):
        time.sleep(0.1)
        imp.save(imp.predict(QA), tmp_path / "qa.json")
    assert (tmp_path / "qa.json").exists()


def test_in_a_script_bad_seconds_are_refused_before_anything_runs() -> None:
    for bad in (-1, float("nan"), "5"):
        with pytest.raises(ValueError, match="non-negative number of seconds"), imp.deadline(bad):  # type: ignore[arg-type]
            pytest.fail("the block must not run")


def test_in_a_notebook_cell_the_sync_call_ends_at_the_deadline_and_the_loop_lives_on() -> None:
    """A notebook's cell runs on a running loop: the call goes to a helper thread, under the deadline."""
    after: list[str] = []

    async def cell() -> float:
        started = time.monotonic()
        with pytest.raises(imp.DeadlineExceeded), imp.deadline(0.3):
            imp.call_sync(slow_predict(), question="slow")
        elapsed = time.monotonic() - started
        await asyncio.sleep(0.05)  # the cell's own scope did not leave the loop's task cancelled
        after.append("ran")
        return elapsed

    loop = asyncio.new_event_loop()
    try:
        elapsed = loop.run_until_complete(cell())
    finally:
        loop.close()
    assert elapsed < BOUND and after == ["ran"]
    assert not [t for t in threading.enumerate() if t.name == "imp.call_sync"]


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_sync_call_from_a_worker_thread_honours_the_deadline(backend: str) -> None:
    """A sync helper run with `anyio.to_thread.run_sync` has no loop in its thread: it is a script there."""

    def blocking() -> None:
        with imp.deadline(0.3):
            imp.call_sync(slow_predict(), question="slow")

    async def main() -> None:
        with pytest.raises(imp.DeadlineExceeded):
            await anyio.to_thread.run_sync(blocking)

    started = time.monotonic()
    anyio.run(main, backend=backend)
    assert time.monotonic() - started < BOUND


# --- as a decorator ------------------------------------------------------------------------------


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_as_a_decorator_it_bounds_each_call_of_an_async_function(backend: str) -> None:
    """contextlib's decorator would leave the block before the coroutine ran: nothing bounded."""

    @imp.deadline(0.3)
    async def handler(question: str) -> imp.Prediction:
        return await imp.call(slow_predict(), question=question)

    async def main() -> None:
        for _ in range(2):  # each call gets the whole 0.3 s
            started = time.monotonic()
            with pytest.raises(imp.DeadlineExceeded):
                await handler("slow")
            assert 0.25 <= time.monotonic() - started < BOUND

    anyio.run(main, backend=backend)
    assert handler.__name__ == "handler"


def test_as_a_decorator_it_bounds_each_call_of_a_sync_function() -> None:
    @imp.deadline(0.3)
    def script(question: str) -> imp.Prediction:
        return imp.call_sync(slow_predict(), question=question)

    started = time.monotonic()
    with pytest.raises(imp.DeadlineExceeded):
        script("slow")
    assert time.monotonic() - started < BOUND


def test_one_block_is_open_once_at_a_time_and_may_be_entered_again_after() -> None:
    block = imp.deadline(5)
    with block, pytest.raises(RuntimeError, match="already open"), block:
        pass
    with block:
        assert imp.call_sync(imp.predict(QA, lm=answering_lm(echo)), question="again").answer == "AGAIN"
    assert repr(block) == "imp.deadline(5)"


def test_a_bool_is_not_a_number_of_seconds() -> None:
    with pytest.raises(ValueError, match="non-negative number of seconds"):
        imp.deadline(True)
