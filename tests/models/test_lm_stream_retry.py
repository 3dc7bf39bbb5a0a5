"""A stream that fails before its first delta is retried like a request; after content, never."""

from __future__ import annotations

import json

import pytest
from fake_provider import FakeProvider, Reply
from imp_backends import both_backends
from lm_constants import FAST_RETRIES, SECRET

import imp
from imp.models import lm
from imp.models.base import StreamEvent

HI = [{"role": "user", "content": "hi"}]
SSE = {"content-type": "text/event-stream"}
OK = 'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
KEEPALIVE = ": keepalive\n\n" * 6


def _anthropic(*events: dict[str, object]) -> str:
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


START = {"type": "message_start", "message": {"id": "m", "model": "c", "usage": {"input_tokens": 3}}}
BLOCK = {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}
HEL = {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}}
STOP = [
    {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 1}},
    {"type": "message_stop"},
]
OVERLOADED = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}

# (provider, the failing reply before any content, the good reply after it)
BEFORE_CONTENT = {
    "reset after headers": ("openai", Reply(200, body=KEEPALIVE, headers=SSE, chunk_size=13, fault="reset_mid_stream")),
    "ended without a terminal event": ("openai", Reply(200, body=KEEPALIVE, headers=SSE, chunk_size=13)),
    "overloaded event first": ("anthropic", Reply(200, body=_anthropic(START, OVERLOADED), headers=SSE, chunk_size=30)),
    "anthropic cut before content": (
        "anthropic",
        Reply(200, body=_anthropic(START, BLOCK), headers=SSE, chunk_size=30),
    ),
}
GOOD = {
    "openai": lambda: Reply(200, body=OK, headers=SSE, chunk_size=20),
    "anthropic": lambda: Reply(200, body=_anthropic(START, BLOCK, HEL, *STOP), headers=SSE, chunk_size=30),
}


async def _collect(client: imp.LM) -> list[StreamEvent]:
    return [event async for event in client.stream(HI)]


@both_backends
@pytest.mark.parametrize("case", list(BEFORE_CONTENT))
async def test_a_failure_before_the_first_delta_is_retried(fake: FakeProvider, case: str) -> None:
    provider, failing = BEFORE_CONTENT[case]
    fake.add(failing, GOOD[provider]())
    async with lm(f"{provider}:m", api_key=SECRET, base_url=fake.base_url, retry_policy=FAST_RETRIES) as client:
        events = await _collect(client)
    assert len(fake.requests) == 2
    texts = [e.delta for e in events if e.kind == "text"]
    assert texts == (["ok"] if provider == "openai" else ["Hel"])  # the caller saw one clean stream
    assert events[-1].kind == "final" and events[-1].response is not None


@both_backends
async def test_failing_before_content_every_time_ends_typed_after_max_retries(fake: FakeProvider) -> None:
    fake.add(*[Reply(200, body=_anthropic(START, OVERLOADED), headers=SSE, chunk_size=30) for _ in range(3)])
    async with lm("anthropic:m", api_key=SECRET, base_url=fake.base_url, retry_policy=FAST_RETRIES) as client:
        with pytest.raises(imp.ProviderUnavailable) as info:
            await _collect(client)
    assert len(fake.requests) == 3 and info.value.attempts == 3


@both_backends
async def test_a_break_after_content_is_raised_once_saying_how_much_arrived(fake: FakeProvider) -> None:
    seen: list[str] = []
    fake.add(Reply(200, body=_anthropic(START, BLOCK, HEL), headers=SSE, chunk_size=30), GOOD["anthropic"]())
    async with lm("anthropic:m", api_key=SECRET, base_url=fake.base_url, retry_policy=FAST_RETRIES) as client:
        with pytest.raises(imp.StreamBroken, match=r"after 1 delta\(s\), 3 character\(s\)") as info:
            async for event in client.stream(HI):
                seen.append(event.delta)
    assert seen == ["Hel"] and len(fake.requests) == 1  # never restarted behind the caller's back
    assert info.value.retryable and "without message_stop" in info.value.message


@both_backends
async def test_a_reset_after_content_is_raised_once_saying_how_much_arrived(fake: FakeProvider) -> None:
    body = OK.replace('"finish_reason":"stop"', '"finish_reason":null') * 6
    fake.add(Reply(200, body=body, headers=SSE, chunk_size=30, fault="reset_mid_stream"))
    async with lm("openai:m", api_key=SECRET, base_url=fake.base_url, retry_policy=FAST_RETRIES) as client:
        with pytest.raises(imp.StreamBroken, match=r"the stream broke after \d+ delta\(s\), \d+ character") as info:
            await _collect(client)
    assert len(fake.requests) == 1 and info.value.retryable and SECRET not in str(info.value)
