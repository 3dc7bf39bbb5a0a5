"""Never a wall of base64: every place a person reads (events, log lines, spans, the run's page,
`inspect_history`, reprs, errors) shows a media value as its short description."""

from __future__ import annotations

import io
import json
import logging
import re
from pathlib import Path
from typing import Any

import anyio
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import imp
from imp.observe import Recorder
from imp.observe.otel import OtelSink

PHOTO = imp.Image.from_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 800)
CHART = imp.Image.from_bytes(b"\x89PNG\r\n\x1a\n" + bytes(range(255, -1, -1)) * 500)
LONG_RUN = re.compile(r"[A-Za-z0-9+/]{100,}")


@imp.tool
def chart(city: str) -> imp.Image:
    """Draw the week's temperatures."""
    return CHART


def _walls(text: str) -> list[str]:
    return [m[:40] for m in LONG_RUN.findall(text)]


def _run(sink: Any) -> imp.Prediction:
    lm = imp.ScriptedLM([{"tool_calls": [{"name": "chart", "arguments": {"city": "Oslo"}}]}, "Cold and grey."])
    program = imp.react("photo: Image, city -> summary", [chart], lm=lm)

    async def body() -> imp.Prediction:
        return await imp.call(program, photo=PHOTO, city="Oslo", on_event=sink)

    return anyio.run(body)


def test_events_the_page_and_inspect_history_show_descriptions(tmp_path: Path) -> None:
    recorder = Recorder(content=True)
    prediction = _run(recorder)
    events = "\n".join(json.dumps(e.dump(), default=str) for e in recorder.events)
    assert _walls(events) == []
    assert PHOTO.describe() in events and CHART.describe() in events  # the request's content, and the tool's
    page = imp.trace_html(recorder.events, tmp_path / "run.html").read_text()
    assert _walls(page) == [] and PHOTO.describe() in page
    history = imp.inspect_history(2, file=io.StringIO())
    assert _walls(history) == [] and str(PHOTO) in history and str(CHART) in history
    dumped = json.dumps(prediction.metadata.history.dump(), default=str)
    assert _walls(dumped) == [] and str(CHART) in dumped
    assert _walls(repr(prediction)) == [] and _walls(repr(imp.Example(photo=PHOTO, city="Oslo"))) == []


def test_spans_with_content_show_descriptions() -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    _run(OtelSink(provider, include_content=True))
    text = json.dumps([dict(s.attributes or {}) for s in memory.get_finished_spans()], default=str)
    assert _walls(text) == []
    assert PHOTO.describe() in text and CHART.describe() in text


def test_log_lines_show_descriptions() -> None:
    stream = io.StringIO()
    imp.configure_logging(level="DEBUG", stream=stream)
    try:
        _run(None)
    finally:
        imp.reset_logging()
    text = stream.getvalue()
    assert text and _walls(text) == []
    logging.getLogger("imp").handlers.clear()


def test_a_refusal_and_its_event_show_descriptions() -> None:
    events: list[imp.Event] = []
    lm = imp.lm("anthropic:claude-sonnet-4-5", api_key="sk-ant-test-abcdefghijklmnop")
    audio = imp.Audio.from_bytes(b"RIFF\x24\x00\x00\x00WAVEfmt " + bytes(range(256)) * 300)
    program = imp.predict("clip: Audio -> transcript", lm=lm)

    async def body() -> None:
        await imp.call(program, clip=audio, on_event=events.append)

    try:
        anyio.run(body)
    except imp.MediaRefused as error:
        assert _walls(str(error)) == [] and _walls(repr(error)) == []
        assert audio.describe() in str(error)
    else:
        raise AssertionError("anthropic took audio")
    text = json.dumps([e.dump() for e in events], default=str)
    assert "MediaRefused" in text and _walls(text) == []
