"""Faults injected by the fake provider: throttles with each wait hint, 5xx, resets, slow answers, cut streams."""

from __future__ import annotations

import logging
import socket
import time
from contextlib import aclosing

import anyio
import pytest
from fake_provider import FakeProvider, Reply, fixture_replies
from lm_constants import FAST_RETRIES, SECRET

from imp.errors import DeadlineExceeded, LMError
from imp.models import lm
from imp.models._http import HTTPLM
from imp.models.retry import RetryPolicy
from imp.runtime.deadline import deadline

HI = [{"role": "user", "content": "hi"}]
PLAIN = "llama_cpp/plain.json"
OPENAI_429 = {"error": {"message": "Rate limit reached for gpt-4o", "type": "requests", "code": "rate_limit_exceeded"}}


def _ok() -> Reply:
    return fixture_replies(PLAIN)[0]


@pytest.mark.parametrize(
    ("reply", "at_least"),
    [
        (Reply(429, json=OPENAI_429, headers={"retry-after": "0.3"}), 0.3),
        (Reply(429, json=OPENAI_429, headers={"retry-after-ms": "250"}), 0.25),
        (
            Reply(
                429,
                json={
                    "error": {
                        "code": 429,
                        "status": "RESOURCE_EXHAUSTED",
                        "message": "quota",
                        "details": [{"retryDelay": "0.2s"}],
                    }
                },
            ),
            0.2,
        ),
        (
            Reply(
                429,
                json={
                    "error": {
                        "message": "Rate limit reached. Please try again in 300ms.",
                        "code": "rate_limit_exceeded",
                    }
                },
            ),
            0.3,
        ),
    ],
    ids=["retry-after", "retry-after-ms", "retryDelay", "try-again-in"],
)
async def test_429_wait_hints_are_honoured(
    fake: FakeProvider, openai_lm: HTTPLM, reply: Reply, at_least: float
) -> None:
    fake.add(reply, _ok())
    started = time.monotonic()
    response = await openai_lm.request(HI)
    elapsed = time.monotonic() - started
    assert response.text.startswith("Your friend")
    assert len(fake.requests) == 2
    assert elapsed >= at_least * 0.95


@pytest.mark.parametrize("status", [408, 425, 500, 502, 503, 504, 529])
async def test_retryable_statuses_then_success(fake: FakeProvider, openai_lm: HTTPLM, status: int) -> None:
    fake.add(Reply(status, json={"error": {"message": "try later"}}), _ok())
    response = await openai_lm.request(HI)
    assert response.usage.input_tokens == 15 and len(fake.requests) == 2


async def test_anthropic_529_overloaded_retried(fake: FakeProvider, anthropic_lm: HTTPLM) -> None:
    overloaded = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    fake.add(Reply(529, json=overloaded), Reply(529, json=overloaded), Reply(529, json=overloaded))
    with pytest.raises(LMError) as info:
        await anthropic_lm.request(HI)
    assert info.value.status == 529 and info.value.code == "overloaded_error" and info.value.retryable
    assert info.value.attempts == 3 and len(fake.requests) == 3


