"""`openai-responses:` streams: semantic events into imp's stream events, the retry before content, errors."""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from fake_provider import (
    FakeProvider,
    Reply,
    function_call_item,
    load_fixture,
    message_item,
    reasoning_item,
    responses_body,
    responses_events,
    responses_reply,
    sse_text,
)
from imp_backends import both_backends
from lm_constants import FAST_RETRIES, SECRET

import imp
from imp.errors import (
    ContentFiltered,
    ContextWindowExceeded,
    LMError,
    ProviderUnavailable,
    QuotaExceeded,
    StreamBroken,
)
from imp.models import lm
from imp.models.base import LMResponse, StreamEvent

HI = [{"role": "user", "content": "hi"}]
USAGE = {
    "input_tokens": 300,
    "input_tokens_details": {"cached_tokens": 256},
    "output_tokens": 40,
    "output_tokens_details": {"reasoning_tokens": 24},
    "total_tokens": 340,
}

BODIES: dict[str, dict[str, Any]] = {
    "text": responses_body(message_item("Hello, world. How are you today?"), usage=USAGE),
    "call": responses_body(function_call_item("look", {"at": "the box"}, call_id="call_a"), usage=USAGE),
    "two calls": responses_body(
        reasoning_item("I need both.", item_id="rs_1", encrypted="enc-1"),
        function_call_item("look", {"at": "box"}, call_id="call_a"),
        function_call_item("open", {"lid": True}, call_id="call_b"),
        usage=USAGE,
    ),
    "reasoning, text and call": responses_body(
        reasoning_item("First part.", item_id="rs_1", encrypted="enc-1"),
        message_item("Looking now.", item_id="msg_1"),
        function_call_item("look", {"at": "box"}, call_id="call_a"),
        usage=USAGE,
    ),
    "two summary parts": responses_body(
        {
            "type": "reasoning",
            "id": "rs_2",
            "encrypted_content": "enc-2",
            "summary": [{"type": "summary_text", "text": "One."}, {"type": "summary_text", "text": "Two."}],
        },
        message_item("Done."),
        usage=USAGE,
    ),
    "structured": responses_body(message_item('{"answer": "Paris"}'), usage=USAGE),
    "cut": responses_body(message_item("Once upon"), usage=USAGE, status="incomplete", incomplete="max_output_tokens"),
}


def _client(fake: FakeProvider, **options: Any) -> Any:
    return lm(
        "openai-responses:gpt-5.4-mini", api_key=SECRET, base_url=fake.base_url, retry_policy=FAST_RETRIES, **options
    )


def _same(response: LMResponse) -> LMResponse:
    return replace(response, raw=None)


async def _collect(client: Any, messages: Any = HI, **options: Any) -> list[StreamEvent]:
    return [event async for event in client.stream(messages, **options)]


@pytest.mark.parametrize("name", list(BODIES))
async def test_a_streamed_response_is_the_same_response_as_a_whole_one(fake: FakeProvider, name: str) -> None:
    body = BODIES[name]
    fake.add(responses_reply(body), responses_reply(body, stream=True, chunk_size=17))
    async with _client(fake) as client:
        whole = await client.request(HI)
        events = await _collect(client)
    assert fake.requests[1].json["stream"] is True and "stream" not in fake.requests[0].json
    final = events[-1]
    assert final.kind == "final" and final.response is not None
    assert _same(final.response) == _same(whole)
    deltas = events[:-1]
    assert "".join(e.delta for e in deltas if e.kind == "text") == whole.text
    assert "".join(e.delta for e in deltas if e.kind == "reasoning") == (whole.reasoning or "")
    for index, call in enumerate(whole.tool_calls):
        mine = [e for e in deltas if e.kind == "tool_call" and e.index == index]
        assert mine[0].tool_name == call.name and {e.tool_call_id for e in mine} == {call.id}
        assert json.loads("".join(e.delta for e in mine)) == dict(call.arguments)
    assert whole.usage.cached_tokens == 256 and whole.usage.reasoning_tokens == 24
    assert whole.request_id == "req_resp_1"


@both_backends
async def test_the_recorded_reasoning_stream_and_its_replay(fake: FakeProvider) -> None:
    fixture = "openai_responses/stream_reasoning_tool_call_then_text.json"
    first_req, second_req = [i["request"]["body"] for i in load_fixture(fixture)["interactions"]]
    fake.add_fixture(fixture)
    options = {
        "tools": first_req["tools"],
        "tool_choice": "auto",
        "reasoning_effort": "medium",
        "reasoning_summary": "auto",
    }
    messages: list[Any] = [{"role": "system", "content": first_req["instructions"]}, *first_req["input"]]
    async with _client(fake) as client:
        events = await _collect(client, messages, **options)
        assert fake.requests[0].json == first_req
        kinds = [e.kind for e in events]
        assert kinds.index("reasoning") < kinds.index("tool_call") < kinds.index("final")
        start = next(e for e in events if e.kind == "tool_call")
        assert (start.tool_name, start.tool_call_id, start.index) == ("get_weather", "call_Wq4zX0m2nYbT7d1cKp9sLr3e", 0)
        first = events[-1].response
        assert first is not None and first.reasoning_data is not None
        assert "".join(e.delta for e in events if e.kind == "reasoning") == first.reasoning
        (call,) = first.tool_calls
        messages += [
            {"role": "assistant", "content": "", "tool_calls": [call], "reasoning_data": first.reasoning_data},
            {"role": "tool", "tool_call_id": call.id, "content": "18 C and sunny"},
        ]
        events = await _collect(client, messages, **options)
    sent = fake.requests[1].json
    assert [i.get("type", i.get("role")) for i in sent["input"]] == [
        i.get("type", i.get("role")) for i in second_req["input"]
    ]
    assert sent["input"][1] == second_req["input"][1]  # the reasoning item, encrypted content and all
    assert sent["input"][2]["id"] == second_req["input"][2]["id"]
    final = events[-1].response
    assert final is not None and final.text == "It is 18 C and sunny in Paris."
    assert "".join(e.delta for e in events if e.kind == "text") == final.text


