"""A stream the server cannot give is stepped down from as a refused option is, and a reply that will not
change is never asked for again.

llama-cpp-python under `chatml-function-calling` (the format docs/models.md recommends) cannot stream
a tool call the model chose itself: the streamed request with tools ends with no event at all. The
LM then reads such requests whole (`capabilities.stream_tool_calls` False, one `lm_step_down` line)
and hands the reply on as deltas; the same request body is never sent twice.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply
from imp_backends import both_backends
from llama_cpp_stand_in import SSE, ChatmlFunctionCalling, add_first
from lm_constants import FAST_RETRIES, SECRET

import imp
from imp.models import lm
from imp.models.base import StreamEvent

ASK = [{"role": "user", "content": "What is 2 + 3?"}]
ADD = {
    "type": "function",
    "function": {
        "name": "add",
        "description": "Add two integers.",
        "parameters": {"type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}}},
    },
}
TEXT = 'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'


def _steps(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.msg for r in caplog.records if isinstance(r.msg, dict) and r.msg.get("event") == "lm_step_down"]


async def _collect(client: imp.LM, **options: Any) -> list[StreamEvent]:
    return [event async for event in client.stream(ASK, **options)]


@both_backends
@pytest.mark.parametrize("ending", ["no byte", "keep-alives only"])
async def test_a_streamed_request_with_tools_that_ends_before_any_event_is_read_whole(
    fake: FakeProvider, ending: str
) -> None:
    server = ChatmlFunctionCalling(add_first)
    if ending == "keep-alives only":  # a server that pinged while the model chose (sse-starlette's `: ping`)
        fake.add(Reply(200, body=": ping\n\n", headers=SSE, chunk_size=64))
    fake.responder = server
    async with lm("openai:smollm2", base_url=fake.base_url, retry_policy=FAST_RETRIES) as client:
        events = await _collect(client, tools=[ADD], tool_choice="auto")
        assert not client.capabilities.stream_tool_calls and client.capabilities.streaming
        calls = [e for e in events if e.kind == "tool_call"]
        assert [(e.tool_name, json.loads(e.delta)) for e in calls] == [("add", {"a": 2, "b": 3})]
        final = events[-1].response
        assert final is not None and final.tool_calls[0].name == "add" and final.finish_reason == "tool_calls"
        bodies = [r.json for r in fake.requests]
        assert [b.get("stream", False) for b in bodies] == [True, False]
        # From then on a request with tools is read whole at once; one without is still streamed.
        await _collect(client, tools=[ADD], tool_choice="auto")
        texts = await _collect(client)
    assert [r.json.get("stream", False) for r in fake.requests[2:]] == [False, True]
    assert "".join(e.delta for e in texts if e.kind == "text") == server.answer
    assert bodies[0] != bodies[1]  # the step down sent another request, not the same one again


async def test_the_step_down_is_logged_once(fake: FakeProvider, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="imp")
    fake.responder = ChatmlFunctionCalling(add_first)
    async with lm("openai:smollm2", base_url=fake.base_url) as client:
        for _ in range(2):
            await _collect(client, tools=[ADD], tool_choice="auto")
    (step,) = _steps(caplog)
    assert step["option"] == "stream" and step["sent"] == "streamed with tools"
    assert step["now"] == "read whole when tools are sent" and step["status"] == 200
    retries = [r.msg for r in caplog.records if isinstance(r.msg, dict) and r.msg.get("event") == "lm_retry"]
    assert not retries


async def test_declared_capabilities_skip_the_refused_stream(fake: FakeProvider) -> None:
    server = ChatmlFunctionCalling(add_first)
    fake.responder = server
    declared = imp.LMCapabilities(stream_tool_calls=False)
    async with lm("openai:smollm2", base_url=fake.base_url, capabilities=declared) as client:
        events = await _collect(client, tools=[ADD], tool_choice="auto")
    assert events[-1].response is not None and events[-1].response.tool_calls
    assert [b.get("stream", False) for b in server.sent] == [False]


REFUSALS = {
    # OpenAI's first o1 models refused `stream` itself (a 400 naming the parameter).
    "stream refused": (
        Reply(
            400,
            json={
                "error": {
                    "message": "Unsupported value: 'stream' does not support true with this model. "
                    "Only the default (false) value is supported.",
                    "type": "invalid_request_error",
                    "param": "stream",
                    "code": "unsupported_value",
                }
            },
        ),
        False,
    ),
    # A server that says what llama-cpp-python only logs.
    "stream with tools refused": (
        Reply(500, json={"error": {"message": "Automatic streaming tool choice is not supported"}}),
        True,
    ),
}


@both_backends
@pytest.mark.parametrize("case", list(REFUSALS))
async def test_a_refused_stream_is_stepped_down_from(fake: FakeProvider, case: str) -> None:
    refusal, with_tools = REFUSALS[case]
    fake.add(refusal, Reply(200, json={"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]}))
    options: dict[str, Any] = {"tools": [ADD], "tool_choice": "auto"} if with_tools else {}
    async with lm("openai:o1", base_url=fake.base_url, retry_policy=FAST_RETRIES) as client:
        events = await _collect(client, **options)
        capabilities = client.capabilities
    assert [e.kind for e in events] == ["text", "final"] and events[0].delta == "ok"
    assert [r.json.get("stream", False) for r in fake.requests] == [True, False]
    assert capabilities.stream_tool_calls is not with_tools and capabilities.streaming is with_tools


@both_backends
async def test_an_empty_200_stream_is_not_sent_again(fake: FakeProvider) -> None:
    fake.add(Reply(200, body=b"", headers=SSE, chunk_size=64), Reply(200, body=TEXT, headers=SSE, chunk_size=64))
    async with lm("openai:m", api_key=SECRET, base_url=fake.base_url, retry_policy=FAST_RETRIES) as client:
        with pytest.raises(imp.InvalidResponse) as info:
            await _collect(client)
    assert len(fake.requests) == 1 and info.value.attempts == 1 and info.value.status == 200
    assert "empty" in str(info.value) and not info.value.retryable


@both_backends
@pytest.mark.parametrize("body", [b"", b"   ", b"<html>OK</html>"])
async def test_a_200_whose_body_is_no_completion_is_not_sent_again(fake: FakeProvider, body: bytes) -> None:
    fake.add(Reply(200, body=body, headers={"content-type": "application/json"}), Reply(200, json={}))
    async with lm("openai:m", api_key=SECRET, base_url=fake.base_url, retry_policy=FAST_RETRIES) as client:
        with pytest.raises(imp.InvalidResponse) as info:
            await client.request(ASK)
    assert len(fake.requests) == 1 and info.value.attempts == 1


def _react(client: imp.LM) -> imp.ReAct:
    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    return imp.react("question -> answer: int", [add], lm=client, max_iters=3)


async def test_imp_stream_of_react_succeeds_on_the_recommended_server(fake: FakeProvider) -> None:
    server = ChatmlFunctionCalling(add_first)
    fake.responder = server
    async with lm("openai:smollm2", base_url=fake.base_url, retry_policy=FAST_RETRIES) as client:
        parts = [part async for part in imp.stream(_react(client), {"question": "What is 2 + 3?"})]
    final = parts[-1].prediction
    assert final is not None and final.answer == 5 and final.complete
    assert [p.tool_name for p in parts if p.kind == "tool_call"] == ["add", "submit"]
    assert not server.identical_requests(), server.identical_requests()
    assert len(server.sent) <= 4


@pytest.mark.parametrize("program", ["predict", "chain_of_thought", "react_trajectory"])
async def test_every_program_streams_on_the_recommended_server(fake: FakeProvider, program: str) -> None:
    server = ChatmlFunctionCalling(add_first, answer="[[ ## reasoning ## ]]\nAdd.\n\n[[ ## answer ## ]]\n5")
    fake.responder = server

    def add(a: int, b: int) -> int:
        """Add two integers."""
        return a + b

    async with lm("openai:smollm2", base_url=fake.base_url, retry_policy=FAST_RETRIES) as client:
        built: imp.Program
        if program == "predict":
            built = imp.predict("question -> answer: int", lm=client)
        elif program == "chain_of_thought":
            built = imp.chain_of_thought("question -> answer: int", lm=client)
        else:
            built = imp.react_trajectory("question -> answer: int", [add], lm=client, max_iters=3)
        parts = [part async for part in imp.stream(built, {"question": "What is 2 + 3?"})]
    final = parts[-1].prediction
    assert final is not None and final.answer == 5
    assert not server.identical_requests()