async def test_quota_429_is_not_retried(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    quota = {
        "error": {
            "message": "You exceeded your current quota",
            "type": "insufficient_quota",
            "code": "insufficient_quota",
        }
    }
    fake.add(Reply(429, json=quota), _ok())
    with pytest.raises(LMError) as info:
        await openai_lm.request(HI)
    assert info.value.status == 429 and not info.value.retryable
    assert len(fake.requests) == 1


async def test_html_502_is_an_error_with_its_text(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    page = "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center>cloudflare</body></html>"
    fake.add(*[Reply(502, body=page, headers={"content-type": "text/html"}) for _ in range(3)])
    with pytest.raises(LMError) as info:
        await openai_lm.request(HI)
    error = info.value
    assert error.status == 502 and error.retryable and error.attempts == 3
    assert "502 Bad Gateway" in error.message and error.body == page


async def test_reset_connection_is_retried(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    fake.add(Reply(fault="reset"), _ok())
    response = await openai_lm.request(HI)
    assert response.text and len(fake.requests) == 2


async def test_truncated_body_is_retried(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    fake.add(Reply(fault="truncate", json={"choices": []}), _ok())
    response = await openai_lm.request(HI)
    assert response.text and len(fake.requests) == 2


async def test_truncated_body_every_time_raises_retryable(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    fake.add(*[Reply(fault="truncate", json={"choices": []}) for _ in range(3)])
    with pytest.raises(LMError) as info:
        await openai_lm.request(HI)
    assert info.value.status is None and info.value.retryable and info.value.attempts == 3


async def test_connection_refused(fake: FakeProvider) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    client = lm("openai:m", base_url=f"http://127.0.0.1:{port}/v1", retry_policy=FAST_RETRIES)
    async with client:
        with pytest.raises(LMError) as info:
            await client.request(HI)
    assert info.value.code == "connect_error" and info.value.retryable and info.value.attempts == 3


async def test_max_retries_per_lm_and_per_call(fake: FakeProvider) -> None:
    client = lm("openai:m", base_url=fake.base_url, retry_policy=FAST_RETRIES, max_retries=0)
    async with client:
        fake.add(Reply(503, json={"error": {"message": "busy"}}), _ok())
        with pytest.raises(LMError):
            await client.request(HI)
        assert len(fake.requests) == 1
        response = await client.request(HI, max_retries=1)  # the 200 is next in line
        assert response.text
        fake.add(
            Reply(503, json={"error": {"message": "busy"}}), Reply(503, json={"error": {"message": "busy"}}), _ok()
        )
        with pytest.raises(LMError) as info:
            await client.request(HI, max_retries=1)
        assert info.value.attempts == 2


async def test_each_attempt_is_logged(fake: FakeProvider, openai_lm: HTTPLM, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="imp")
    fake.add(Reply(500, json={"error": {"message": "boom"}}), Reply(503, json={"error": {"message": "busy"}}), _ok())
    await openai_lm.request(HI)
    entries = [r.msg for r in caplog.records if isinstance(r.msg, dict)]
    retries = [entry for entry in entries if entry.get("event") == "lm_retry"]
    assert [(r["attempt"], r["status"]) for r in retries] == [(1, 500), (2, 503)]
    assert all(r["model"] == "openai:gpt-4o" for r in retries)


async def test_slow_response_past_the_deadline(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    fake.add(Reply(200, json={"choices": []}, delay=3.0))
    started = time.monotonic()
    with pytest.raises(DeadlineExceeded), deadline(0.3):
        await openai_lm.request(HI)
    assert time.monotonic() - started < 1.5


async def test_wait_hint_past_the_deadline_is_not_waited_for(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    fake.add(Reply(429, json=OPENAI_429, headers={"retry-after": "30"}), _ok())
    started = time.monotonic()
    with pytest.raises(LMError) as info, deadline(5.0):
        await openai_lm.request(HI)
    assert time.monotonic() - started < 1.0
    assert info.value.retry_after == 30.0 and info.value.attempts == 1


async def test_backoff_capped_by_the_deadline(fake: FakeProvider) -> None:
    slow = RetryPolicy(max_retries=5, initial_backoff=10.0, max_backoff=10.0, jitter=0.0)
    client = lm("openai:m", base_url=fake.base_url, retry_policy=slow)
    fake.add(Reply(500, json={"error": {"message": "x"}}), _ok())
    started = time.monotonic()
    async with client:
        with pytest.raises(LMError), deadline(2.0):
            await client.request(HI)
    assert time.monotonic() - started < 1.0


async def test_read_timeout_per_call(fake: FakeProvider) -> None:
    client = lm("openai:m", base_url=fake.base_url, retry_policy=FAST_RETRIES, max_retries=0)
    fake.add(Reply(200, json={"choices": []}, delay=2.0))
    started = time.monotonic()
    async with client:
        with pytest.raises(LMError) as info:
            await client.request(HI, timeout=0.2)
    assert info.value.code == "timeout_error" and info.value.retryable
    assert time.monotonic() - started < 1.5


# -- streams -------------------------------------------------------------------------------------


async def test_stream_anthropic_error_event_after_200(fake: FakeProvider, anthropic_lm: HTTPLM) -> None:
    body = (
        'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_1","model":"claude","usage":{"input_tokens":5}}}\n\n'
        'event: content_block_start\ndata: {"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}\n\n'
        'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"Hel"}}\n\n'
        'event: error\ndata: {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}\n\n'
    )
    fake.add(Reply(200, body=body, headers={"content-type": "text/event-stream"}, chunk_size=40))
    seen = []
    with pytest.raises(LMError) as info:
        async for event in anthropic_lm.stream(HI):
            seen.append(event)
    assert [e.delta for e in seen] == ["Hel"]
    error = info.value
    assert error.code == "overloaded_error" and error.message == "Overloaded" and error.retryable


async def test_stream_closing_without_message_stop_is_an_error(fake: FakeProvider, anthropic_lm: HTTPLM) -> None:
    replies = fixture_replies("anthropic/stream_thinking.json")
    text = replies[0].payload().decode()
    cut = text[: text.index("event: message_delta")]
    fake.add(Reply(200, body=cut, headers={"content-type": "text/event-stream"}, chunk_size=64))
    with pytest.raises(LMError, match="without message_stop") as info:
        async for _ in anthropic_lm.stream(HI):
            pass
    assert info.value.retryable


async def test_openai_stream_cut_before_finish_is_an_error(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    text = fixture_replies("llama_cpp/stream_text.sse")[0].payload().decode()
    fake.add(Reply(200, body=text[: len(text) // 2], headers={"content-type": "text/event-stream"}, chunk_size=50))
    with pytest.raises(LMError, match="ended before the completion finished"):
        async for _ in openai_lm.stream(HI):
            pass


async def test_stream_reset_mid_stream(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    text = fixture_replies("llama_cpp/stream_text.sse")[0].payload()
    fake.add(
        Reply(200, body=text, headers={"content-type": "text/event-stream"}, chunk_size=200, fault="reset_mid_stream")
    )
    with pytest.raises(LMError) as info:
        async for _ in openai_lm.stream(HI):
            pass
    assert info.value.retryable and info.value.code in ("stream_broken", "stream_truncated")


async def test_stream_retries_before_the_first_byte(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    fake.add(
        Reply(429, json=OPENAI_429, headers={"retry-after-ms": "10"}), *fixture_replies("llama_cpp/stream_text.sse")
    )
    events = [e async for e in openai_lm.stream(HI)]
    assert events[-1].kind == "final" and len(fake.requests) == 2


async def test_cancelling_the_consumer_closes_the_stream(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    text = fixture_replies("llama_cpp/stream_text.sse")[0].payload()
    fake.add(Reply(200, body=text, headers={"content-type": "text/event-stream"}, chunk_size=40, chunk_delay=0.05))
    async with aclosing(openai_lm.stream(HI)) as events:
        async for event in events:
            assert event.kind == "text"
            break
    for _ in range(60):
        if fake.aborted.is_set():
            break
        await anyio.sleep(0.05)
    assert fake.aborted.is_set()


async def test_cancel_scope_around_a_stream(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    text = fixture_replies("llama_cpp/stream_text.sse")[0].payload()
    fake.add(
        Reply(200, body=text, headers={"content-type": "text/event-stream"}, chunk_size=40, chunk_delay=0.05), _ok()
    )
    got = []
    with anyio.CancelScope() as scope:  # cancelled from inside, mid-stream: after the first text arrived
        async with aclosing(openai_lm.stream(HI)) as events:
            async for event in events:
                got.append(event)
                if event.kind == "text":
                    scope.cancel()
    assert scope.cancelled_caught and got and all(e.kind != "final" for e in got)
    response = await openai_lm.request(HI)  # the client still works afterwards
    assert response.text.startswith("Your friend")


async def test_api_key_not_required_for_local_servers(fake: FakeProvider) -> None:
    fake.add(_ok())
    async with lm("openai:x", base_url=fake.base_url) as client:
        await client.request(HI)
    assert "authorization" not in {k.lower() for k in fake.requests[0].headers}


async def test_bearer_header_sent(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    fake.add(_ok())
    await openai_lm.request(HI)
    headers = {k.lower(): v for k, v in fake.requests[0].headers.items()}
    assert headers["authorization"] == f"Bearer {SECRET}"
