"""A react turn under a budget and a context window: a turn the budget stops keeps its history as a
deadline keeps it; a turn whose history cannot fit the window starts its projection without a
request the provider would refuse."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_provider import FakeProvider, Received, Reply, chat_completion
from react_fixtures import escalation, on_call, script

import imp

TICKET = "Charged twice for one order."
ON_CALL_ATLAS = {"tool_calls": [{"name": "on_call", "arguments": {"team": "atlas"}}]}
SUBMIT_ATLAS = {"tool_calls": [{"name": "submit", "arguments": {"team": "atlas", "contact": "Maya"}}]}


async def test_a_turn_stopped_by_the_request_limit_raises_with_its_history() -> None:
    lm = script([ON_CALL_ATLAS, ON_CALL_ATLAS, SUBMIT_ATLAS])
    budget = imp.Budget(requests=2)
    with pytest.raises(imp.BudgetExceeded) as caught:
        await imp.call(imp.react(escalation, [on_call], lm=lm), ticket=TICKET, budget=budget)
    error = caught.value
    assert error.limit == "requests" and error.usage.requests == 2
    history = error.history
    assert history is not None and len(history) == 2  # both steps that ran, each with its result
    assert [r.result for step in history for r in step.results] == ["Maya", "Maya"]
    assert budget.spent.requests == 2 and lm.remaining == 1  # the third request was never sent


async def test_a_turn_stopped_by_the_tool_call_limit_keeps_the_step_whose_calls_did_not_run() -> None:
    calls = 0

    def counted(team: str) -> str:
        nonlocal calls
        calls += 1
        return "Maya"

    tool = imp.tool(counted, name="on_call", description="Look up the on-call engineer.")
    lm = script([ON_CALL_ATLAS, ON_CALL_ATLAS, SUBMIT_ATLAS])
    with pytest.raises(imp.BudgetExceeded) as caught:
        await imp.call(imp.react(escalation, [tool], lm=lm), ticket=TICKET, budget=imp.Budget(tool_calls=1))
    history = caught.value.history
    assert calls == 1 and caught.value.limit == "tool_calls"
    assert [len(step.results) for step in history] == [1, 0]  # the second step is kept, its call not run


async def test_the_loops_own_submit_is_not_a_tool_call() -> None:
    lm = script([ON_CALL_ATLAS, SUBMIT_ATLAS])
    prediction = await imp.call(imp.react(escalation, [on_call], lm=lm), ticket=TICKET, budget=imp.Budget(tool_calls=1))
    assert prediction.contact == "Maya"


async def test_a_nested_call_shares_its_parents_budget() -> None:
    inner = imp.predict("ticket -> team", lm=imp.ScriptedLM([{"team": "atlas"}] * 3))

    class Triage(imp.Program):
        signature = imp.signature("ticket -> teams")

        async def acall(self, inputs: dict[str, Any], **options: Any) -> imp.Prediction:
            first = await imp.call(inner, ticket=inputs["ticket"])
            second = await imp.call(inner, ticket=inputs["ticket"])
            return imp.Prediction({"teams": f"{first.team} {second.team}"})

    budget = imp.Budget(requests=1)
    with pytest.raises(imp.BudgetExceeded):
        await imp.call(Triage(), ticket=TICKET, budget=budget)
    assert budget.spent.requests == 1


def _episodes(n: int) -> imp.History:
    words = "the customer wrote a long message about the order " * 12
    turns: list[dict[str, Any]] = []
    for i in range(n):
        turns.append(
            {
                "ticket": f"ticket {i}: {words}",
                "tool_calls": [imp.ToolCall(f"c{i}", "on_call", {"team": "atlas"})],
                "tool_call_results": [imp.ToolResult(f"c{i}", "on_call", "Maya")],
            }
        )
        turns.append(
            {
                "tool_calls": [imp.ToolCall(f"s{i}", "submit", {"team": "atlas", "contact": "Maya"})],
                "tool_call_results": [imp.ToolResult(f"s{i}", "submit", {"team": "atlas", "contact": "Maya"})],
                "team": "atlas",
                "contact": "Maya",
            }
        )
    return imp.History(turns)


async def test_a_history_too_long_for_the_window_is_projected_before_any_request_is_sent(fake: FakeProvider) -> None:
    def server(received: Received) -> Reply:
        if received.path != "/v1/chat/completions":
            return Reply(404, json={"detail": "Not Found"})
        return Reply(json=chat_completion(None, [("s", "submit", {"team": "atlas", "contact": "Maya"})]))

    fake.responder = server
    lm = imp.lm("openai:local-model", base_url=fake.base_url, context_window=500)
    program = imp.react(escalation, [on_call], lm=lm)
    prediction = await imp.call(program, ticket=TICKET, history=_episodes(8))
    assert prediction.metadata.termination_reason == "submit"
    projection = prediction.metadata.context_projection
    assert projection is not None and projection["omitted_prior_groups"] > 0
    sent = [r for r in fake.requests if r.path == "/v1/chat/completions"]
    assert len(sent) == 1, "no request the server would have refused was sent"
    assert "ticket 0" not in json.dumps(sent[0].json)  # the oldest episodes were left out
    await lm.aclose()
