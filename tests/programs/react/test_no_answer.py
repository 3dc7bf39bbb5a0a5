"""A turn without an answer is never complete; a provider error no request can cure ends the turn at once."""

from typing import Any

import pytest
from react_fixtures import escalation, on_call, script

import imp

TICKET = "We were charged twice this month."
ON_CALL_ATLAS = {"tool_calls": [{"name": "on_call", "arguments": {"team": "atlas"}}]}
ONLY_CALLS = {"tool_calls": [{"name": "on_call", "arguments": {"team": "harbor"}}]}
EMPTY = {"tool_calls": []}
EMPTY_TEXT = {"reply": "   ", "tool_calls": []}


def finish_on_page(args: dict[str, Any], result: Any, inputs: dict[str, Any]) -> Any:
    return imp.CONTINUE


def text_program(finish: str, lm: imp.ScriptedLM) -> imp.ReAct:
    options: dict[str, Any] = {"finish_on": {"on_call": finish_on_page}} if finish == "tools" else {}
    return imp.react("ticket -> reply", [on_call], lm=lm, finish=finish, **options)


@pytest.mark.parametrize("finish", ["auto", "submit", "tools"])
@pytest.mark.parametrize("max_iters", [0, 1, 2])
@pytest.mark.parametrize("last", [ONLY_CALLS, EMPTY, EMPTY_TEXT], ids=["only-tool-calls", "empty", "blank-text"])
async def test_a_turn_whose_last_reply_has_no_text_is_incomplete(finish: str, max_iters: int, last: Any) -> None:
    steps = [ON_CALL_ATLAS] * max_iters + [last, last, last]
    lm = imp.ScriptedLM(steps, exhausted=EMPTY)
    prediction = await imp.call(text_program(finish, lm), ticket=TICKET, max_iters=max_iters)
    assert prediction.reply is None
    assert not prediction.complete
    assert prediction.metadata.termination_reason == "incomplete"
    assert prediction.metadata.termination_cause is not None


@pytest.mark.parametrize("finish", ["auto", "submit"])
@pytest.mark.parametrize("max_iters", [0, 1])
async def test_the_grid_still_answers_when_the_last_request_does(finish: str, max_iters: int) -> None:
    answer = (
        {"reply": "Maya.", "tool_calls": []}
        if finish == "auto"
        else {"tool_calls": [{"name": "submit", "arguments": {"reply": "Maya."}}]}
    )
    lm = script([ON_CALL_ATLAS] * max_iters + [answer])
    prediction = await imp.call(text_program(finish, lm), ticket=TICKET, max_iters=max_iters)
    assert (prediction.reply, prediction.complete) == ("Maya.", True)


async def test_the_last_text_that_only_calls_lists_them_unexecuted() -> None:
    lm = script([ON_CALL_ATLAS, ONLY_CALLS])
    prediction = await imp.call(imp.react("ticket -> reply", [on_call], lm=lm, max_iters=1), ticket=TICKET)
    assert (prediction.complete, prediction.metadata.termination_cause) == (False, "max_iters")
    assert [c.name for c in prediction.metadata.unexecuted_tool_calls] == ["on_call"]


SUBMIT_MAYA = {"name": "submit", "arguments": {"team": "atlas", "contact": "Maya"}}
PAGE = {"name": "on_call", "arguments": {"team": "harbor"}, "id": "p1"}
EXTRACTED = {"reasoning": "from the history", "team": "atlas", "contact": "Maya"}


@pytest.mark.parametrize(
    ("last", "reason"),
    [([PAGE, SUBMIT_MAYA], "forced_submit"), ([PAGE], "extracted")],
    ids=["beside-submit", "without-submit"],
)
async def test_the_forced_submit_lists_the_calls_it_does_not_run_unexecuted(last: list[Any], reason: str) -> None:
    # Only `submit` runs in the forced request; a call to another tool is neither run nor recorded in
    # the history, so it is listed, as the last text lists its calls: nothing the model asked is lost.
    replies: list[Any] = [ON_CALL_ATLAS, {"tool_calls": last}]
    if reason == "extracted":
        replies.append(EXTRACTED)
    lm = imp.ScriptedLM(replies)
    agent = imp.react("ticket -> team, contact", [on_call], lm=lm, max_iters=1)
    prediction = await imp.call(agent, ticket=TICKET)
    assert prediction.metadata.termination_reason == reason and prediction.contact == "Maya"
    unexecuted = prediction.metadata.unexecuted_tool_calls
    assert [(c.id, c.name, dict(c.arguments)) for c in unexecuted] == [("p1", "on_call", {"team": "harbor"})]
    assert sum(1 for step in prediction.metadata.history for c in step.calls if c.id == "p1") == 0


