"""The loop writes every piece of syntax in its adapter's dialect: the forced request, replay, written tools."""

import json
from typing import Any

import pytest
from react_fixtures import escalation, on_call, results, script

import imp
from imp.adapters.base import Adapter

ADAPTERS = [imp.ChatAdapter(), imp.JSONAdapter(), imp.XMLAdapter()]
SUBMIT_ATLAS = {"tool_calls": [{"name": "submit", "arguments": {"team": "atlas", "contact": "Maya"}}]}


def contents(request: Any) -> list[str]:
    return [str(m.get("content") or "") for m in request.messages]


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.name)
def test_field_section_is_the_dialects_marker(adapter: Adapter) -> None:
    section = adapter.field_section("next_thought", "Money, so atlas.")
    expected = {
        "ChatAdapter": "[[ ## next_thought ## ]]\nMoney, so atlas.",
        "JSONAdapter": "[[ ## next_thought ## ]]\nMoney, so atlas.",  # JSON's inputs use Chat markers
        "XMLAdapter": "<next_thought>\nMoney, so atlas.\n</next_thought>",
    }
    assert section == expected[adapter.name]


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.name)
async def test_the_forced_request_shows_the_thought_under_the_adapters_marker(adapter: Adapter) -> None:
    lm = script([{"next_thought": "Money, so atlas.", "tool_calls": []}, SUBMIT_ATLAS])
    program = imp.react(escalation, [on_call], lm=lm, adapter=adapter)
    prediction = await imp.call(program, ticket="We were charged twice.")
    assert prediction.metadata.termination_reason == "forced_submit" and prediction.contact == "Maya"
    forced = lm.requests[1]
    last = forced.messages[-1]
    assert last["role"] == "user"
    assert str(last["content"]).endswith(adapter.field_section("next_thought", "Money, so atlas."))
    assert forced.options["tool_choice"] == {"type": "function", "function": {"name": "submit"}}
    if adapter.name == "XMLAdapter":
        assert not any("[[ ## " in text for text in contents(forced)), "XML requests carry no Chat markers"
    assert prediction.metadata.history[0]["next_thought"] == "Money, so atlas.", "the history keeps the step"


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.name)
async def test_a_replayed_answer_is_written_as_the_adapter_asks_for_replies(adapter: Adapter) -> None:
    history = imp.History([{"ticket": "old", "team": "beacon", "contact": "Ines", "tool_calls": []}])
    lm = script([SUBMIT_ATLAS])
    program = imp.react(escalation, [on_call], lm=lm, adapter=adapter)
    await imp.call(program, ticket="new", history=history)
    assistant = [m for m in lm.requests[0].messages if m["role"] == "assistant"]
    assert len(assistant) == 1
    text = str(assistant[0]["content"])
    assert text == adapter.reply_text(escalation, {"team": "beacon", "contact": "Ines"})
    assert adapter.parse(escalation, text) == {"team": "beacon", "contact": "Ines"}, "the adapter reads it back"
    if adapter.name == "XMLAdapter":
        assert "<team>" in text and "[[ ## " not in text
    if adapter.name == "JSONAdapter":
        assert json.loads(text) == {"team": "beacon", "contact": "Ines"}


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.name)
async def test_written_tool_calls_in_the_adapters_layout(adapter: Adapter) -> None:
    program = imp.react(escalation, [on_call], adapter=adapter)
    step_sig = program.step_signature("auto", written=True)
    lookup = {"next_thought": "Money, so atlas.", "tool_calls": [{"name": "on_call", "arguments": {"team": "atlas"}}]}
    submit = {
        "next_thought": "Done.",
        "tool_calls": [{"name": "submit", "arguments": {"team": "atlas", "contact": "Maya"}}],
    }
    first_reply = adapter.reply_text(step_sig, lookup)
    lm = imp.ScriptedLM([first_reply, adapter.reply_text(step_sig, submit)], tool_calling=False)
    prediction = await imp.call(program.with_lm(lm), ticket="We were charged twice.")
    assert (prediction.team, prediction.contact, prediction.metadata.termination_reason) == ("atlas", "Maya", "submit")
    assert results(prediction)[0] == "Maya"
    assert prediction.metadata.history[0]["next_thought"] == "Money, so atlas.", "the thought is kept"
    first, second = lm.requests
    assert "tools" not in first.options
    assert second.messages[: len(first.messages)] == first.messages, "each request extends the previous one"
    replayed = second.messages[-2]
    assert replayed["role"] == "assistant" and "tool_calls" not in replayed
    assert replayed["content"] == first_reply, "the step replays as the model wrote it, in the adapter's layout"
    assert second.messages[-1]["content"] == "Results of your tool calls:\n- `on_call` (call_1_0): Maya"
    system = str(first.messages[0]["content"])
    assert "(1) on_call, whose description is <desc>" in system
    if adapter.name == "XMLAdapter":
        assert "<tool_calls>" in str(replayed["content"])
        assert not any("[[ ## " in text for text in contents(second))
    if adapter.name == "JSONAdapter":
        assert json.loads(str(replayed["content"]))["tool_calls"][0]["name"] == "on_call"


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.name)
async def test_written_layout_forced_request_moves_the_thought_in_the_adapters_syntax(adapter: Adapter) -> None:
    program = imp.react(escalation, [on_call], adapter=adapter, max_iters=2)
    step_sig = program.step_signature("auto", written=True)
    steps = [
        adapter.reply_text(
            step_sig, {"next_thought": "Look.", "tool_calls": [{"name": "on_call", "arguments": {"team": "atlas"}}]}
        ),
        # XML reads an empty list back only once the values room teaches it to; a thought alone is valid.
        adapter.field_section("next_thought", "hm")
        if adapter.name == "XMLAdapter"
        else adapter.reply_text(step_sig, {"next_thought": "hm", "tool_calls": []}),
        adapter.reply_text(step_sig, {"next_thought": "", "tool_calls": SUBMIT_ATLAS["tool_calls"]}),
    ]
    lm = imp.ScriptedLM(steps, tool_calling=False)
    prediction = await imp.call(program.with_lm(lm), ticket="We were charged twice.")
    assert prediction.metadata.termination_reason == "forced_submit" and prediction.contact == "Maya"
    forced = lm.requests[2]
    assert forced.messages[-1]["role"] == "user"
    assert str(forced.messages[-1]["content"]).endswith(adapter.field_section("next_thought", "hm"))
    assert forced.messages[-2]["role"] == "assistant", "the previous step is the model's, then the user speaks"
