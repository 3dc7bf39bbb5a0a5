"""`imp.deadline` reaches every place work can wait: LM requests and their retry sleeps, tool runs
(async and sync), `parallel` workers and nested programs, under asyncio and trio.

These tests check that the deadline is obeyed (the right error or incomplete prediction, and the
work inside cancelled) with generous bounds on time; how late it fires under load is measured by
benchmarks/deadline.py, not asserted here.
"""

from __future__ import annotations

import threading
import time
from typing import Any

import anyio
import pytest
from fake_provider import FakeProvider, Reply
from imp_backends import both_backends

import imp
from imp.models.base import LMResponse, Usage
from imp.models.retry import RetryPolicy
from imp.runtime.deadline import current_deadline, time_left

PROMPTLY = 2.0  # seconds: "did not hang", not a speed claim
ANSWER = "[[ ## answer ## ]]\nfine\n\n[[ ## completed ## ]]"


class Hang:
    """A StaticLM handler that never answers; counts requests started and cancelled, and the time left seen."""

    def __init__(self) -> None:
        self.started = 0
        self.cancelled = 0
        self.time_left: list[float | None] = []

    async def __call__(self, messages: list[dict[str, Any]], options: dict[str, Any]) -> Any:
        self.started += 1
        self.time_left.append(time_left())
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            self.cancelled += 1
            raise
        return {"answer": "never"}


def quick(messages: list[dict[str, Any]], options: dict[str, Any]) -> Any:
    return LMResponse(fields={"answer": "ok"}, usage=Usage(requests=1))


@both_backends
async def test_a_predict_whose_lm_hangs_raises_deadline_exceeded() -> None:
    hang = Hang()
    program = imp.predict("question -> answer", lm=imp.StaticLM(hang))
    started = time.monotonic()
    with pytest.raises(imp.DeadlineExceeded) as info, imp.deadline(0.2):
        await imp.call(program, question="q")
    assert isinstance(info.value, TimeoutError)
    assert 0.19 <= time.monotonic() - started < PROMPTLY
    assert (hang.started, hang.cancelled) == (1, 1)
    assert hang.time_left[0] is not None and 0 < hang.time_left[0] <= 0.2


@both_backends
async def test_a_deadline_already_passed_sends_nothing() -> None:
    hang = Hang()
    with pytest.raises(imp.DeadlineExceeded), imp.deadline(0):
        await imp.call(imp.predict("question -> answer", lm=imp.StaticLM(hang)), question="q")
    assert hang.started == 0


@both_backends
async def test_nesting_only_shortens() -> None:
    with imp.deadline(0.5):
        outer = current_deadline()
        with imp.deadline(30):
            assert current_deadline() == outer
        with imp.deadline(0.1):
            inner = current_deadline()
            assert inner is not None and outer is not None and inner < outer
        assert current_deadline() == outer
    assert current_deadline() is None


@pytest.mark.parametrize("seconds", [-1, float("nan"), "1"])
def test_a_deadline_is_a_non_negative_number(seconds: Any) -> None:
    with pytest.raises(ValueError, match="non-negative"), imp.deadline(seconds):
        pass


# --- LM requests and their retries (the HTTP layer, through imp.call) ------------------------


def _client(fake: FakeProvider, policy: RetryPolicy | None = None) -> Any:
    return imp.lm(
        "openai:m",
        api_key="sk-test-0123456789abcdefghij",
        base_url=fake.base_url,
        retry_policy=policy or RetryPolicy(max_retries=3, initial_backoff=0.01, max_backoff=0.01, jitter=0.0),
    )


def _ok() -> Reply:
    return Reply(
        200,
        json={
            "id": "r",
            "object": "chat.completion",
            "model": "m",
            "choices": [{"index": 0, "message": {"role": "assistant", "content": ANSWER}, "finish_reason": "stop"}],
            "usage": {"prompt_tokens": 3, "completion_tokens": 2, "total_tokens": 5},
        },
    )


