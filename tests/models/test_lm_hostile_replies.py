"""Hostile replies, generated: every stream and every whole body a server may send ends typed, in bounded work.

Whatever bytes arrive, in whatever chunks (nested JSON thousands deep, events and lines past the
size limit, malformed SSE, JSON of the provider's shape with wrong types inside, random bytes), each
provider's reader ends in deltas and one final response, or in an `imp.LMError` kind (or the
internal `EmptyStream` the client turns into one), never in a `KeyError`, `RecursionError` or hang.
The work is counted, not timed: the SSE decoder examines each byte it is fed once, holds at most
the limit, and the reader counts toward the limit what it keeps.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lm_constants import SECRET

import imp
from imp.models import lm
from imp.models._sse import SSEDecoder, SSELimitExceeded
from imp.models._stream import EmptyStream, StreamReader
from imp.models.base import StreamEvent

LIMIT = 2048
PROVIDERS = ("openai", "anthropic", "openai-responses")
CLIENTS = {name: lm(f"{name}:m", api_key=SECRET, max_response_bytes=LIMIT) for name in PROVIDERS}
SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner, max_size=4),
    max_leaves=20,
)


@st.composite
def shaped(draw: st.DrawFn) -> str:
    """JSON of a provider's event shape with a random value where a field should be."""
    wrong = draw(json_values)
    keys = ["choices", "delta", "content", "tool_calls", "index", "function", "type", "usage", "item", "response"]
    templates: list[Any] = [
        {"choices": wrong},
        {"choices": [{"index": 0, "delta": wrong}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [wrong]}}]},
        {"choices": [{"index": 0, "delta": {"tool_calls": [{"index": wrong, "function": wrong}]}}]},
        {"choices": [{"index": 0, "delta": {"content": wrong, "reasoning_details": wrong}}], "usage": wrong},
        {"type": "message_start", "message": wrong},
        {"type": "content_block_start", "index": wrong, "content_block": wrong},
        {"type": "content_block_delta", "index": draw(st.integers(-2, 3)), "delta": wrong},
        {"type": "message_delta", "delta": wrong, "usage": wrong},
        {"type": "response.output_item.added", "item": wrong, "output_index": wrong},
        {"type": "response.function_call_arguments.delta", "item_id": wrong, "delta": wrong},
        {"type": "response.completed", "response": wrong},
        {"type": draw(st.sampled_from(["response.output_item.done", "error", "response.failed"])), "item": wrong},
        {draw(st.sampled_from(keys)): wrong},
    ]
    return json.dumps(draw(st.sampled_from(templates)))


@st.composite
def nested(draw: st.DrawFn) -> str:
    depth = draw(st.sampled_from([50, 2000, 100_000]))
    opener, closer = draw(st.sampled_from([("[", "]"), ('{"a":', "}")]))
    return opener * depth + "1" + closer * draw(st.sampled_from([0, depth]))


payloads = st.one_of(
    shaped(),
    nested(),
    st.text(max_size=60),
    st.just("[DONE]"),
    st.builds(lambda n: "x" * n, st.sampled_from([10, LIMIT - 20, LIMIT * 3])),
    json_values.map(json.dumps),
)


@st.composite
def streams(draw: st.DrawFn) -> bytes:
    """An SSE body: events of hostile payloads, comments, odd line endings, or random bytes."""
    if draw(st.booleans()):
        return draw(st.binary(max_size=400))
    lines: list[str] = []
    for _ in range(draw(st.integers(0, 8))):
        kind = draw(st.sampled_from(["data", "event", "comment", "id", "field"]))
        if kind == "data":
            lines.append("data: " + draw(payloads))
        elif kind == "event":
            lines.append("event: " + draw(st.sampled_from(["error", "ping", "message_start", "message", "x"])))
        elif kind == "comment":
            lines.append(": keep-alive")
        elif kind == "id":
            lines.append("id: " + draw(st.text(max_size=5)))
        else:
            lines.append(draw(st.text(max_size=20)))
        if draw(st.booleans()):
            lines.append("")
    ending = draw(st.sampled_from(["\n", "\r\n", "\r"]))
    return ending.join(lines).encode("utf-8", errors="surrogatepass")


def _chunked(body: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({c % (len(body) + 1) for c in cuts})
    return [body[a:b] for a, b in zip([0, *points], [*points, len(body)], strict=True) if b > a]


async def _read(provider: str, chunks: list[bytes]) -> tuple[list[StreamEvent] | BaseException, StreamReader]:
    async def source() -> AsyncIterator[bytes]:
        for chunk in chunks:
            yield chunk

    client = CLIENTS[provider]
    reader = StreamReader(client.stream_state(step=1, headers={}), source(), provider=provider, limit=LIMIT, stall=None)
    events: list[StreamEvent] = []
    try:
        async for event in reader.deltas():
            events.append(event)
    except (imp.LMError, EmptyStream) as exc:
        return exc, reader
    return events, reader


@SETTINGS
@given(provider=st.sampled_from(PROVIDERS), body=streams(), cuts=st.lists(st.integers(0, 10_000), max_size=6))
def test_every_stream_ends_typed_in_bounded_work(provider: str, body: bytes, cuts: list[int]) -> None:
    chunks = _chunked(body, cuts)
    outcome, reader = anyio.run(_read, provider, chunks)
    if isinstance(outcome, list):
        assert outcome and outcome[-1].kind == "final" and outcome[-1].response is not None
        assert all(e.kind != "final" for e in outcome[:-1])
        assert sum(len(e.delta) for e in outcome) <= LIMIT
    assert reader.scanned <= len(body)  # each byte examined once, however it was cut
    assert reader.size <= LIMIT + max((len(c) for c in chunks), default=0)
    assert reader.events <= body.count(b"\n") + body.count(b"\r")


@SETTINGS
@given(body=st.binary(max_size=3000), cuts=st.lists(st.integers(0, 10_000), max_size=10))
def test_the_decoder_holds_at_most_the_limit_and_scans_once(body: bytes, cuts: list[int]) -> None:
    decoder = SSEDecoder(max_event_bytes=256)
    try:
        for chunk in _chunked(body, cuts):
            for event in decoder.feed(chunk):
                assert event.size <= 256
    except SSELimitExceeded:
        pass
    assert decoder.scanned <= len(body)


@SETTINGS
@given(provider=st.sampled_from(PROVIDERS), payload=payloads)
def test_every_whole_body_ends_typed(provider: str, payload: str) -> None:
    client = CLIENTS[provider]
    try:
        response = client.parse_whole(payload.encode(), {}, status=200, step=1)
    except imp.LMError as error:
        assert isinstance(error, imp.LMError) and SECRET not in str(error)
    else:
        assert isinstance(response, imp.LMResponse)


def test_nesting_far_past_the_recursion_limit_is_an_invalid_response() -> None:
    deep = ("[" * 200_000).encode()
    for provider in PROVIDERS:
        try:
            CLIENTS[provider].parse_whole(deep, {}, status=200, step=1)
        except imp.InvalidResponse as error:
            assert "nested too deeply" in str(error) or "not JSON" in str(error)
        outcome, _ = anyio.run(_read, provider, [b"data: " + deep + b"\n\n"])
        assert isinstance(outcome, imp.ResponseTooLarge)  # past the limit before it is parsed
        small = b"data: " + b"[" * 1500 + b"\n\n"
        outcome, _ = anyio.run(_read, provider, [small])
        assert isinstance(outcome, imp.LMError | EmptyStream | list)