# --- a provider error no further request can cure ---------------------------------------


def provider_error(kind: str) -> imp.LMError:
    errors = {
        "401": imp.LMError("invalid api key", status=401),
        "403": imp.LMError("forbidden", status=403),
        "402": imp.LMError("payment required", status=402),
        "quota": imp.LMError("You exceeded your current quota", status=429, code="insufficient_quota"),
        "400": imp.LMError("invalid request: unknown parameter", status=400),
        "422": imp.LMError("unprocessable", status=422),
    }
    return errors[kind]


@pytest.mark.parametrize("kind", ["401", "403", "402", "quota", "400", "422"])
@pytest.mark.parametrize("signature", [escalation, "ticket -> reply"], ids=["submit", "text"])
async def test_a_fatal_provider_error_ends_the_turn_at_once_with_the_history(kind: str, signature: Any) -> None:
    error = provider_error(kind)
    lm = script([ON_CALL_ATLAS, error, {"reply": "never", "tool_calls": []}])
    with pytest.raises(imp.LMError) as info:
        await imp.call(imp.react(signature, [on_call], lm=lm), ticket=TICKET)
    assert info.value is error, "the provider's own error, with its status and body"
    assert len(lm.requests) == 2, "no last request after an error another request would meet again"
    history = info.value.history  # type: ignore[attr-defined]
    assert isinstance(history, imp.History)
    assert history[0]["ticket"] == TICKET and [r.result for r in history[0]["tool_call_results"]] == ["Maya"]


@pytest.mark.parametrize("kind", ["401", "quota"])
async def test_a_fatal_error_in_the_last_request_is_raised_with_the_history(kind: str) -> None:
    error = provider_error(kind)
    lm = script([ON_CALL_ATLAS, error])
    with pytest.raises(imp.LMError) as info:
        await imp.call(imp.react(escalation, [on_call], lm=lm, max_iters=1), ticket=TICKET)
    assert info.value is error and len(lm.requests) == 2
    assert len(info.value.history) == 1  # type: ignore[attr-defined]


@pytest.mark.parametrize(
    "error",
    [
        imp.LMError("upstream broke", status=500),
        imp.LMError("slow down", status=429, retryable=True),
        imp.LMError("connection reset"),
    ],
    ids=["500", "429", "no-status"],
)
async def test_a_transient_error_still_gets_the_last_request(error: imp.LMError) -> None:
    lm = script([error, {"tool_calls": [{"name": "submit", "arguments": {"team": "atlas", "contact": "Maya"}}]}])
    prediction = await imp.call(imp.react(escalation, [on_call], lm=lm), ticket=TICKET)
    assert (prediction.metadata.termination_reason, prediction.metadata.termination_cause) == (
        "forced_submit",
        "prediction_error",
    )


async def test_an_overflow_is_not_fatal() -> None:
    overflow = imp.LMError("maximum context length exceeded", status=400, context_window_exceeded=True)
    lm = script([overflow])
    prediction = await imp.call(imp.react(escalation, [on_call], lm=lm), ticket=TICKET)
    assert (prediction.complete, prediction.metadata.termination_cause) == (False, "context_window_exceeded")


async def test_finish_tools_a_fatal_error_is_not_forgiven() -> None:
    error = provider_error("401")
    lm = script([error, ON_CALL_ATLAS])
    program = imp.react("ticket -> reply", [on_call], lm=lm, finish="tools", finish_on={"on_call": finish_on_page})
    with pytest.raises(imp.LMError):
        await imp.call(program, ticket=TICKET)
    assert len(lm.requests) == 1
