"""A reply read whole and then streamed is handed on one way, whatever the LM: its reasoning, its text,
each tool call with its arguments as one delta, then `final` (docs/models.md, Streaming). An HTTP client
does it for a request its server cannot stream; `LM.stream`'s default does it for an LM with only
`request` (`imp.ScriptedLM`, `imp.StaticLM`, a class of your own)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from fake_provider import FakeProvider, Reply

import imp
from imp.models import lm
from imp.models.base import StreamEvent

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
