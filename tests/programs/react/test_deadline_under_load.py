"""At its deadline a react turn returns its incomplete prediction with its history, whatever the load.

Each test runs under asyncio and trio (a sync test that starts its own loop with `anyio.run`).
"""

import time
from typing import Any

import anyio
import pytest
from react_fixtures import escalation, on_call

import imp
from imp.models.base import LMResponse
from imp.runtime.deadline import time_left

BACKENDS = ["asyncio", "trio"]
TICKET = "We were charged twice this month."
SUBMIT_ATLAS = {"tool_calls": [{"name": "submit", "arguments": {"team": "atlas", "contact": "Maya"}}]}


async def hang(messages: list[dict[str, Any]], options: dict[str, Any]) -> Any:
    await anyio.sleep(60)
    return LMResponse(text="never")


async def stall_at_the_deadline(messages: list[dict[str, Any]], options: dict[str, Any]) -> Any:
    """Waits until just before the deadline, then blocks the event loop for 30 ms, then hangs."""
    left = time_left() or 0.0
    await anyio.sleep(max(0.0, left - 0.005))
    time.sleep(0.03)  # noqa: ASYNC251 - the stall is the point
    await anyio.sleep(60)
    return LMResponse(text="never")


async def turns_at_the_deadline(handler: Any, count: int, seconds: float) -> list[Any]:
    program = imp.react(escalation, [on_call], lm=imp.StaticLM(handler=handler))
    outcomes: list[Any] = [None] * count

    async def one(index: int) -> None:
        try:
            with imp.deadline(seconds):
                outcomes[index] = await imp.call(program, ticket=f"{TICKET} #{index}")
        except Exception as exc:  # counted and asserted below
            outcomes[index] = exc

    async with anyio.create_task_group() as group:
        for index in range(count):
            group.start_soon(one, index)
    return outcomes


def check_every_turn_returned_its_history(outcomes: list[Any]) -> None:
    raised = [type(o).__name__ for o in outcomes if not isinstance(o, imp.Prediction)]
    assert raised == [], f"{len(raised)} of {len(outcomes)} turns raised: {sorted(set(raised))}"
    for index, prediction in enumerate(outcomes):
        assert not prediction.complete
        assert prediction.metadata.termination_cause == "deadline_exceeded"
        assert prediction.metadata.history[0]["ticket"] == f"{TICKET} #{index}"


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_thousand_concurrent_turns_at_their_deadline_return_their_history(backend: str) -> None:
    outcomes = anyio.run(turns_at_the_deadline, hang, 1000, 0.5, backend=backend)
    check_every_turn_returned_its_history(outcomes)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_stall_at_the_deadline_does_not_let_the_backstop_win(backend: str) -> None:
    outcomes = anyio.run(turns_at_the_deadline, stall_at_the_deadline, 20, 0.2, backend=backend)
    check_every_turn_returned_its_history(outcomes)


async def forced_submit_while_the_policy_outlasts_the_deadline() -> Any:
    async def slow_policy(call: Any) -> bool:
        await anyio.sleep(1.0)  # the forced request's `submit` is still being checked at the deadline
        return True

    lm = imp.ScriptedLM([SUBMIT_ATLAS])
    program = imp.react(escalation, [on_call], lm=lm, tool_policy=slow_policy)
    with imp.deadline(0.2):
        return await imp.call(program, ticket=TICKET, max_iters=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_deadline_passing_while_the_forced_submit_runs_ends_typed(backend: str) -> None:
    prediction = anyio.run(forced_submit_while_the_policy_outlasts_the_deadline, backend=backend)
    assert isinstance(prediction, imp.Prediction) and not prediction.complete
    assert prediction.metadata.termination_cause == "deadline_exceeded"
    (step,) = prediction.metadata.history
    assert [c.name for c in step["tool_calls"]] == ["submit"] and step["ticket"] == TICKET


async def last_text_tool_outlasts_the_deadline() -> Any:
    async def slow_page(name: str) -> str:
        await anyio.sleep(1.0)
        return name

    page = imp.tool(slow_page, name="page", description="Page someone.")
    lm = imp.ScriptedLM([{"reply": "Paged.", "tool_calls": [{"name": "page", "arguments": {"name": "Maya"}}]}])
    program = imp.react("ticket -> reply", [page], lm=lm, last_request_tools=["page"])
    with imp.deadline(0.2):
        return await imp.call(program, ticket=TICKET, max_iters=0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_deadline_passing_while_the_last_requests_tool_runs_ends_typed(backend: str) -> None:
    prediction = anyio.run(last_text_tool_outlasts_the_deadline, backend=backend)
    assert not prediction.complete and prediction.metadata.termination_cause == "deadline_exceeded"


async def other_work_after_the_turn() -> tuple[Any, float]:
    program = imp.react(escalation, [on_call], lm=imp.StaticLM(handler=hang))
    start = time.monotonic()
    prediction = None
    try:
        with imp.deadline(0.2):
            prediction = await imp.call(program, ticket=TICKET)
            await anyio.sleep(5)  # not imp's work: the backstop is back in force for it
    except imp.DeadlineExceeded:
        return prediction, time.monotonic() - start
    raise AssertionError("the sleep after the turn was not cut")


@pytest.mark.parametrize("backend", BACKENDS)
def test_the_backstop_is_back_for_other_work_after_the_turn(backend: str) -> None:
    prediction, took = anyio.run(other_work_after_the_turn, backend=backend)
    assert isinstance(prediction, imp.Prediction) and not prediction.complete
    assert took < 2.0
