"""Validators that re-ask: `validate=` refuses an answer with `imp.Retry("why")`; the model reads its
reply and the reason, and answers again, up to `max_retries`; then `imp.ValidationFailed`."""

from __future__ import annotations

import time
from typing import Any

import anyio
import pytest

import imp

SIG = imp.signature("question -> answer: int")


def four(prediction: imp.Prediction) -> None:
    if prediction.answer != 4:
        raise imp.Retry(f"{prediction.answer} is not 2 + 2")


async def async_four(prediction: imp.Prediction) -> None:
    four(prediction)


def _texts(lm: imp.ScriptedLM) -> list[str]:
    return [str(r.messages[-1]["content"]) for r in lm.requests]


@pytest.mark.parametrize("validate", [four, async_four], ids=["sync", "async"])
@pytest.mark.parametrize("make", [imp.predict, imp.chain_of_thought], ids=["predict", "chain_of_thought"])
async def test_a_re_ask_that_succeeds_on_the_second_attempt(make: Any, validate: Any) -> None:
    lm = imp.ScriptedLM([{"reasoning": "r", "answer": 5}, {"reasoning": "r", "answer": 4}])
    events: list[imp.Event] = []
    prediction = await imp.call(make(SIG, lm=lm, validate=validate), question="2 + 2?", on_event=events.append)
    assert prediction.answer == 4
    assert len(lm.requests) == 2 and prediction.metadata.lm_calls == 2
    assert prediction.metadata.usage.requests == 2  # usage counts every attempt
    second = lm.requests[1].messages
    assert (
        second[: len(lm.requests[0].messages)] == lm.requests[0].messages
    )  # the first request, then the reply and why
    assert second[-2]["role"] == "assistant" and "5" in second[-2]["content"]
    assert second[-1]["role"] == "user" and "5 is not 2 + 2" in second[-1]["content"]
    retries = [e for e in events if e.kind == "output_retry"]
    assert [(e.payload.attempt, e.payload.reason) for e in retries] == [(1, "5 is not 2 + 2")]


async def test_exhausting_max_retries_raises_validation_failed_with_every_attempt() -> None:
    lm = imp.ScriptedLM([{"answer": 5}, {"answer": 6}, {"answer": 7}, {"answer": 4}])
    with pytest.raises(imp.ValidationFailed) as caught:
        await imp.call(imp.predict(SIG, lm=lm, validate=four, max_retries=2), question="q")
    assert [a["outputs"] for a in caught.value.attempts] == [{"answer": 5}, {"answer": 6}, {"answer": 7}]
    assert [a["reason"] for a in caught.value.attempts][-1] == "7 is not 2 + 2"
    assert len(lm.requests) == 3  # max_retries=2: three attempts, the fourth reply never asked for


@pytest.mark.parametrize(
    "adapter", [imp.ChatAdapter(), imp.JSONAdapter(), imp.XMLAdapter()], ids=["chat", "json", "xml"]
)
async def test_every_adapter_re_asks_with_the_reason(adapter: imp.Adapter) -> None:
    lm = imp.ScriptedLM([{"answer": 5}, {"answer": 4}])
    prediction = await imp.call(imp.predict(SIG, lm=lm, adapter=adapter, validate=four), question="q")
    assert prediction.answer == 4 and prediction.metadata.adapter == adapter.name
    assert "5 is not 2 + 2" in str(lm.requests[1].messages[-1]["content"])


async def test_max_retries_zero_asks_once() -> None:
    lm = imp.ScriptedLM([{"answer": 5}])
    with pytest.raises(imp.ValidationFailed):
        await imp.call(imp.predict(SIG, lm=lm, validate=four, max_retries=0), question="q")
    assert len(lm.requests) == 1


async def test_a_parse_error_re_asks_with_the_error_and_the_json_fallback_is_the_last_resort() -> None:
    lm = imp.ScriptedLM(["[[ ## answer ## ]]\nfour", "[[ ## answer ## ]]\nfour", '{"answer": 4}'])
    prediction = await imp.call(imp.predict(SIG, lm=lm, max_retries=1), question="q")
    assert prediction.answer == 4 and prediction.metadata.json_fallback
    assert "could not be read (`answer`)" in _texts(lm)[1]
    assert len(lm.requests) == 3


async def test_an_unreadable_reply_then_a_readable_one_needs_no_fallback() -> None:
    lm = imp.ScriptedLM(["[[ ## answer ## ]]\nfour", {"answer": 4}])
    prediction = await imp.call(imp.predict(SIG, lm=lm, validate=four), question="q")
    assert prediction.answer == 4 and not prediction.metadata.json_fallback and len(lm.requests) == 2