@both_backends
async def test_a_slow_provider_is_cut_at_the_deadline(fake: FakeProvider) -> None:
    never = threading.Event()  # the reply waits for this, which is set only after the call
    fake.add(Reply(200, json={"choices": []}, hold=never))
    async with _client(fake) as client:
        with pytest.raises(imp.DeadlineExceeded), imp.deadline(1.5):
            await imp.call(imp.predict("question -> answer", lm=client), question="q")
        # the cut closed the connection while the provider still held the reply (released only after:
        # released first, the provider would answer before it noticed the close)
        cut = await anyio.to_thread.run_sync(fake.aborted.wait, 5)
    never.set()
    assert len(fake.requests) == 1
    assert cut, "the request was cut: its connection closed while the provider held the reply"


@both_backends
async def test_a_retry_sleep_and_the_next_attempt_stay_under_the_deadline(fake: FakeProvider) -> None:
    # The first attempt fails with a short wait hint; the retry is sent, and hangs: the deadline ends it.
    never = threading.Event()
    fake.add(Reply(503, json={"error": {"message": "busy"}}, headers={"retry-after": "0.2"}))
    fake.add(Reply(200, json={"choices": []}, hold=never))
    async with _client(fake) as client:
        with pytest.raises(imp.DeadlineExceeded), imp.deadline(3.0):
            await imp.call(imp.predict("question -> answer", lm=client), question="q")
        cut = await anyio.to_thread.run_sync(fake.aborted.wait, 5)  # before the hold is released (above)
    never.set()
    assert len(fake.requests) == 2
    assert fake.requests[1].at - fake.requests[0].at >= 0.2  # the wait hint was slept before the retry
    assert cut


@both_backends
async def test_a_wait_longer_than_the_time_left_is_not_slept(fake: FakeProvider) -> None:
    fake.add(Reply(503, json={"error": {"message": "busy"}}, headers={"retry-after": "5"}), _ok())
    async with _client(fake) as client:
        started = time.monotonic()
        with pytest.raises(imp.LMError) as info, imp.deadline(1.0):
            await imp.call(imp.predict("question -> answer", lm=client), question="q")
        assert time.monotonic() - started < 0.9  # failed at once rather than sleep past the deadline
    assert info.value.status == 503 and info.value.attempts == 1


@both_backends
async def test_a_request_in_time_succeeds_under_a_deadline(fake: FakeProvider) -> None:
    fake.add(_ok())
    async with _client(fake) as client, anyio.create_task_group():
        with imp.deadline(5):
            prediction = await imp.call(imp.predict("question -> answer", lm=client), question="q")
    assert prediction.answer == "fine"


# --- tool runs -------------------------------------------------------------------------------


def _agent(tools: list[imp.Tool]) -> imp.ReAct:
    lm = imp.ScriptedLM([{"tool_calls": [{"name": tools[0].name, "arguments": {"query": "x"}}]}], exhausted="done")
    return imp.react("question -> answer", tools, lm=lm)


@both_backends
async def test_a_hanging_async_tool_is_cancelled_and_the_turn_returns_its_history() -> None:
    seen: dict[str, Any] = {}

    @imp.tool
    async def search(query: str) -> str:
        """Search."""
        seen["time_left"] = time_left()
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            seen["cancelled"] = True
            raise
        return "never"

    started = time.monotonic()
    with imp.deadline(0.3):
        prediction = await imp.call(_agent([search]), question="q")
    assert time.monotonic() - started < PROMPTLY
    assert not prediction.complete and prediction.metadata.termination_cause == "deadline_exceeded"
    assert seen["cancelled"] is True and 0 < seen["time_left"] <= 0.3
    history = prediction.metadata.history
    assert history is not None
    (result,) = history[0]["tool_call_results"]
    assert result.name == "search" and result.outcome == "unknown"


@both_backends
async def test_a_hanging_sync_tool_does_not_hold_the_turn() -> None:
    release = threading.Event()

    @imp.tool
    def lookup(query: str) -> str:
        """Look up (blocks a worker thread)."""
        release.wait(10)
        return "late"

    started = time.monotonic()
    try:
        with imp.deadline(0.3):
            prediction = await imp.call(_agent([lookup]), question="q")
    finally:
        release.set()  # let the abandoned thread end
    assert time.monotonic() - started < PROMPTLY
    assert prediction.metadata.termination_cause == "deadline_exceeded"


@both_backends
async def test_a_tool_sees_the_deadline_in_force() -> None:
    seen: list[float | None] = []

    @imp.tool
    async def search(query: str) -> str:
        """Search."""
        seen.append(time_left())
        return "found"

    with imp.deadline(5):
        await imp.call(_agent([search]), question="q")
    assert seen and seen[0] is not None and 4 < seen[0] <= 5


