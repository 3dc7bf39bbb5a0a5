"""An empty reply says so in its parse error, under every adapter, and only an empty one does."""

from __future__ import annotations

import pytest

import imp

ADAPTERS = [imp.ChatAdapter, imp.JSONAdapter, imp.XMLAdapter]


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.__name__)
@pytest.mark.parametrize("reply", ["", "  \n "])
async def test_an_empty_reply_says_so(adapter: type[imp.Adapter], reply: str) -> None:
    lm = imp.ScriptedLM([reply, reply])
    with pytest.raises(imp.AdapterParseError) as info:
        await imp.call(imp.predict("question -> answer: int", lm=lm, adapter=adapter()), question="2 + 3?")
    assert info.value.completion == reply
    assert "the reply was empty" in str(info.value)


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.__name__)
async def test_a_reply_with_text_does_not_say_empty(adapter: type[imp.Adapter]) -> None:
    lm = imp.ScriptedLM(["five", "five"])
    with pytest.raises(imp.AdapterParseError) as info:
        await imp.call(imp.predict("question -> answer: int", lm=lm, adapter=adapter()), question="2 + 3?")
    assert "empty" not in str(info.value)
