"""Every fault the fake provider can inject ends in one typed outcome, on asyncio and trio, for
`request` and `stream` alike: a response, or the `LMError` subclass of its kind, after exactly the
requests its kind allows (retried kinds three times, the others once)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

import anyio
import pytest
from fake_provider import FakeProvider, Reply, fixture_replies
from lm_constants import FAST_RETRIES

import imp
from imp.models import lm

HI = [{"role": "user", "content": "hi"}]
SSE = {"content-type": "text/event-stream"}
SSE_OK = 'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
SSE_CUT = 'data: {"choices":[{"index":0,"delta":{"content":"o"}}]}\n\n'
RESPONSE = "response"


def _error(status: int, **error: object) -> Callable[[], Reply]:
    return lambda: Reply(status, json={"error": error})


def _ok(streamed: bool) -> Reply:
    return (
        Reply(200, body=SSE_OK, headers=SSE, chunk_size=20) if streamed else fixture_replies("llama_cpp/plain.json")[0]
    )


# name: (the fault's reply, then per mode (request, stream): how many faults are queued before a
# good reply (None: no good reply) and the outcome expected). A stream that ends or breaks before
# any content reached the caller is retried like a request; one cut after content is raised once.)
Case = tuple[Callable[[], Reply], tuple[tuple[int, bool, str], tuple[int, bool, str]]]
RETRIED, ONCE = 3, 1
FAULTS: dict[str, Case] = {
    "reset once": (lambda: Reply(fault="reset"), ((1, True, RESPONSE), (1, True, RESPONSE))),
    "reset always": (
        lambda: Reply(fault="reset"),
        ((RETRIED, False, "ConnectionFailed"), (RETRIED, False, "ConnectionFailed")),
    ),
    "truncated body": (
        lambda: Reply(fault="truncate", json={"choices": []}),
        ((RETRIED, False, "ConnectionFailed"), (RETRIED, False, "ConnectionFailed")),
    ),
    "503 once": (_error(503, message="busy"), ((1, True, RESPONSE), (1, True, RESPONSE))),
    "502 always": (
        _error(502, message="bad gateway"),
        ((RETRIED, False, "ProviderUnavailable"), (RETRIED, False, "ProviderUnavailable")),
    ),
    "html 502": (
        lambda: Reply(502, body="<html>502</html>", headers={"content-type": "text/html"}),
        ((RETRIED, False, "ProviderUnavailable"), (RETRIED, False, "ProviderUnavailable")),
    ),
    "429 always": (
        _error(429, message="slow down", code="rate_limit_exceeded"),
        ((RETRIED, False, "RateLimited"), (RETRIED, False, "RateLimited")),
    ),
    "quota": (
        _error(429, message="quota", code="insufficient_quota"),
        ((ONCE, False, "QuotaExceeded"), (ONCE, False, "QuotaExceeded")),
    ),
    "401": (
        _error(401, message="Incorrect API key provided"),
        ((ONCE, False, "AuthenticationError"), (ONCE, False, "AuthenticationError")),
    ),
    "404": (_error(404, message="model not found"), ((ONCE, False, "NotFound"), (ONCE, False, "NotFound"))),
    "400": (_error(400, message="messages: bad role"), ((ONCE, False, "BadRequest"), (ONCE, False, "BadRequest"))),
    "overflow": (
        _error(400, message="maximum context length is 8 tokens", code="context_length_exceeded"),
        ((ONCE, False, "ContextWindowExceeded"), (ONCE, False, "ContextWindowExceeded")),
    ),
    "validation 500": (
        _error(500, message="1 validation error for R\nstop\n  Input should be a valid list [type=list_type]"),
        ((ONCE, False, "BadRequest"), (ONCE, False, "BadRequest")),
    ),
    "content filter": (
        lambda: Reply(200, json={"choices": [{"message": {"content": ""}, "finish_reason": "content_filter"}]}),
        ((ONCE, False, "ContentFiltered"), (RETRIED, False, "StreamBroken")),
    ),
    "content filter, streamed": (
        lambda: Reply(200, body=SSE_OK.replace('"stop"', '"content_filter"'), headers=SSE, chunk_size=20),
        ((ONCE, False, "InvalidResponse"), (ONCE, False, "ContentFiltered")),
    ),
    "not a completion": (
        lambda: Reply(200, json={"object": "list", "data": []}),
        ((ONCE, False, "InvalidResponse"), (RETRIED, False, "StreamBroken")),
    ),
    "cut stream": (
        lambda: Reply(200, body=SSE_CUT, headers=SSE, chunk_size=20),
        ((ONCE, False, "InvalidResponse"), (ONCE, False, "StreamBroken")),
    ),
    "stream reset mid-way": (
        lambda: Reply(200, body=SSE_OK * 4, headers=SSE, chunk_size=8, fault="reset_mid_stream"),
        ((RETRIED, False, "ConnectionFailed"), (ONCE, False, "StreamBroken")),
    ),
}


async def _one(client: imp.LM, streamed: bool) -> str:
    try:
        if streamed:
            async for _event in client.stream(HI):
                pass
        else:
            await client.request(HI)
    except imp.LMError as exc:
        return type(exc).__name__
    return RESPONSE


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_every_fault_kind_ends_typed_after_the_requests_its_kind_allows(fake: FakeProvider, backend: str) -> None:
    outcomes: Counter[str] = Counter()
    wrong: list[str] = []

    async def main() -> None:
        async with lm("openai:m", base_url=fake.base_url, retry_policy=FAST_RETRIES, timeout=5.0) as client:
            for name, (make, modes) in FAULTS.items():
                for streamed, (times, then_ok, want) in zip((False, True), modes, strict=True):
                    fake.add(*[make() for _ in range(times)])
                    if then_ok:
                        fake.add(_ok(streamed))
                    before = len(fake.requests)
                    got = await _one(client, streamed)
                    outcomes[got] += 1
                    sent = len(fake.requests) - before
                    if got != want or fake.pending or sent != times + then_ok:
                        mode = "stream" if streamed else "request"
                        wrong.append(f"{name} ({mode}): {got} after {sent} requests, expected {want}")
                    while fake.pending:  # keep one fault's leftovers out of the next
                        await _one(client, False)

    anyio.run(main, backend=backend)
    assert not wrong, "\n".join(wrong)
    assert sum(outcomes.values()) == 2 * len(FAULTS)
    assert outcomes[RESPONSE] == 4 and len(outcomes) == 12, outcomes  # a response and 11 kinds