async def test_cached_tokens_in_a_streamed_usage(fake: FakeProvider) -> None:
    fake.add_fixture("openai_responses/stream_text_cached_tokens.json")
    async with _client(fake) as client:
        events = await _collect(client)
    final = events[-1].response
    assert final is not None and final.text == "Hello there, how can I help?"
    assert (final.usage.input_tokens, final.usage.cached_tokens, final.usage.output_tokens) == (2048, 1920, 9)


@both_backends
async def test_a_stream_that_fails_before_content_is_retried(fake: FakeProvider) -> None:
    fake.add_fixture("openai_responses/stream_failed.json")
    fake.add(responses_reply(BODIES["text"], stream=True))
    async with _client(fake) as client:
        events = await _collect(client)
    assert len(fake.requests) == 2
    assert events[-1].response is not None and events[-1].response.text == "Hello, world. How are you today?"


async def test_a_stream_that_keeps_failing_raises_the_providers_error(fake: FakeProvider) -> None:
    for _ in range(3):
        fake.add_fixture("openai_responses/stream_failed.json")
    async with _client(fake) as client:
        with pytest.raises(ProviderUnavailable, match="invalid content") as caught:
            await _collect(client)
    assert caught.value.code == "server_error" and caught.value.status is None and len(fake.requests) == 3
    assert caught.value.body["error"]["code"] == "server_error"


async def test_an_error_event_after_content_is_raised_never_restarted(fake: FakeProvider) -> None:
    fake.add_fixture("openai_responses/stream_error_event_mid_stream.json")
    seen: list[StreamEvent] = []
    async with _client(fake) as client:
        with pytest.raises(LMError) as caught:
            async for event in client.stream(HI):
                seen.append(event)
    assert isinstance(caught.value, ProviderUnavailable) and caught.value.code == "rate_limit_exceeded"
    assert caught.value.retry_after == pytest.approx(0.193)
    assert "".join(e.delta for e in seen) == "Hello there," and len(fake.requests) == 1


async def test_a_stream_cut_before_its_terminal_event_is_broken(fake: FakeProvider) -> None:
    events = responses_events(BODIES["text"])[:-1]  # no response.completed
    fake.add(Reply(body=sse_text(events), headers={"content-type": "text/event-stream"}, chunk_size=31))
    async with _client(fake) as client:
        with pytest.raises(StreamBroken, match=r"ended before response.completed, after \d+ delta") as caught:
            await _collect(client)
    assert caught.value.code == "stream_truncated" and caught.value.retryable
    # cut before any content: a failed request, retried
    shell = responses_events(BODIES["text"])[:2]
    fake.add(Reply(body=sse_text(shell), headers={"content-type": "text/event-stream"}))
    fake.add(responses_reply(BODIES["text"], stream=True))
    async with _client(fake) as client:
        done = await _collect(client)
    assert done[-1].response is not None and done[-1].response.text.startswith("Hello")


async def test_a_filtered_stream_is_refused(fake: FakeProvider) -> None:
    body = responses_body(message_item("partial"), status="incomplete", incomplete="content_filter")
    fake.add(responses_reply(body, stream=True))
    async with _client(fake) as client:
        with pytest.raises(ContentFiltered):
            await _collect(client)


async def test_a_program_streams_its_fields_through_imp_stream(fake: FakeProvider) -> None:
    reply = "[[ ## answer ## ]]\nParis, of course.\n\n[[ ## completed ## ]]"
    body = responses_body(reasoning_item("Easy.", item_id="rs_1", encrypted="e"), message_item(reply))
    fake.add(responses_reply(body, stream=True, chunk_size=11))
    async with _client(fake) as client:
        program = imp.predict("question -> answer", lm=client)
        parts = [p async for p in imp.stream(program, question="capital of France?")]
    fields = "".join(p.delta for p in parts if p.kind == "field")
    assert fields == "Paris, of course."
    assert "".join(p.delta for p in parts if p.kind == "reasoning") == "Easy."
    assert parts[-1].kind == "final" and parts[-1].prediction.answer == "Paris, of course."


FAILED_CODES: list[tuple[str, type[LMError], int]] = [
    ("server_error", ProviderUnavailable, 3),
    ("rate_limit_exceeded", ProviderUnavailable, 3),
    ("context_length_exceeded", ContextWindowExceeded, 1),
    ("insufficient_quota", QuotaExceeded, 1),
]


@pytest.mark.parametrize(("code", "kind", "sent"), FAILED_CODES)
async def test_a_failed_responses_error_is_classified_by_its_code(
    fake: FakeProvider, code: str, kind: type[LMError], sent: int
) -> None:
    shell = {**responses_body(), "status": "in_progress", "output": []}
    failed = {**shell, "status": "failed", "error": {"code": code, "message": f"it failed: {code}"}}
    events = [{"type": "response.created", "response": shell}, {"type": "response.failed", "response": failed}]
    for _ in range(3):
        fake.add(Reply(body=sse_text(events), headers={"content-type": "text/event-stream"}, chunk_size=40))
    async with _client(fake) as client:
        with pytest.raises(LMError) as caught:
            await _collect(client)
    assert type(caught.value) is kind and caught.value.code == code and caught.value.status is None
    assert len(fake.requests) == sent  # what may pass on a new request is retried, the rest raised at once
    assert caught.value.body["response"]["status"] == "failed"
