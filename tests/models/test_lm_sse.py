"""The incremental SSE parser: events across any chunk boundary, comments, event names, line endings."""

from __future__ import annotations

import random

from fake_provider import fixture_replies

from imp.models._sse import SSEDecoder, SSEEvent


def _feed_all(chunks: list[bytes]) -> list[SSEEvent]:
    decoder = SSEDecoder()
    events: list[SSEEvent] = []
    for chunk in chunks:
        events.extend(decoder.feed(chunk))
    return events


def test_event_names_comments_and_multiline_data() -> None:
    stream = b': keep-alive\n\nevent: error\ndata: {"a":\ndata: 1}\n\ndata: plain\nid: 7\n\n'
    assert _feed_all([stream]) == [SSEEvent("error", '{"a":\n1}'), SSEEvent("message", "plain", "7")]


def test_every_split_point_gives_the_same_events() -> None:
    stream = b'event: message_start\r\ndata: {"x": 1}\r\n\r\n: ping\r\n\r\ndata: [DONE]\r\n\r\n'
    whole = _feed_all([stream])
    assert [e.data for e in whole] == ['{"x": 1}', "[DONE]"]
    for cut in range(1, len(stream)):
        assert _feed_all([stream[:cut], stream[cut:]]) == whole


def test_bare_cr_line_endings_and_no_space_after_colon() -> None:
    assert _feed_all([b"data:one\r\rdata:two\r", b"\r"]) == [SSEEvent("message", "one"), SSEEvent("message", "two")]


def test_an_event_without_data_is_not_dispatched_and_a_cut_tail_is_held() -> None:
    decoder = SSEDecoder()
    assert decoder.feed(b"event: ping\n\ndata: partial") == []
    assert decoder.feed(b"\n\n") == [SSEEvent("message", "partial")]  # the cut tail was held


def test_utf8_split_inside_a_character() -> None:
    data = "data: caf\u00e9 \u2603\n\n".encode()
    for cut in range(1, len(data)):
        assert _feed_all([data[:cut], data[cut:]]) == [SSEEvent("message", "caf\u00e9 \u2603")]


def test_fixture_stream_in_random_pieces() -> None:
    payload = fixture_replies("anthropic/stream_thinking.json")[0].payload()
    whole = _feed_all([payload])
    rng = random.Random(7)
    for _ in range(20):
        cuts = sorted(rng.sample(range(1, len(payload)), 30))
        pieces = [payload[a:b] for a, b in zip([0, *cuts], [*cuts, len(payload)], strict=True)]
        assert _feed_all(pieces) == whole
    assert whole[0].event == "message_start" and whole[-1].event == "message_stop"
