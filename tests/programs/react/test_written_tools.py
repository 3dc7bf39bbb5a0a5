"""An LM without native tool calling gets the written-tool layout: tools listed as text, calls as JSON."""

from react_fixtures import escalation, on_call, results

import imp


async def test_written_tool_calls_run_and_replay_as_text() -> None:
    lm = imp.ScriptedLM(
        [
            '[[ ## next_thought ## ]]\nMoney, so atlas.\n\n[[ ## tool_calls ## ]]\n[{"name": "on_call", "arguments": {"team": "atlas"}}]\n\n[[ ## completed ## ]]',
            '[[ ## next_thought ## ]]\nDone.\n\n[[ ## tool_calls ## ]]\n[{"name": "submit", "arguments": {"team": "atlas", "contact": "Maya"}}]',
        ],
        tool_calling=False,
    )
    prediction = await imp.call(imp.react(escalation, [on_call], lm=lm), ticket="We were charged twice.")
    assert (prediction.team, prediction.contact, prediction.metadata.termination_reason) == ("atlas", "Maya", "submit")
    assert results(prediction)[0] == "Maya"
    first = lm.requests[0]
    assert "tools" not in first.options and "tool_choice" not in first.options
    system = first.messages[0]["content"]
    assert "`tool_calls`" in system
    assert "(1) on_call, whose description is <desc>Look up the on-call engineer for a squad.</desc>" in system
    assert "(2) submit, whose description is" in system
    assert lm.requests[1].messages[: len(first.messages)] == first.messages
    second = lm.requests[1].messages
    assert second[-2]["role"] == "assistant" and "[[ ## tool_calls ## ]]" in second[-2]["content"]
    assert "tool_calls" not in second[-2]
    assert second[-1] == {"role": "user", "content": "Results of your tool calls:\n- `on_call` (call_1_0): Maya"}


async def test_written_text_answer() -> None:
    lm = imp.ScriptedLM(
        [
            '[[ ## reply ## ]]\n\n[[ ## tool_calls ## ]]\n[{"name": "on_call", "arguments": {"team": "quill"}}]',
            "[[ ## reply ## ]]\nRaj is on it.\n\n[[ ## tool_calls ## ]]\n[]",
        ],
        tool_calling=False,
    )
    prediction = await imp.call(imp.react("ticket -> reply", [on_call], lm=lm), ticket="Broken button.")
    assert (prediction.reply, prediction.metadata.termination_reason) == ("Raj is on it.", "answered")
    assert "write it in `reply`, and leave `tool_calls` empty" in lm.requests[0].messages[0]["content"]