async def test_a_validator_that_raises_something_else_is_a_bug_and_propagates() -> None:
    def broken(prediction: imp.Prediction) -> None:
        raise KeyError("oops")

    with pytest.raises(KeyError):
        await imp.call(imp.predict(SIG, lm=imp.ScriptedLM([{"answer": 4}]), validate=broken), question="q")


def test_bad_options_are_refused_when_the_program_is_built() -> None:
    with pytest.raises(TypeError, match="validate="):
        imp.predict(SIG, validate="yes")
    with pytest.raises(ValueError, match="max_retries"):
        imp.predict(SIG, max_retries=-1)
    with pytest.raises(ValueError, match="max_retries"):
        imp.react(SIG, [], max_retries=True)


async def test_streaming_shows_each_retry_as_a_part() -> None:
    lm = imp.ScriptedLM([{"answer": 5}, {"answer": 4}])
    parts = [p async for p in imp.stream(imp.predict(SIG, lm=lm, validate=four), question="q")]
    assert [p.reason for p in parts if p.kind == "retry"] == ["5 is not 2 + 2"]
    assert parts[-1].kind == "final" and parts[-1].prediction.answer == 4


TEAM = imp.signature("ticket -> team: enum[atlas,harbor], contact: string")


def maya(prediction: imp.Prediction) -> None:
    if prediction.contact != "Maya":
        raise imp.Retry("atlas's on-call engineer is Maya")


def _submit(id: str, contact: str) -> dict[str, Any]:
    return {"tool_calls": [{"id": id, "name": "submit", "arguments": {"team": "atlas", "contact": contact}}]}


async def test_a_validator_under_react_refuses_a_submit_and_the_model_reads_why() -> None:
    lm = imp.ScriptedLM([_submit("s1", "Bob"), _submit("s2", "Maya")])
    events: list[imp.Event] = []
    prediction = await imp.call(imp.react(TEAM, [], lm=lm, validate=maya), ticket="t", on_event=events.append)
    assert prediction.complete and prediction.contact == "Maya" and len(lm.requests) == 2
    last = lm.requests[1].messages[-1]
    assert last["role"] == "tool" and "atlas's on-call engineer is Maya" in last["content"]
    assert [e.payload.reason for e in events if e.kind == "output_retry"] == ["atlas's on-call engineer is Maya"]
    assert prediction.metadata.usage.requests == 2


async def test_a_validator_under_react_exhausts_its_retries() -> None:
    lm = imp.ScriptedLM([_submit("s1", "Bob"), _submit("s2", "Tom"), _submit("s3", "Raj")])
    with pytest.raises(imp.ValidationFailed) as caught:
        await imp.call(imp.react(TEAM, [], lm=lm, validate=maya, max_retries=1), ticket="t")
    assert [a["outputs"]["contact"] for a in caught.value.attempts] == ["Bob", "Tom"]
    assert caught.value.history is not None and len(lm.requests) == 2


async def test_a_validator_under_react_checks_a_text_answer() -> None:
    sig = imp.signature("question -> answer")

    async def yes(prediction: imp.Prediction) -> None:
        if prediction.answer != "yes":
            raise imp.Retry("answer yes or nothing")

    lm = imp.ScriptedLM(["no", "yes"])
    prediction = await imp.call(imp.react(sig, [], lm=lm, validate=yes), question="q")
    assert prediction.answer == "yes" and len(lm.requests) == 2
    assert "answer yes or nothing" in str(lm.requests[1].messages[-1]["content"])


@imp.tool
def lookup(order: str) -> str:
    """Look up an order."""
    return f"{order}: paid"


LOOKUP = {"tool_calls": [{"id": "l1", "name": "lookup", "arguments": {"order": "o1"}}]}
EXTRACTED = {"reasoning": "from the trajectory", "team": "atlas", "contact": "Bob"}


