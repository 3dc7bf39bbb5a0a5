"""docs/examples/fastapi_stream.py under uvicorn: tokens arrive before the LM finishes; a disconnect cancels it."""

from __future__ import annotations

import importlib.util
import json
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import httpx
import pytest
from fake_provider import FakeProvider, Received, Reply, stream_reply
from fastapi_harness import AppServer, wait_until

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "fastapi_stream.py"
REPLY = "[[ ## reasoning ## ]]\nThe sky scatters blue light.\n\n[[ ## answer ## ]]\n" + "Blue light scatters most. " * 8


def load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("fastapi_stream", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["fastapi_stream"] = module
    spec.loader.exec_module(module)
    return module


RELEASE = threading.Event()
"""The LM's stream sends its first pieces, then waits for this: the test decides when it finishes."""
FIRST_PIECES = 12  # the reasoning field and the start of the answer


def _held_stream(received: Received) -> Reply:
    return stream_reply(REPLY, size=4, hold=RELEASE, hold_after=FIRST_PIECES)


@pytest.fixture
def served() -> Iterator[tuple[AppServer, FakeProvider]]:
    example = load()
    RELEASE.clear()
    provider = FakeProvider(responder=_held_stream).start()
    settings = example.StreamSettings(model="openai:fake", base_url=provider.base_url, api_key="sk-test")
    server = AppServer(example.create_app(settings)).start()
    yield server, provider
    RELEASE.set()
    server.stop()
    provider.stop()


def events(response: httpx.Response) -> Iterator[tuple[str, object]]:
    kind = ""
    for line in response.iter_lines():
        if line.startswith("event:"):
            kind = line.split(":", 1)[1].strip()
        elif line.startswith("data:"):
            yield kind, json.loads(line.split(":", 1)[1])


def test_tokens_arrive_before_the_lm_finishes_then_the_result(served: tuple[AppServer, FakeProvider]) -> None:
    server, provider = served
    seen: list[tuple[str, object]] = []
    with (
        httpx.Client(base_url=server.url, timeout=10) as client,
        client.stream("POST", "/answer/stream", json={"question": "Why is the sky blue?"}) as response,
    ):
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for kind, data in events(response):
            seen.append((kind, data))
            if kind == "token" and not RELEASE.is_set():
                # a token reached the client while the LM's stream is still held open: not finished
                assert not provider.finished.is_set() and len(provider.in_flight) == 1
                RELEASE.set()
    tokens = [data for kind, data in seen if kind == "token"]
    assert tokens and RELEASE.is_set(), seen
    answer = "".join(d["delta"] for d in tokens if isinstance(d, dict) and d["field"] == "answer")
    kind, result = seen[-1]
    assert kind == "result" and isinstance(result, dict)
    assert answer == result["answer"] == ("Blue light scatters most. " * 8).strip()
    assert result["reasoning"] == "The sky scatters blue light."
    assert provider.finished.is_set() and provider.requests[0].json["stream"] is True


def test_a_client_that_goes_away_cancels_the_lm_request(served: tuple[AppServer, FakeProvider]) -> None:
    server, provider = served
    with (
        httpx.Client(base_url=server.url, timeout=10) as client,
        client.stream("POST", "/answer/stream", json={"question": "Why?"}) as response,
    ):
        for kind, _ in events(response):
            if kind == "token":
                break  # leaving the block closes the connection
    assert wait_until(provider.aborted.is_set, timeout=5)
    assert not provider.finished.is_set()


def test_a_deadline_ends_the_stream_with_an_error_event() -> None:
    example = load()
    never = threading.Event()  # the LM's stream starts, then never finishes: only the deadline ends it
    provider = FakeProvider(responder=lambda received: stream_reply(REPLY, size=2, hold=never, hold_after=20)).start()
    settings = example.StreamSettings(
        model="openai:fake", base_url=provider.base_url, api_key="sk-test", request_seconds=3.0
    )
    server = AppServer(example.create_app(settings)).start()
    try:
        with (
            httpx.Client(base_url=server.url, timeout=10) as client,
            client.stream("POST", "/answer/stream", json={"question": "Why?"}) as response,
        ):
            seen = list(events(response))
        assert seen[-1] == ("error", {"http_status": 504, "detail": "deadline exceeded"})
        assert any(kind == "token" for kind, _ in seen)
        assert wait_until(provider.aborted.is_set, timeout=5)
        assert not provider.finished.is_set()
    finally:
        never.set()
        server.stop()
        provider.stop()


@pytest.mark.parametrize(
    ("reply", "status", "detail", "logged"),
    [
        ("no field markers at all, just prose", 502, "AdapterParseError", "fastapi_stream.failed AdapterParseError"),
        (None, 500, "internal error", "fastapi_stream.crashed"),
    ],
)
def test_any_failure_ends_the_stream_with_an_error_event_and_a_log_line(
    reply: str | None, status: int, detail: str, logged: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A reply that cannot be parsed, or a bug, is an `error` event and a log line, never a 200 with nothing."""
    example = load()
    provider = FakeProvider(responder=lambda received: stream_reply(reply or REPLY, size=8)).start()
    settings = example.StreamSettings(model="openai:fake", base_url=provider.base_url, api_key="sk-test")

    def broken_lm(config: object) -> object:
        lm = example.make_lm(config)
        if reply is None:  # a bug in the service: the program cannot be called at all

            def boom(*args: object, **kwargs: object) -> object:
                raise RuntimeError("a bug")

            lm.request = boom  # type: ignore[method-assign]
            lm.stream = boom  # type: ignore[method-assign]
        return lm

    server = AppServer(example.create_app(settings, lm_factory=broken_lm)).start()
    try:
        with (
            caplog.at_level("WARNING", logger="fastapi_stream"),
            httpx.Client(base_url=server.url, timeout=10) as client,
            client.stream("POST", "/answer/stream", json={"question": "Why?"}) as response,
        ):
            assert response.status_code == 200
            seen = list(events(response))
        assert seen and seen[-1][:2] == ("error", {"http_status": status, "detail": detail}), seen
        assert wait_until(lambda: any(logged in r.getMessage() for r in caplog.records), timeout=5), [
            r.getMessage() for r in caplog.records
        ]
    finally:
        server.stop()
        provider.stop()
