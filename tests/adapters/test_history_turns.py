"""A history turn that holds none of the signature's fields is refused, in every adapter, before any request."""

from __future__ import annotations

from typing import Any

import pytest

import imp

CHAT = imp.signature("question, history: History -> answer")
REPLIES = {
    "chat": "[[ ## answer ## ]]\nok\n\n[[ ## completed ## ]]",
    "json": '{"answer": "ok"}',
    "xml": "<answer>ok</answer>",
}


@pytest.mark.parametrize("adapter", ["chat", "json", "xml"])
@pytest.mark.parametrize(
    "history",
    [[{"q": "hi", "a": "hello"}], imp.History([{"question": "hi", "answer": "hello"}, {"query": "again"}])],
    ids=["misspelt-keys", "second-turn"],
)
def test_a_turn_with_none_of_the_fields_is_refused_naming_its_keys(adapter: str, history: Any) -> None:
    lm = imp.ScriptedLM([REPLIES[adapter]])
    with pytest.raises(
        imp.InvalidInputError, match=r"input field `history`: turn \d holds none of the signature's fields"
    ) as info:
        imp.call_sync(imp.predict(CHAT, lm=lm, adapter=adapter), question="q", history=history)
    assert "a turn is a mapping of question, answer" in str(info.value)
    assert lm.requests == []  # refused before anything was sent


@pytest.mark.parametrize("adapter", ["chat", "json", "xml"])
def test_turns_with_some_of_the_fields_names_or_tool_steps_are_replayed(adapter: str) -> None:
    history = imp.History(
        [
            {"question": "hi", "answer": "hello", "mood": "extra keys are ignored"},
            {"answer": "only an output", "assistant_name": "bot"},
            imp.Step(tool_calls=(imp.ToolCall("c1", "look", {}),), results=(imp.ToolResult("c1", "look", "seen"),)),
        ]
    )
    lm = imp.ScriptedLM([REPLIES[adapter]])
    assert imp.call_sync(imp.predict(CHAT, lm=lm, adapter=adapter), question="q", history=history).answer == "ok"
    roles = [m["role"] for m in lm.requests[0].messages]
    assert roles == ["system", "user", "assistant", "assistant", "assistant", "tool", "user"]
