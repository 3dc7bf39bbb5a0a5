"""A reply's size is bounded, streamed or not, and a stream of keep-alives alone is no progress.

`max_response_bytes` (8 MiB by default) bounds a whole body, a stream's text, reasoning and tool
arguments (plus the whole of each event that carries none), and any one event; past it the reply
is an `imp.ResponseTooLarge`, never sent again. A stream that sends only comments (or Anthropic's
`ping` events) for longer than the read timeout fails as a timeout does.
"""

from __future__ import annotations

import json

import pytest
from fake_provider import FakeProvider, Reply, fixture_replies
from imp_backends import both_backends
from lm_constants import FAST_RETRIES, SECRET

import imp
from imp.models import lm
from imp.models._http import DEFAULT_MAX_RESPONSE_BYTES

HI = [{"role": "user", "content": "hi"}]
SSE = {"content-type": "text/event-stream"}
LIMIT = 4096


def _completion(text: str) -> dict[str, object]:
    return {"choices": [{"index": 0, "message": {"role": "assistant", "content": text}, "finish_reason": "stop"}]}


def _chunk(text: str, finish: str | None = None) -> str:
    chunk = {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish}]}
    return f"data: {json.dumps(chunk)}\n\n"


def test_the_default_is_sized_for_real_replies() -> None:
    assert lm("openai:m", api_key=SECRET).max_response_bytes == DEFAULT_MAX_RESPONSE_BYTES == 8 * 1024 * 1024
    assert lm("openai:m", api_key=SECRET, max_response_bytes=None).max_response_bytes is None


@pytest.mark.parametrize("value", [0, -1, 1.5, "1MB", True])
def test_a_limit_that_is_no_size_is_refused_at_construction(value: object) -> None:
    with pytest.raises(ValueError, match="max_response_bytes"):
        lm("openai:m", api_key=SECRET, max_response_bytes=value)  # type: ignore[arg-type]


@both_backends
@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
async def test_a_whole_body_over_the_limit_is_refused_once(fake: FakeProvider, declared: bool) -> None:
    body = json.dumps(_completion("x" * (LIMIT * 2)))
    reply = Reply(200, body=body, headers={"content-type": "application/json"})
    if not declared:
        reply.chunk_size = 512  # no content-length: the limit is met while reading
    fake.add(reply, Reply(200, json=_completion("ok")))
    async with lm("openai:m", api_key=SECRET, base_url=fake.base_url, max_response_bytes=LIMIT) as client:
        with pytest.raises(imp.ResponseTooLarge) as info:
            await client.request(HI)
    error = info.value
    assert isinstance(error, imp.InvalidResponse) and not error.retryable and error.attempts == 1
    assert error.limit == LIMIT and "max_response_bytes" in str(error) and len(fake.requests) == 1


@both_backends
async def test_ordinary_replies_pass_under_the_default(fake: FakeProvider) -> None:
    fake.add(*fixture_replies("llama_cpp/plain.json"), *fixture_replies("llama_cpp/stream_text.sse"))
    async with lm("openai:m", api_key=SECRET, base_url=fake.base_url) as client:
        assert (await client.request(HI)).text
        events = [e async for e in client.stream(HI)]
    assert events[-1].kind == "final" and events[-1].response is not None and events[-1].response.text


@both_backends
async def test_a_stream_whose_content_passes_the_limit_is_cut_there(fake: FakeProvider) -> None:
    body = "".join(_chunk("y" * 100) for _ in range(100)) + _chunk("", "stop") + "data: [DONE]\n\n"
    fake.add(Reply(200, body=body, headers=SSE, chunk_size=700))
    seen = 0
    async with lm("openai:m", api_key=SECRET, base_url=fake.base_url, max_response_bytes=LIMIT) as client:
        with pytest.raises(imp.ResponseTooLarge) as info:
            async for event in client.stream(HI):
                seen += len(event.delta)
    assert LIMIT - 100 <= seen <= LIMIT and info.value.limit == LIMIT and len(fake.requests) == 1


@both_backends
async def test_the_envelope_of_a_token_at_a_time_stream_is_not_counted(fake: FakeProvider) -> None:
    # 400 one-character deltas in ~90-byte chunks: 36 KB on the wire, 400 characters of reply.
    body = "".join(_chunk("z") for _ in range(400)) + _chunk("", "stop") + "data: [DONE]\n\n"
    assert len(body) > LIMIT * 8
    fake.add(Reply(200, body=body, headers=SSE, chunk_size=1000))
    async with lm("openai:m", api_key=SECRET, base_url=fake.base_url, max_response_bytes=LIMIT) as client:
        events = [e async for e in client.stream(HI)]
    assert events[-1].response is not None and events[-1].response.text == "z" * 400


@both_backends
@pytest.mark.parametrize("shape", ["one long line", "one event of many lines", "many events without content"])
async def test_a_stream_that_grows_without_content_is_cut_at_the_limit(fake: FakeProvider, shape: str) -> None:
    if shape == "one long line":
        body = "data: " + "a" * (LIMIT * 4)
    elif shape == "one event of many lines":
        body = "data: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\n" * (LIMIT // 8)
    else:
        body = 'data: {"choices": []}\n\n' * (LIMIT // 8)
    fake.add(Reply(200, body=body, headers=SSE, chunk_size=256), Reply(200, body=_chunk("ok", "stop"), headers=SSE))
    async with lm("openai:m", api_key=SECRET, base_url=fake.base_url, max_response_bytes=LIMIT) as client:
        with pytest.raises(imp.ResponseTooLarge):
            async for _ in client.stream(HI):
                pass
    assert len(fake.requests) == 1


@both_backends
@pytest.mark.parametrize("provider", ["openai", "anthropic"])
async def test_keep_alives_alone_are_no_progress(fake: FakeProvider, provider: str) -> None:
    # Keep-alives every 50 ms for 4 s against a read timeout of 1 s: before any content the stream is a
    # failed request (retried, then a ConnectionFailed timeout), never a wait that the keep-alives renew.
    keepalive = ": keep-alive\n\n" if provider == "openai" else 'event: ping\ndata: {"type": "ping"}\n\n'
    stall = [Reply(200, body=keepalive * 80, headers=SSE, chunk_size=len(keepalive), chunk_delay=0.05)] * 2
    fake.add(*stall)
    async with lm(
        f"{provider}:m", api_key=SECRET, base_url=fake.base_url, timeout=1.0, retry_policy=FAST_RETRIES, max_retries=1
    ) as client:
        with pytest.raises(imp.ConnectionFailed) as info:
            async for _ in client.stream(HI):
                pass
    assert info.value.code == "timeout_error" and "keep-alive" in str(info.value)
    assert info.value.attempts == 2 and len(fake.requests) == 2


@both_backends
async def test_keep_alives_after_content_break_the_stream(fake: FakeProvider) -> None:
    body = _chunk("Hel") + ": keep-alive\n\n" * 80
    fake.add(Reply(200, body=body, headers=SSE, chunk_size=15, chunk_delay=0.05))
    got: list[str] = []
    async with lm("openai:m", api_key=SECRET, base_url=fake.base_url, timeout=1.0, retry_policy=FAST_RETRIES) as client:
        with pytest.raises(imp.StreamBroken) as info:
            async for event in client.stream(HI):
                got.append(event.delta)
    assert got == ["Hel"] and "1 delta(s)" in str(info.value) and len(fake.requests) == 1
