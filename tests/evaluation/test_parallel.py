"""imp.parallel: order, failures in their slots, per-item timeouts, inheritance, nesting, both backends."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import anyio
import pytest
import sniffio
from imp_backends import both_backends
from runtime_lms import USAGE, Tracker, answering_lm, echo, raises_interrupt

import imp
from imp.evaluation import parallel
from imp.models.base import LMResponse
from imp.programs.base import Program
from imp.runtime.deadline import time_left
from imp.runtime.usage import track_usage

QA = imp.signature("question -> answer")


def questions(n: int) -> list[dict[str, str]]:
    return [{"question": f"q{i}"} for i in range(n)]


@both_backends
async def test_results_come_back_in_input_order_at_bounded_concurrency(backend: str) -> None:
    tracker = Tracker()
    # later items finish first: order must come from the input, not from completion
    lm = answering_lm(echo, delay=lambda inputs: 0.05 - 0.002 * int(inputs["question"][1:]), tracker=tracker)
    results = await parallel(imp.predict(QA, lm=lm), questions(20), concurrency=4)
    assert sniffio.current_async_library() == backend
    assert [r.answer for r in results] == [f"Q{i}" for i in range(20)]  # type: ignore[union-attr]
    assert tracker.peak == 4


@both_backends
async def test_a_failure_stays_in_its_own_slot() -> None:
    lm = answering_lm(echo, delay=0.01)
    inputs = [{"question": "a"}, {"question": "boom"}, {"question": "c"}]
    results = await parallel(imp.predict(QA, lm=lm), inputs)
    assert isinstance(results[0], imp.Prediction) and results[0].answer == "A"
    assert isinstance(results[1], ValueError) and "boom" in str(results[1])
    assert isinstance(results[2], imp.Prediction) and results[2].answer == "C"


@both_backends
async def test_an_item_timeout_cancels_only_that_item() -> None:
    tracker = Tracker()
    lm = answering_lm(echo, delay=lambda inputs: 5.0 if inputs["question"] == "slow" else 0.01, tracker=tracker)
    with anyio.fail_after(4):  # the slow item takes 5 s: it was cut, not waited for
        results = await parallel(
            imp.predict(QA, lm=lm), [{"question": "a"}, {"question": "slow"}, {"question": "b"}], timeout=0.2
        )
    assert isinstance(results[1], imp.DeadlineExceeded) and isinstance(results[1], TimeoutError)
    assert "timeout of 0.2s" in str(results[1])
    assert [r.answer for r in (results[0], results[2])] == ["A", "B"]  # type: ignore[union-attr]
    assert tracker.cancelled == 1 and tracker.in_flight == 0


@both_backends
async def test_items_see_the_callers_settings() -> None:
    first = answering_lm(lambda i: {"answer": "first"})
    second = answering_lm(lambda i: {"answer": "second"})
    program = imp.predict(QA)  # no LM of its own: it uses the one in imp.context
    seen: dict[str, list[str]] = {}

    async def run(lm: imp.StaticLM, key: str) -> None:
        with imp.context(lm=lm):
            seen[key] = [r.answer for r in await parallel(program, questions(10), concurrency=3)]  # type: ignore[union-attr]

    async with anyio.create_task_group() as group:
        group.start_soon(run, first, "first")
        group.start_soon(run, second, "second")
    assert seen == {"first": ["first"] * 10, "second": ["second"] * 10}


@both_backends
async def test_items_see_the_callers_deadline() -> None:
    lefts: list[float | None] = []

    def answer(inputs: dict[str, str]) -> dict[str, str]:
        lefts.append(time_left())
        return {"answer": "ok"}

    lm = answering_lm(answer, delay=0.01)
    with imp.deadline(5.0):
        await parallel(imp.predict(QA, lm=lm), questions(4))
    assert len(lefts) == 4 and all(left is not None and 0 < left <= 5.0 for left in lefts)


@both_backends
async def test_the_callers_deadline_cancels_the_batch_promptly() -> None:
    tracker = Tracker()
    lm = answering_lm(echo, delay=10.0, tracker=tracker)
    with anyio.fail_after(5), pytest.raises(imp.DeadlineExceeded), imp.deadline(0.1):  # the LM takes 10 s
        await parallel(imp.predict(QA, lm=lm), questions(8), concurrency=4)
    assert tracker.in_flight == 0 and tracker.cancelled == 4


@both_backends
async def test_usage_of_every_item_reaches_the_caller() -> None:
    lm = answering_lm(echo, delay=0.005, model="m1")
    with track_usage() as usage:
        results = await parallel(imp.predict(QA, lm=lm), questions(12), concurrency=5)
    assert usage.total.input_tokens == 120 and usage.total.requests == 12
    assert all(r.metadata.usage.input_tokens == 10 for r in results)  # type: ignore[union-attr]


@dataclass(frozen=True, eq=False)
class FanOut(Program):
    """A program that runs another program three times through imp.parallel."""

    inner: Program
    signature: imp.Signature = QA

    async def acall(self, inputs: dict[str, Any], **call_options: Any) -> imp.Prediction:
        results = await parallel(self.inner, [inputs] * 3, concurrency=1)
        return imp.Prediction({"answer": "+".join(r.answer for r in results)})  # type: ignore[union-attr]


@both_backends
async def test_nested_parallel_never_deadlocks() -> None:
    leaf = imp.predict(QA, lm=answering_lm(echo, delay=0.001))
    program: Program = FanOut(FanOut(leaf))
    with anyio.fail_after(5):
        results = await parallel(program, questions(4), concurrency=1)
    assert [r.answer for r in results] == ["+".join(["+".join([f"Q{i}"] * 3)] * 3) for i in range(4)]  # type: ignore[union-attr]


@both_backends
async def test_the_pairs_form_runs_several_programs() -> None:
    lm = answering_lm(echo)
    shout = imp.predict(QA, lm=lm)
    fixed = imp.predict(QA, lm=answering_lm(lambda i: {"answer": "fixed"}))
    results = await parallel([(shout, {"question": "a"}), (fixed, {"question": "b"}), (shout, {"question": "c"})])
    assert [r.answer for r in results] == ["A", "fixed", "C"]  # type: ignore[union-attr]


@both_backends
async def test_examples_are_taken_by_their_inputs() -> None:
    lm = answering_lm(echo)
    examples = [imp.Example(question="x", answer="X").with_inputs("question")]
    (result,) = await parallel(imp.predict(QA, lm=lm), examples)
    assert isinstance(result, imp.Prediction) and result.answer == "X"


@both_backends
async def test_cancelling_the_caller_leaves_no_work_running() -> None:
    tracker = Tracker()
    lm = answering_lm(echo, delay=10.0, tracker=tracker)
    with anyio.move_on_after(0.1):
        await parallel(imp.predict(QA, lm=lm), questions(6), concurrency=6)
    assert tracker.in_flight == 0 and tracker.cancelled == 6


@both_backends
async def test_a_thousand_items_run_concurrently() -> None:
    """Every request waits until all 1,000 are in flight at once: run in smaller batches, none could
    finish (counted, not timed)."""
    arrived = 0
    all_in = anyio.Event()

    async def handler(messages: list[Any], options: dict[str, Any]) -> LMResponse:
        nonlocal arrived
        arrived += 1
        if arrived == 1000:
            all_in.set()
        await all_in.wait()
        return LMResponse(fields={"answer": "ok"}, usage=USAGE)

    with anyio.fail_after(60):  # "did not hang", not a speed claim
        results = await parallel(imp.predict(QA, lm=imp.StaticLM(handler)), questions(1000), concurrency=1000)
    assert arrived == 1000 and all(isinstance(r, imp.Prediction) for r in results)


@both_backends
async def test_an_empty_list_gives_an_empty_list() -> None:
    assert await parallel(imp.predict(QA, lm=answering_lm(echo)), []) == []


@both_backends
async def test_malformed_arguments_are_refused_before_any_call() -> None:
    lm = answering_lm(echo)
    program = imp.predict(QA, lm=lm)
    with pytest.raises(TypeError, match="list of inputs"):
        await parallel(program, {"question": "a"})  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="mapping of inputs"):
        await parallel(program, ["a question"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="with_inputs"):
        await parallel(program, [imp.Example(question="a")])
    with pytest.raises(TypeError, match=r"\(program, inputs\) tuple"):
        await parallel([program])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="concurrency"):
        await parallel(program, questions(2), concurrency=0)
    with pytest.raises(ValueError, match="timeout"):
        await parallel(program, questions(2), timeout=-1)
    assert lm.requests == []


@both_backends
async def test_a_deadline_passing_mid_batch_raises_rather_than_return_a_cut_batch() -> None:
    lm = answering_lm(echo, delay=0.02)
    with pytest.raises(imp.DeadlineExceeded), imp.deadline(0.1):
        await parallel(imp.predict(QA, lm=lm), questions(50), concurrency=1)


@both_backends
async def test_inputs_may_be_given_by_keyword() -> None:
    results = await parallel(imp.predict(QA, lm=answering_lm(echo)), inputs=[{"question": "k"}])
    assert [r.answer for r in results] == ["K"]  # type: ignore[union-attr]


@both_backends
async def test_a_cancelled_run_takes_no_more_items_even_when_one_swallows_the_cancellation() -> None:
    from imp.evaluation.parallel import run_jobs

    started: list[int] = []

    def stubborn(i: int) -> Any:
        async def job() -> str:
            started.append(i)
            try:
                await anyio.sleep(5)
            except anyio.get_cancelled_exc_class():
                return f"{i} swallowed it"  # a badly behaved item: it keeps running after a cancel
            return f"{i} done"

        return job

    async def failing() -> str:
        await anyio.sleep(0.02)  # the other worker has started its item by now
        raise RuntimeError("boom")

    # The caller's cancellation: the worker finishes its stubborn item and takes no other.
    with anyio.move_on_after(0.05):
        await run_jobs([stubborn(i) for i in range(4)], concurrency=1)
    assert started == [0]

    # on_done stops the run: the other worker's stubborn item ends, and it takes no other.
    started.clear()
    results = await run_jobs(
        [failing, stubborn(1), stubborn(2), stubborn(3)],
        concurrency=2,
        on_done=lambda index, outcome: isinstance(outcome, Exception),
    )
    assert started == [1] and results[1] == "1 swallowed it" and results[2:] == [None, None]


def interrupting(inputs: dict[str, str]) -> dict[str, str]:
    """Answer like `echo`; the question 'ctrl-c' raises KeyboardInterrupt, as a user's Ctrl-C would."""
    if inputs["question"] == "ctrl-c":
        raise KeyboardInterrupt
    return echo(inputs)


