"""A provider's error keeps the id of the request it failed, on every client, whole or streamed: the
id a support ticket asks for. An error status says it in its headers; an error inside a 200 (a relayed
failure, a `failed` response, an error event in a stream) is known by the 200's headers (or, streamed,
by the first event's id) all the same (docs/models.md, Errors and retries)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply

import imp

ASK = [{"role": "user", "content": "hi"}]
IDS = {"x-request-id": "req_header", "request-id": "req_header"}
SSE = {"content-type": "text/event-stream", **IDS}


def _sse(*events: tuple[str | None, dict[str, Any]]) -> str:
    return "".join((f"event: {name}\n" if name else "") + f"data: {json.dumps(data)}\n\n" for name, data in events)


OVERLOADED = {
    "openai": {"error": {"message": "server overloaded", "type": "server_error", "code": "overloaded"}},
    "openai-responses": {"type": "error", "code": "server_error", "message": "overloaded"},
    "anthropic": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
}
FIRST_DELTA = {
    "openai": [(None, {"id": "chatcmpl-9", "choices": [{"index": 0, "delta": {"content": "Hel"}}]})],
    "openai-responses": [
        ("response.created", {"type": "response.created", "response": {"id": "resp_9", "model": "m"}}),
        ("response.output_text.delta", {"type": "response.output_text.delta", "delta": "Hel"}),
    ],
    "anthropic": [
        ("message_start", {"type": "message_start", "message": {"id": "msg_9", "model": "m", "usage": {}}}),
        ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": {"type": "text"}}),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hel"}},
        ),
    ],
}
IN_A_200 = {
    "openai": {"error": {"message": "upstream overloaded", "type": "server_error", "code": 502}},
    "openai-responses": {
        "id": "resp_1",
        "status": "failed",
        "error": {"code": "server_error", "message": "overloaded"},
    },
    "anthropic": {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
}


def _lm(provider: str, fake: FakeProvider) -> imp.LM:
    return imp.lm(f"{provider}:m", base_url=fake.base_url, api_key="k", max_retries=0)


async def _stream(lm: imp.LM) -> None:
    async for _ in lm.stream(ASK):
        pass


@pytest.mark.parametrize("provider", sorted(OVERLOADED))
@pytest.mark.parametrize("when", ["before any delta", "after a delta"])
async def test_an_error_event_in_a_stream_keeps_the_request_id(fake: FakeProvider, provider: str, when: str) -> None:
    before = FIRST_DELTA[provider] if when == "after a delta" else []
    fake.add(Reply(200, body=_sse(*before, ("error", OVERLOADED[provider])), headers=SSE, chunk_size=64))
    lm = _lm(provider, fake)
    with pytest.raises(imp.ProviderUnavailable) as info:
        await _stream(lm)
    assert info.value.request_id == "req_header" and info.value.body
    await lm.aclose()


@pytest.mark.parametrize("provider", sorted(OVERLOADED))
async def test_without_a_header_a_streamed_error_keeps_the_first_events_id(fake: FakeProvider, provider: str) -> None:
    body = _sse(*FIRST_DELTA[provider], ("error", OVERLOADED[provider]))
    fake.add(Reply(200, body=body, headers={"content-type": "text/event-stream"}, chunk_size=64))
    lm = _lm(provider, fake)
    with pytest.raises(imp.ProviderUnavailable) as info:
        await _stream(lm)
    assert info.value.request_id in ("chatcmpl-9", "resp_9", "msg_9")
    await lm.aclose()


@pytest.mark.parametrize("provider", sorted(IN_A_200))
async def test_an_error_inside_a_whole_200_keeps_the_request_id(fake: FakeProvider, provider: str) -> None:
    fake.add(Reply(200, json=IN_A_200[provider], headers=IDS))
    lm = _lm(provider, fake)
    with pytest.raises(imp.ProviderUnavailable) as info:
        await lm.request(ASK)
    assert info.value.request_id == "req_header" and info.value.body
    await lm.aclose()


@pytest.mark.parametrize("provider", sorted(IN_A_200))
@pytest.mark.parametrize("how", ["request", "stream"])
async def test_an_error_status_keeps_the_request_id(fake: FakeProvider, provider: str, how: str) -> None:
    error = {"error": {"message": "slow down", "type": "rate_limit_error"}}
    fake.add(Reply(429, json=error, headers={**IDS, "retry-after": "0"}))
    lm = _lm(provider, fake)
    with pytest.raises(imp.RateLimited) as info:
        await (lm.request(ASK) if how == "request" else _stream(lm))
    assert (info.value.status, info.value.request_id, info.value.body) == (429, "req_header", error)
    await lm.aclose()