@pytest.mark.parametrize(
    ("replies", "reason"),
    [
        ([LOOKUP, _submit("f", "Bob")], "forced_submit"),
        ([LOOKUP, "I would say Bob.", EXTRACTED], "extracted"),
    ],
    ids=["forced_submit", "extracted"],
)
@pytest.mark.parametrize("max_retries", [0, 2])
async def test_the_last_answer_of_an_interrupted_turn_is_checked_once_and_a_refusal_leaves_it_incomplete(
    replies: list[Any], reason: str, max_retries: int
) -> None:
    # No request is left to re-ask with: the validator reads the answer once, a refusal ends the turn
    # incomplete with `invalid_answer` (never `imp.ValidationFailed`, whatever `max_retries` says).
    seen: list[str] = []

    def maya_counted(prediction: imp.Prediction) -> None:
        seen.append(prediction.contact)
        maya(prediction)

    lm = imp.ScriptedLM(replies)
    agent = imp.react(TEAM, [lookup], lm=lm, validate=maya_counted, max_retries=max_retries, max_iters=1)
    prediction = await imp.call(agent, ticket="t")
    assert seen == ["Bob"] and len(lm.requests) == len(replies)
    assert not prediction.complete and prediction.metadata.termination_reason == "incomplete"
    assert prediction.metadata.termination_cause == "invalid_answer"
    assert prediction.metadata.termination_error == ["the answer was not accepted: atlas's on-call engineer is Maya"]
    # The refused answer stays readable in the history, never as a step's outputs: a later call given
    # the history must not read an answered episode.
    history = prediction.metadata.history
    assert not any("contact" in step.fields for step in history)
    if reason == "forced_submit":
        (call,), (result,) = history[-1].calls, history[-1].result_list()
        assert call.name == "submit" and call.arguments["contact"] == "Bob"
        assert result.outcome == "refused" and result.result is None
        assert (
            result.error
            == "submit was not accepted: atlas's on-call engineer is Maya. Correct the outputs and call submit again."
        )
    else:
        assert history[-1].note is not None and '"contact": "Bob"' in history[-1].note
        assert history[-1].note.endswith("was not accepted: atlas's on-call engineer is Maya")
    later = imp.ScriptedLM([_submit("n", "Maya")])
    again = await imp.call(agent.with_lm(later), ticket="t2", history=history)
    assert again.complete and again.contact == "Maya"
    sent = "\n".join(str(m.get("content")) for m in later.requests[0].messages)
    assert "not accepted: atlas's on-call engineer is Maya" in sent, "the next call reads the refusal"

    accepted = (
        [*replies[:-1], _submit("f", "Maya")]
        if reason == "forced_submit"
        else [*replies[:-1], {**EXTRACTED, "contact": "Maya"}]
    )
    seen.clear()
    agent = imp.react(TEAM, [lookup], lm=imp.ScriptedLM(accepted), validate=maya_counted, max_iters=1)
    prediction = await imp.call(agent, ticket="t")
    assert prediction.complete and prediction.metadata.termination_reason == reason and prediction.contact == "Maya"
    assert seen == ["Maya"]  # asked once, not once by the step and again by the loop


async def test_a_refused_last_text_leaves_the_turn_incomplete() -> None:
    sig = imp.signature("question -> answer")
    seen: list[str] = []

    def yes(prediction: imp.Prediction) -> None:
        seen.append(prediction.answer)
        if prediction.answer != "yes":
            raise imp.Retry("answer yes")

    lm = imp.ScriptedLM([LOOKUP, "no"])
    prediction = await imp.call(imp.react(sig, [lookup], lm=lm, validate=yes, max_iters=1), question="q")
    assert seen == ["no"] and not prediction.complete
    assert prediction.metadata.termination_cause == "invalid_answer"
    assert prediction.metadata.termination_error == ["the answer was not accepted: answer yes"]
    # Recorded as the loop records a refused text answer: a thought, then the reason; never the answer.
    history = prediction.metadata.history
    assert not any("answer" in step.fields for step in history)
    assert (history[-2].thought, history[-1].note) == ("no", "Your answer was not accepted: answer yes")


def yes(prediction: imp.Prediction) -> None:
    if prediction.answer != "yes":
        raise imp.Retry("answer yes")


