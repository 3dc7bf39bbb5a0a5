"""A credential is a secret however it is given: as `api_key=`, a header (Azure's `api-key`, a bearer
`Authorization`, `x-api-key`), the userinfo or a `?key=` of `base_url`, a secret-named `extra_body` field,
or the same in one call's `extra_headers` / `extra_body`. Echoed back by a server, it shows nowhere:
not in the error, the events, the log lines, the spans, the trace page or the saved file.

And a value too short to be a secret (a local server's `"1"`, `"n"`, `"none"`) rewrites no text.
"""

from __future__ import annotations

import json
import logging
import traceback
from pathlib import Path
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply
from lm_constants import FAST_RETRIES

import imp
from imp.models import lm

KEY = "azure-4f9c2e7d1b8a6035e2c9f1d7a4b6c8e0"
HI = [{"role": "user", "content": "hi"}]


def _ways(base_url: str) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """How the key is given: (client settings, per-call options)."""
    host = base_url.removeprefix("http://")
    return {
        "api_key": ({"api_key": KEY}, {}),
        "azure api-key header": ({"headers": {"api-key": KEY}}, {}),
        "bearer header": ({"headers": {"Authorization": f"Bearer {KEY}"}}, {}),
        "x-api-key default header": ({"extra_headers": {"x-api-key": KEY}}, {}),
        "url userinfo": ({"base_url": f"http://user:{KEY}@{host}"}, {}),
        "url query key": ({"base_url": f"{base_url}?key={KEY}"}, {}),
        "extra_body field": ({"extra_body": {"provider": {"api_key": KEY}}}, {}),
        "a call's extra_headers": ({}, {"extra_headers": {"Ocp-Apim-Subscription-Key": KEY}}),
        "a call's extra_body": ({}, {"extra_body": {"credentials": {"token": KEY}}}),
    }


WAYS = list(_ways("http://127.0.0.1:1/v1"))


def _echo() -> Reply:
    message = f"Incorrect API key provided: {KEY}. Send it as api-key: {KEY} or ?key={KEY}"
    return Reply(401, json={"error": {"message": message, "type": "invalid_request_error", "echo": {"given": KEY}}})


@pytest.mark.parametrize("way", WAYS)
async def test_a_key_given_any_way_shows_nowhere(
    fake: FakeProvider, way: str, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    settings, options = _ways(fake.base_url)[way]
    settings = {"base_url": fake.base_url, "api_key": "sk-placeholder-000", **settings}
    fake.add(Reply(500, json={"error": {"message": f"upstream said {KEY}"}}), _echo())
    caplog.set_level(logging.DEBUG)
    client = lm("openai:m", retry_policy=FAST_RETRIES, **settings)
    program = imp.predict("question -> answer", lm=client, config=options)
    events: list[imp.Event] = []
    with pytest.raises(imp.AuthenticationError) as info:
        await imp.call(program, {"question": "hi"}, on_event=events.append)
    error = info.value
    sent = [r.raw.decode() + str(r.headers) + r.path for r in fake.requests]
    assert error.attempts == 2 and all(KEY in text or "Basic " in text for text in sent)  # userinfo: basic auth
    page = imp.trace_html(events, tmp_path / "trace.html").read_text()
    saved = imp.save(program, tmp_path / "program.json").read_text()
    shown = [
        str(error),
        repr(error),
        json.dumps(error.body),
        repr(vars(error)),
        "".join(traceback.format_exception(error)),
        repr(client),
        json.dumps(client.dump()),
        json.dumps([e.dump() for e in events], default=str),
        caplog.text,
        repr([r.msg for r in caplog.records]),
        page,
        saved,
    ]
    for text in shown:
        assert KEY not in text
    assert "[REDACTED]" in str(error)


@pytest.mark.parametrize("way", WAYS)
async def test_a_key_given_any_way_stays_out_of_spans(fake: FakeProvider, way: str) -> None:
    pytest.importorskip("opentelemetry.sdk")
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor
    from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

    from imp.observe.otel import uninstrument_otel

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    imp.instrument_otel(provider, include_content=True)
    try:
        settings, options = _ways(fake.base_url)[way]
        settings = {"base_url": fake.base_url, "api_key": "sk-placeholder-000", **settings}
        fake.add(_echo())
        program = imp.predict("question -> answer", lm=lm("openai:m", max_retries=0, **settings), config=options)
        with pytest.raises(imp.AuthenticationError):
            await imp.call(program, {"question": "hi"})
    finally:
        uninstrument_otel()
    spans = memory.get_finished_spans()
    assert spans
    for span in spans:
        text = json.dumps(dict(span.attributes or {}), default=str)
        text += json.dumps([dict(e.attributes or {}) for e in span.events], default=str)
        text += str(span.status.description)
        assert KEY not in text


@pytest.mark.parametrize("key", ["1", "n", "none", "EMPTY", "0", "sk"])
async def test_a_key_too_short_to_be_a_secret_rewrites_no_text(key: str) -> None:
    client = lm("openai:smollm2", api_key=key, base_url="http://127.0.0.1:9/v1", max_retries=0)
    assert repr(client) == "OpenAILM(openai:smollm2, base_url='http://127.0.0.1:9/v1')"
    with pytest.raises(imp.ConnectionFailed) as info:
        await client.request(HI)
    assert "POST http://127.0.0.1:9/v1/chat/completions" in str(info.value)
    assert "[REDACTED]" not in str(info.value) and info.value.url == "http://127.0.0.1:9/v1/chat/completions"
