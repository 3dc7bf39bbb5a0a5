"""A reply read whole and then streamed is handed on one way, whatever the LM: its reasoning, its text,
each tool call with its arguments as one delta, then `final` (docs/models.md, Streaming). An HTTP client
does it for a request its server cannot stream; `LM.stream`'s default does it for an LM with only
`request` (`imp.ScriptedLM`, `imp.StaticLM`, a class of your own)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply

import imp
from imp.models import lm
from imp.models.base import StreamEvent
from imp.runtime.budget import budget_scope
from imp.runtime.usage import track_usage

ASK = [{"role": "user", "content": "What is 2 + 3?"}]
CALL = {"name": "add", "arguments": {"a": 2, "b": 3}}


class RequestOnlyLM(imp.LM):
    """An LM of a user's own, with `request` alone."""

    async def request(self, messages: Sequence[Any], **options: Any) -> imp.LMResponse:
        call = imp.ToolCall(id="call_1", name="add", arguments={"a": 2, "b": 3})
        return imp.LMResponse(text="Adding.", reasoning="Sum it.", tool_calls=(call,), finish_reason="tool_calls")


def _shape(events: list[StreamEvent]) -> list[tuple[str, object, str | None]]:
    shown: list[tuple[str, object, str | None]] = []
    for event in events:
        delta: object = json.loads(event.delta) if event.kind == "tool_call" else event.delta
        shown.append((event.kind, delta, event.tool_name))
    return shown


EXPECTED = [
    ("reasoning", "Sum it.", None),
    ("text", "Adding.", None),
    ("tool_call", {"a": 2, "b": 3}, "add"),
    ("final", "", None),
]


async def test_an_lm_with_only_request_streams_tool_calls_with_their_arguments() -> None:
    scripted = imp.ScriptedLM([{"tool_calls": [CALL], "reasoning": "Sum it.", "next_thought": "Adding."}])
    static = imp.StaticLM(
        lambda messages, options: {"tool_calls": [CALL], "reasoning": "Sum it.", "next_thought": "Adding."}
    )
    for client in (scripted, static, RequestOnlyLM()):
        events = [event async for event in client.stream(ASK)]
        assert _shape(events) == EXPECTED, type(client).__name__
        final = events[-1].response
        assert final is not None and final.tool_calls[0].arguments == {"a": 2, "b": 3}


async def test_the_default_stream_hands_a_reply_on_as_an_http_client_does(fake: FakeProvider) -> None:
    call = {"id": "call_1", "type": "function", "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'}}
    message = {"role": "assistant", "content": "Adding.", "reasoning_content": "Sum it.", "tool_calls": [call]}
    fake.responder = lambda request: Reply(
        200, json={"choices": [{"index": 0, "message": message, "finish_reason": "tool_calls"}]}
    )
    whole = imp.LMCapabilities(streaming=False)  # the server cannot stream: read whole, handed on as deltas
    async with lm("openai:m", base_url=fake.base_url, capabilities=whole, max_retries=0) as client:
        from_http = [event async for event in client.stream(ASK)]
    from_default = [event async for event in RequestOnlyLM().stream(ASK)]
    assert _shape(from_http) == _shape(from_default) == EXPECTED


WHOLE = {
    "openai": {
        "id": "chatcmpl-1",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "Adding.",
                    "reasoning_content": "Sum it.",
                    "tool_calls": [
                        {
                            "id": "call_1",
                            "type": "function",
                            "function": {"name": "add", "arguments": '{"a": 2, "b": 3}'},
                        }
                    ],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 3, "total_tokens": 12},
    },
    "openai-responses": {
        "id": "resp_1",
        "status": "completed",
        "model": "m",
        "output": [
            {"type": "reasoning", "id": "rs_1", "summary": [{"type": "summary_text", "text": "Sum it."}]},
            {
                "type": "message",
                "id": "msg_1",
                "role": "assistant",
                "content": [{"type": "output_text", "text": "Adding."}],
            },
            {
                "type": "function_call",
                "id": "fc_1",
                "call_id": "call_1",
                "name": "add",
                "arguments": '{"a": 2, "b": 3}',
            },
        ],
        "usage": {"input_tokens": 9, "output_tokens": 3},
    },
    "anthropic": {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": [
            {"type": "thinking", "thinking": "Sum it.", "signature": "sig"},
            {"type": "text", "text": "Adding."},
            {"type": "tool_use", "id": "call_1", "name": "add", "input": {"a": 2, "b": 3}},
        ],
        "stop_reason": "tool_use",
        "usage": {"input_tokens": 9, "output_tokens": 3},
    },
}


@pytest.mark.parametrize("provider", sorted(WHOLE))
async def test_a_server_that_answers_a_stream_with_the_whole_completion_is_read_as_one(
    fake: FakeProvider, provider: str
) -> None:
    """A server (or a proxy) that ignores `stream` and sends the whole JSON completion: the reply is read
    whole and handed on as deltas, once; never taken for a stream of keep-alives and sent again."""
    fake.responder = lambda request: Reply(200, json=WHOLE[provider], headers={"content-type": "application/json"})
    async with lm(f"{provider}:m", base_url=fake.base_url, api_key="k") as client:
        budget = imp.Budget(requests=5)
        with budget_scope(budget), track_usage() as usage:
            events = [event async for event in client.stream(ASK)]
    assert _shape(events) == EXPECTED
    assert len(fake.requests) == 1 and fake.requests[0].json["stream"] is True
    assert usage.total.input_tokens == 9 and budget.spent.output_tokens == 3


async def test_an_empty_json_answer_to_a_stream_with_tools_steps_down_as_an_empty_stream_does(
    fake: FakeProvider,
) -> None:
    answered = [Reply(200, body=b"", headers={"content-type": "application/json"}), Reply(200, json=WHOLE["openai"])]
    fake.add(*answered)
    tools = [{"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}}]
    async with lm("openai:m", base_url=fake.base_url, api_key="k") as client:
        events = [event async for event in client.stream(ASK, tools=tools)]
        assert not client.capabilities.stream_tool_calls
    assert _shape(events) == EXPECTED
    assert [r.json.get("stream", False) for r in fake.requests] == [True, False]