@pytest.mark.parametrize(
    ("sig", "replies", "validate", "refusal"),
    [
        (TEAM, [LOOKUP, _submit("f", "Bob")], maya, "submit was not accepted: atlas's on-call engineer is Maya."),
        (TEAM, [LOOKUP, "I would say Bob.", EXTRACTED], maya, "was not accepted: atlas's on-call engineer is Maya"),
        ("question -> answer", [LOOKUP, "no"], yes, "Your answer was not accepted: answer yes"),
    ],
    ids=["forced_submit", "extracted", "last_text"],
)
async def test_a_session_s_next_turn_after_a_refused_last_answer_reads_the_refusal(
    tmp_path: Any, sig: Any, replies: list[Any], validate: Any, refusal: str
) -> None:
    sessions = imp.SQLiteSessions(tmp_path / "s.db")
    agent = imp.react(sig, [lookup], lm=imp.ScriptedLM(replies), validate=validate, max_iters=1)
    inputs = {"ticket": "t"} if sig is TEAM else {"question": "q"}
    first = await imp.call(agent, session_id="s", sessions=sessions, **inputs)
    assert first.metadata.termination_cause == "invalid_answer"
    outputs = list(agent.signature.outputs)
    kept = sessions.history("s")
    assert not any(all(k in step.fields for k in outputs) for step in kept), "the session holds no answered episode"
    later = imp.ScriptedLM([_submit("n", "Maya") if sig is TEAM else "yes"])
    second = await imp.call(agent.with_lm(later), session_id="s", sessions=sessions, **inputs)
    assert second.complete
    sent = "\n".join(str(m.get("content")) for m in later.requests[0].messages)
    assert refusal in sent, "the next turn sends the refusal, not an accepted answer"
    if sig is TEAM:  # the refused outputs are still there for the model to read
        assert "Bob" in sent or "Bob" in str(later.requests[0].messages)


async def test_a_function_program_takes_a_validator() -> None:
    lm = imp.ScriptedLM([{"answer": 5}, {"answer": 4}])

    @imp.fn(lm=lm, validate=four)
    async def add(question: str) -> int:
        """Add."""
        answer: int = imp.out()
        return answer

    assert await add("2 + 2?") == 4 and len(lm.requests) == 2


def test_a_saved_program_keeps_its_validator_and_a_tool_its_approval(tmp_path: Any) -> None:
    refund = imp.tool(
        lambda order: order,
        name="refund",
        description="Refund.",
        schema={"type": "object", "properties": {"order": {"type": "string"}}},
        requires_approval=True,
    )
    path = tmp_path / "p.json"
    imp.save(imp.react(TEAM, [refund], validate=maya, max_retries=1), path, registry={"maya": maya, "refund": refund})
    loaded = imp.load(path, registry={"maya": maya, "refund": refund})
    assert loaded.validate is maya and loaded.max_retries == 1 and loaded.tools[0].requires_approval


async def test_a_function_program_with_tools_pauses_and_resumes() -> None:
    ran: list[str] = []

    @imp.tool(requires_approval=True)
    def refund(order: str) -> str:
        """Refund an order."""
        ran.append(order)
        return "refunded"

    lm = imp.ScriptedLM([{"tool_calls": [{"id": "r", "name": "refund", "arguments": {"order": "A"}}]}, "Refunded A."])

    @imp.fn(lm=lm, tools=[refund])
    async def handle(ticket: str) -> str:
        """Handle the ticket."""
        reply: str = imp.out()
        return reply

    paused = await handle.predict("refund A")
    assert paused.metadata.termination_reason == "awaiting_approval" and ran == []
    done = await imp.call(handle, resume=paused.metadata.pending, decisions={"r": imp.Allow()})
    assert done.reply == "Refunded A." and ran == ["A"]


@pytest.mark.parametrize("answer", ["submit", "text", "forced_submit"])
async def test_a_react_turn_ends_at_its_deadline_while_its_validator_reads_the_answer(answer: str) -> None:
    # docs/react.md: under imp.deadline a react turn ends itself at the deadline and returns what it has
    # (the backstop waits for it), so an async validator still reading the answer is cut there too.
    async def slow(prediction: imp.Prediction) -> None:
        await anyio.sleep(5)

    team = imp.signature("ticket -> team: enum[atlas,harbor], contact: string")
    submit = {"tool_calls": [{"name": "submit", "arguments": {"team": "atlas", "contact": "Maya"}}]}
    signature, replies, options = {
        "submit": (team, [submit], {}),
        "text": ("ticket -> reply", ["Maya is on it."], {}),
        "forced_submit": (team, [{"next_thought": "atlas.", "tool_calls": []}, submit], {}),
    }[answer]
    agent = imp.react(signature, [], lm=imp.ScriptedLM(replies), validate=slow, **options)
    started = time.monotonic()
    with imp.deadline(0.2):
        prediction = await imp.call(agent, ticket="t")
    assert time.monotonic() - started < 2
    assert (prediction.metadata.termination_reason, prediction.metadata.termination_cause) == (
        "incomplete",
        "deadline_exceeded",
    )
    assert not prediction.complete and prediction.metadata.history[0]["ticket"] == "t"
