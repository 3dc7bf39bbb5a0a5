"""What a call in flight keeps alive: few GC-tracked objects (the collector walks them all), the same results."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import Sequence
from typing import Any

import pytest
from imp_backends import both_backends

import imp
from imp.programs.base import start_call
from imp.runtime.run import run_scope
from imp.runtime.usage import innermost_accumulator, record_unrecorded_since, records_in, track_usage

N = 300


def tracked_now() -> int:
    """The objects the collector keeps walking now: after a collection has untracked the tuples and
    dicts that hold only atoms (whether one ran during the batch otherwise varies the count)."""
    gc.collect()
    return len(gc.get_objects())


class CensusLM(imp.LM):
    """Waits until all N calls are waiting, counts the tracked objects then, and answers."""

    provider = "test"
    model = "census"

    def __init__(self, expected: int) -> None:
        self.expected = expected
        self.waiting = 0
        self.tracked = 0
        self.everyone: asyncio.Event | None = None
        self.options: list[dict[str, Any]] = []

    async def request(self, messages: Sequence[Any], **options: Any) -> imp.LMResponse:
        self.options.append(options)
        if self.everyone is None:
            self.everyone = asyncio.Event()
        self.waiting += 1
        if self.waiting == self.expected:
            self.tracked = tracked_now()
            self.everyone.set()
        await self.everyone.wait()
        question = str(messages[-1]["content"]).split("[[ ## question ## ]]\n", 1)[1].split("\n", 1)[0]
        return imp.LMResponse(
            text=f"[[ ## answer ## ]]\n{question.upper()}\n\n[[ ## completed ## ]]",
            model="census",
            usage=imp.Usage(input_tokens=3, output_tokens=2, requests=1),
        )


async def floor_tracked(n: int) -> int:
    """Tracked objects made by n waiting tasks with no framework: gather of coroutines waiting on one event."""
    everyone = asyncio.Event()
    seen = [0, 0]

    async def one() -> None:
        seen[0] += 1
        if seen[0] == n:
            seen[1] = tracked_now()
            everyone.set()
        await everyone.wait()

    gc.collect()
    before = gc.get_objects()  # held, so that nothing older dies during the count: only new objects differ
    await asyncio.gather(*(one() for _ in range(n)))
    return seen[1] - len(before) - 1


async def imp_tracked(kind: str, n: int) -> tuple[int, CensusLM, list[Any]]:
    """Tracked objects made by n predict calls in flight (all waiting on the LM), the LM, the results."""
    lm = CensusLM(n)
    program = imp.predict("question -> answer", lm=lm)
    questions = [f"q{i}" for i in range(n)]
    gc.collect()
    before = gc.get_objects()  # held, so that nothing older dies during the count: only new objects differ
    if kind == "gather":
        results: list[Any] = list(await asyncio.gather(*(imp.call(program, question=q) for q in questions)))
    else:
        results = await imp.parallel(program, [{"question": q} for q in questions], concurrency=n)
    return lm.tracked - len(before) - 1, lm, results


@pytest.mark.parametrize("kind", ["gather", "parallel"])
async def test_a_predict_in_flight_keeps_few_tracked_objects_over_the_bare_loop(kind: str) -> None:
    # Per call, as the growth from N to 2N calls: what a run makes once (its task group, the
    # results list, a first run's lazy imports) is not counted against each call.
    floor = (await floor_tracked(2 * N) - await floor_tracked(N)) / N
    once, _, _ = await imp_tracked(kind, N)
    twice, lm, results = await imp_tracked(kind, 2 * N)
    per_call = (twice - once) / N
    # Measured: 6 over the floor for gather(imp.call) (imp.call's and acall's frames, the usage
    # accumulator and its context-variable entry (2), the messages list) and 7 for imp.parallel
    # (its worker and asyncio.TaskGroup's done callback per worker stand in for imp.call's frame);
    # 9 and 14 before predict awaited the LM itself (no request frame), the usage block lost the
    # `with`'s bound __exit__ and the mark's tuple, and imp.parallel stopped keeping a partial and
    # its arguments per item and a `call` frame around each item's coroutine. (The loop's own
    # objects per task vary a little from run to run, so a run may read up to 1 lower.)
    assert per_call - floor <= (6.5 if kind == "gather" else 7.5), (per_call, floor)
    assert [r.answer for r in results] == [f"Q{i}" for i in range(2 * N)]
    assert all(r.metadata.usage == imp.Usage(input_tokens=3, output_tokens=2, requests=1) for r in results)
    assert lm.options == [{}] * (2 * N)


async def test_usage_still_reaches_every_open_accumulator_and_is_counted_once() -> None:
    lm = CensusLM(3)
    program = imp.predict("question -> answer", lm=lm)
    with track_usage() as outer:
        results = await asyncio.gather(*(imp.call(program, question=f"q{i}") for i in range(3)))
    assert outer.total == imp.Usage(input_tokens=9, output_tokens=6, requests=3)
    assert [r.metadata.usage.requests for r in results] == [1, 1, 1]


def test_a_usage_mark_of_two_locals_records_only_what_was_not_recorded() -> None:
    usage = imp.Usage(input_tokens=1, output_tokens=1, requests=1)
    with track_usage() as acc:
        inner = innermost_accumulator()
        assert inner is acc
        seen = records_in(inner)
        record_unrecorded_since(inner, seen, "a:b", usage)  # nothing recorded since: counted
        seen = records_in(inner)
        acc.add("a:b", usage)  # the LM recorded its own usage: not counted twice
        record_unrecorded_since(inner, seen, "a:b", usage)
    assert acc.total.requests == 2
    assert records_in(None) == 0
    record_unrecorded_since(None, 0, "a:b", usage)  # outside every block: nothing to record into


@both_backends
async def test_start_call_is_call_without_its_frame_and_call_where_a_run_or_deadline_needs_it() -> None:
    program = imp.predict(
        "question -> answer", lm=imp.ScriptedLM(["[[ ## answer ## ]]\nA\n\n[[ ## completed ## ]]"] * 3)
    )
    plain = start_call(program, {"question": "q"})
    assert plain.cr_code is type(program).acall.__code__  # type: ignore[attr-defined]
    assert (await plain).answer == "A"
    with imp.deadline(5):
        bounded = start_call(program, {"question": "q"})
        assert bounded.cr_code is imp.call.__code__  # type: ignore[attr-defined]
        assert (await bounded).answer == "A"
    events: list[Any] = []
    with run_scope(on_event=events.append):  # inside a run: `call`, which reports the nested call's events
        observed = start_call(program, {"question": "q"})
        assert observed.cr_code is imp.call.__code__  # type: ignore[attr-defined]
        assert (await observed).answer == "A"
    assert [e.kind for e in events] == ["run_started", "model_request", "model_response", "run_finished"]


def test_start_call_does_not_let_the_program_change_the_callers_inputs() -> None:
    inputs = {"question": "q", "config": {"temperature": 0.0}}

    async def body() -> None:
        program = imp.predict(
            "question -> answer", lm=imp.ScriptedLM(["[[ ## answer ## ]]\nA\n\n[[ ## completed ## ]]"])
        )
        await start_call(program, inputs)

    asyncio.run(body())
    assert inputs == {"question": "q", "config": {"temperature": 0.0}}


async def test_parallel_lazy_jobs_give_every_item_once_in_order_with_timeouts_too() -> None:
    program = imp.predict(
        "question -> answer",
        lm=imp.ScriptedLM([f"[[ ## answer ## ]]\nA{i}\n\n[[ ## completed ## ]]" for i in range(5)]),
    )
    results = await imp.parallel(program, [{"question": f"q{i}"} for i in range(5)], concurrency=1, timeout=5)
    assert [r.answer for r in results if isinstance(r, imp.Prediction)] == [f"A{i}" for i in range(5)]


def test_inputs_are_not_copied_unless_a_default_is_filled_in_and_the_callers_dict_is_left_alone() -> None:
    from imp.programs.predict import prepare_inputs

    class Ask(imp.Signature):
        question: str = imp.InputField()
        style: str = imp.InputField(default="plain")
        answer: str = imp.OutputField()

    signature = imp.predict(Ask).signature
    given = {"question": "q", "style": "terse"}
    assert prepare_inputs(signature, given) is given  # nothing to fill: no copy lives across the request
    short = {"question": "q"}
    filled = prepare_inputs(signature, short)
    assert filled == {"question": "q", "style": "plain"} and filled is not short
    assert short == {"question": "q"}
    nulled = {"question": "q", "style": None}
    assert prepare_inputs(signature, nulled) == {"question": "q", "style": "plain"}
    assert nulled == {"question": "q", "style": None}  # None took the default in a copy


def test_an_accumulator_makes_its_per_model_dict_only_when_usage_arrives() -> None:
    usage = imp.Usage(input_tokens=2, output_tokens=1, requests=1)
    with track_usage() as acc:
        assert acc.snapshot() == (imp.Usage(), {})
        assert acc.by_model == {} and acc.total == imp.Usage()
        acc.add("a:b", usage)
        acc.add("a:b", usage)
        acc.add("c:d", usage)
    total, by_model = acc.snapshot()
    assert by_model == {"a:b": usage + usage, "c:d": usage}
    assert total == usage + usage + usage


class TrioCensusLM(CensusLM):
    """CensusLM on trio: waits on a trio.Event until all are waiting."""

    async def request(self, messages: Sequence[Any], **options: Any) -> imp.LMResponse:
        import trio

        if self.everyone is None:
            self.everyone = trio.Event()  # type: ignore[assignment]
        self.waiting += 1
        if self.waiting == self.expected:
            self.tracked = tracked_now()
            self.everyone.set()  # type: ignore[union-attr]
        await self.everyone.wait()  # type: ignore[union-attr]
        return imp.LMResponse(
            text="[[ ## answer ## ]]\nA\n\n[[ ## completed ## ]]",
            model="census",
            usage=imp.Usage(input_tokens=3, output_tokens=2, requests=1),
        )


def test_on_trio_imp_parallel_keeps_few_tracked_objects_over_a_bare_nursery() -> None:
    import trio

    async def floor(n: int) -> int:
        everyone = trio.Event()
        seen = [0, 0]

        async def one() -> None:
            seen[0] += 1
            if seen[0] == n:
                seen[1] = tracked_now()
                everyone.set()
            await everyone.wait()

        gc.collect()
        before = gc.get_objects()
        async with trio.open_nursery() as nursery:
            for _ in range(n):
                nursery.start_soon(one)
        return seen[1] - len(before) - 1

    async def parallel(n: int) -> tuple[int, list[Any]]:
        lm = TrioCensusLM(n)
        program = imp.predict("question -> answer", lm=lm)
        gc.collect()
        before = gc.get_objects()
        results = await imp.parallel(program, [{"question": f"q{i}"} for i in range(n)], concurrency=n)
        return lm.tracked - len(before) - 1, results

    async def body() -> tuple[float, float, list[Any]]:
        bare = (await floor(2 * N) - await floor(N)) / N
        once, _ = await parallel(N)
        twice, results = await parallel(2 * N)
        return bare, (twice - once) / N, results

    bare, per_call, results = trio.run(body)
    # Measured: 5 to 6 over a bare nursery's task (acall's frame, the usage accumulator and its context
    # entry (2), the messages list, the worker's frame standing in for the bare task's coroutine
    # beside the LM's); 17 through anyio's task group, whose task handle brings cancel scopes, a
    # status, sets and an event per worker (imp/evaluation/_trio_fanout.py).
    assert per_call - bare <= 6.5, (per_call, bare)
    assert [r.answer for r in results] == ["A"] * (2 * N)
