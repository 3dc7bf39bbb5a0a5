"""Tool-call arguments a model wrote that are not JSON: kept, quoted back to the model, never run, saved."""

from __future__ import annotations

import copy
import pickle
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply
from lm_constants import FAST_RETRIES, SECRET

import imp
from imp.models._wire import parse_arguments, wire_arguments
from imp.records import ToolCall, UnreadArguments

UNREADABLE = ["a=1, b=2", "not json at all", "add(1, 2)", "a: 1, b: 2"]

ADDED: list[tuple[int, int]] = []


@imp.tool
def add(a: int, b: int) -> int:
    """Add two numbers."""
    ADDED.append((a, b))
    return a + b


SUM = imp.signature("question -> answer, total: int")


def _completion(message: dict[str, Any], finish: str) -> Reply:
    return Reply(
        json={
            "id": "chatcmpl-1",
            "object": "chat.completion",
            "model": "gpt-4o",
            "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": finish}],
            "usage": {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14},
        }
    )


def _call(arguments: str, name: str = "add", call_id: str = "call_1") -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.mark.parametrize("text", UNREADABLE)
def test_unreadable_arguments_are_no_arguments_that_keep_the_text(text: str) -> None:
    parsed = parse_arguments(text)
    assert isinstance(parsed, UnreadArguments) and parsed.text == text
    assert parsed == {} and not parsed
    assert wire_arguments(parsed) == "{}"  # what goes back in the history is valid JSON
    assert text in repr(parsed)


@pytest.mark.parametrize("text", UNREADABLE)
def test_a_call_with_unread_arguments_survives_dump_load_copy_and_pickle(text: str) -> None:
    call = ToolCall.load({"id": "c1", "name": "add", "arguments": text})
    assert isinstance(call.arguments, UnreadArguments) and call.arguments.text == text
    assert call.dump() == {"id": "c1", "name": "add", "arguments": text}
    for again in (ToolCall.load(call.dump()), copy.deepcopy(call), pickle.loads(pickle.dumps(call))):
        assert isinstance(again.arguments, UnreadArguments) and again.arguments.text == text


def test_readable_argument_text_still_loads_as_an_object() -> None:
    assert ToolCall.load({"id": "c", "name": "add", "arguments": "{'a': 1, 'b': 2,}"}).arguments == {"a": 1, "b": 2}
    assert ToolCall.load({"id": "c", "name": "add", "arguments": "  "}).arguments == {}
    assert type(ToolCall.load({"id": "c", "name": "add", "arguments": '{"a": 1}'}).arguments) is dict


@pytest.mark.parametrize("text", UNREADABLE)
def test_a_scripted_call_with_unreadable_arguments_is_refused_and_quoted(text: str) -> None:
    ADDED.clear()
    lm = imp.ScriptedLM(
        [
            {"tool_calls": [{"name": "add", "arguments": text}]},
            {"tool_calls": [{"name": "add", "arguments": {"a": 1, "b": 2}}]},
            {"tool_calls": [{"name": "submit", "arguments": {"answer": "three", "total": 3}}]},
        ]
    )
    prediction = imp.call_sync(imp.react(SUM, [add], lm=lm), question="1+2?")
    assert prediction.total == 3 and ADDED == [(1, 2)]  # the unreadable call never ran
    first = prediction.metadata.history[0]
    (result,) = first.result_list()
    assert result.outcome == "refused" and text in (result.error or "") and "not a JSON object" in (result.error or "")
    assert isinstance(first.calls[0].arguments, UnreadArguments) and first.calls[0].arguments.text == text
    # The model's next request tells it what it wrote.
    tool_messages = [m for m in lm.requests[1].messages if m["role"] == "tool"]
    assert text in str(tool_messages[0]["content"])


async def test_a_provider_call_with_unreadable_arguments_is_quoted_back_and_replayed_as_json(
    fake: FakeProvider,
) -> None:
    ADDED.clear()
    fake.add(
        _completion({"content": None, "tool_calls": [_call("a=1, b=2")]}, "tool_calls"),
        _completion({"content": None, "tool_calls": [_call('{"a": 1, "b": 2}', call_id="call_2")]}, "tool_calls"),
        _completion(
            {"content": None, "tool_calls": [_call('{"answer": "three", "total": 3}', "submit", "call_3")]},
            "tool_calls",
        ),
    )
    client = imp.lm("openai:gpt-4o", api_key=SECRET, base_url=fake.base_url, retry_policy=FAST_RETRIES, timeout=5.0)
    async with client:
        prediction = await imp.call(imp.react(SUM, [add], lm=client), question="1+2?")
    assert prediction.total == 3 and ADDED == [(1, 2)]
    second = fake.requests[1].json["messages"]
    assistant = next(m for m in second if m["role"] == "assistant")
    assert assistant["tool_calls"][0]["function"]["arguments"] == "{}"
    tool = next(m for m in second if m["role"] == "tool")
    assert "a=1, b=2" in tool["content"] and "not a JSON object" in tool["content"]
    saved = prediction.metadata.history[0].calls[0].dump()
    assert saved["arguments"] == "a=1, b=2"