@pytest.mark.parametrize("concurrency", [1, 4])
def test_a_ctrl_c_inside_an_item_surfaces_as_itself(run: Any, concurrency: int) -> None:
    """Under trio a task group wraps it in a BaseExceptionGroup, which `except KeyboardInterrupt` misses."""
    program = imp.predict(QA, lm=answering_lm(interrupting, delay=0.01))
    items = [*questions(3), {"question": "ctrl-c"}, *questions(3)]

    async def body() -> None:
        await parallel(program, items, concurrency=concurrency)

    assert type(raises_interrupt(run, body)) is KeyboardInterrupt


@both_backends
async def test_the_asyncio_fanout_serves_asyncio_only(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """The speed trick in imp/evaluation/_asyncio_fanout.py runs the workers on asyncio; trio takes anyio's path."""
    import importlib

    parallel_module = importlib.import_module("imp.evaluation.parallel")  # the package's `parallel` is the function

    used: list[int] = []
    real = parallel_module.asyncio_workers

    async def counting(worker: Any, count: int) -> None:
        used.append(count)
        await real(worker, count)

    monkeypatch.setattr(parallel_module, "asyncio_workers", counting)
    results = await parallel(imp.predict(QA, lm=answering_lm(echo)), questions(5), concurrency=2)
    assert [r.answer for r in results] == [f"Q{i}" for i in range(5)]  # type: ignore[union-attr]
    assert used == ([2] if backend == "asyncio" else [])