# --- parallel workers and nested programs ----------------------------------------------------


@both_backends
async def test_parallel_workers_are_cancelled_by_the_callers_deadline() -> None:
    hang = Hang()
    program = imp.predict("question -> answer", lm=imp.StaticLM(hang))
    started = time.monotonic()
    with pytest.raises(imp.DeadlineExceeded), imp.deadline(0.2):
        await imp.parallel(program, [{"question": f"q{i}"} for i in range(6)], concurrency=3)
    assert time.monotonic() - started < PROMPTLY
    assert hang.started == 3 and hang.cancelled == 3  # the three running; the rest never started
    assert all(left is not None and left <= 0.2 for left in hang.time_left)


@both_backends
async def test_an_item_timeout_inside_a_longer_deadline_fails_only_that_slot() -> None:
    hang = Hang()
    slow = imp.predict("question -> answer", lm=imp.StaticLM(hang))
    fast = imp.predict("question -> answer", lm=imp.StaticLM(quick))
    with imp.deadline(5):
        late, done = await imp.parallel([(slow, {"question": "a"}), (fast, {"question": "b"})], timeout=0.1)
    assert isinstance(late, imp.DeadlineExceeded) and isinstance(done, imp.Prediction)
    assert hang.time_left[0] is not None and hang.time_left[0] <= 0.1


class Pipeline(imp.Program):
    """A program that calls two others in turn (a nested program)."""

    def __init__(self, first: imp.Program, second: imp.Program) -> None:
        self.first, self.second = first, second
        self.signature = imp.signature("question -> answer")

    async def acall(self, inputs: dict[str, Any], **options: Any) -> imp.Prediction:
        draft = await imp.call(self.first, inputs)
        return await imp.call(self.second, question=draft.answer)


@both_backends
async def test_a_nested_program_is_cut_by_the_outer_deadline() -> None:
    hang = Hang()
    program = Pipeline(
        imp.predict("question -> answer", lm=imp.StaticLM(quick)),
        imp.predict("question -> answer", lm=imp.StaticLM(hang)),
    )
    started = time.monotonic()
    with pytest.raises(imp.DeadlineExceeded), imp.deadline(0.3):
        await imp.call(program, question="q")
    assert time.monotonic() - started < PROMPTLY
    assert (hang.started, hang.cancelled) == (1, 1)
    assert hang.time_left[0] is not None and hang.time_left[0] < 0.3  # the first step used some of it


@both_backends
async def test_a_react_agent_nested_in_a_plain_program() -> None:
    cancelled: list[bool] = []

    @imp.tool
    async def search(query: str) -> str:
        """Search."""
        try:
            await anyio.sleep(60)
        except anyio.get_cancelled_exc_class():
            cancelled.append(True)
            raise
        return "never"

    # The agent ends its own turn at the deadline, but the program around it (which does not
    # handle deadlines) did not finish in time either: its caller gets DeadlineExceeded.
    program = Pipeline(imp.predict("question -> answer", lm=imp.StaticLM(quick)), _agent([search]))
    started = time.monotonic()
    with pytest.raises(imp.DeadlineExceeded), imp.deadline(0.3):
        await imp.call(program, question="q")
    assert time.monotonic() - started < PROMPTLY
    assert cancelled == [True]

    # Called directly, the same agent returns what it has.
    with imp.deadline(0.3):
        prediction = await imp.call(_agent([search]), question="q")
    assert prediction.metadata.termination_cause == "deadline_exceeded"


@both_backends
async def test_a_deadline_inside_a_program_only_shortens_the_callers() -> None:
    hang = Hang()

    class Patient(imp.Program):
        signature = imp.signature("question -> answer")

        async def acall(self, inputs: dict[str, Any], **options: Any) -> imp.Prediction:
            with imp.deadline(60):  # asks for more time than the caller has: does not get it
                return await imp.call(imp.predict("question -> answer", lm=imp.StaticLM(hang)), inputs)

    started = time.monotonic()
    with pytest.raises(imp.DeadlineExceeded), imp.deadline(0.2):
        await imp.call(Patient(), question="q")
    assert time.monotonic() - started < PROMPTLY
    assert hang.time_left[0] is not None and hang.time_left[0] <= 0.2
