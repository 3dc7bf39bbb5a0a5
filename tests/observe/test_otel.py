"""OpenTelemetry spans from imp's events: the span tree, GenAI attribute names, redaction, concurrency."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import anyio
import pytest
from fake_provider import FakeProvider, Reply, chat_completion
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.semconv._incubating.attributes import gen_ai_attributes
from opentelemetry.trace import SpanKind, StatusCode

import imp
from imp.models.retry import RetryPolicy
from imp.observe.otel import OtelSink

SECRET = "sk-test-abcdefghijklmnopqrstuvwx0123456789"
BACKENDS = ["asyncio", "trio"]
FAST = RetryPolicy(max_retries=2, initial_backoff=0.001, max_backoff=0.005, jitter=0.0)
GEN_AI_NAMES = {v for k, v in vars(gen_ai_attributes).items() if k.startswith("GEN_AI_") and isinstance(v, str)}
OTHER_CONVENTIONS = {"error.type", "http.response.status_code"}


@pytest.fixture
def exporter() -> Iterator[InMemorySpanExporter]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    imp.instrument_otel(provider)
    try:
        yield memory
    finally:
        from imp.observe.otel import uninstrument_otel

        uninstrument_otel()


def _children(spans: list[ReadableSpan], parent: ReadableSpan) -> list[ReadableSpan]:
    return sorted(
        (s for s in spans if s.parent is not None and s.parent.span_id == parent.context.span_id),
        key=lambda s: s.start_time or 0,
    )


def _check_names(spans: list[ReadableSpan]) -> None:
    """Every attribute is a GenAI convention name, another convention's, or imp's own `imp.*`."""
    for span in spans:
        for name in span.attributes or {}:
            assert name in GEN_AI_NAMES or name in OTHER_CONVENTIONS or name.startswith("imp."), (span.name, name)
        for event in span.events:
            for name in event.attributes or {}:
                assert name in OTHER_CONVENTIONS or name.startswith("imp."), (event.name, name)


def _everything(spans: list[ReadableSpan]) -> str:
    """Every exported name, attribute value, event and status text, as one string to scan."""
    parts: list[Any] = []
    for span in spans:
        parts += [span.name, dict(span.attributes or {}), span.status.description]
        parts += [(e.name, dict(e.attributes or {})) for e in span.events]
    return json.dumps(parts, default=str)


async def lookup(city: str) -> str:
    """The weather in a city."""
    await anyio.sleep(0.05)
    return f"sunny in {city}, token={SECRET}"


async def _react_run(*, include_content: bool = False, sink: OtelSink | None = None) -> imp.Prediction:
    with FakeProvider() as fake:
        fake.add(
            Reply(429, json={"error": {"message": "slow down", "code": "rate_limit_exceeded"}}),
            Reply(
                json=chat_completion(
                    "Check both.",
                    [("c1", "lookup", {"city": "Oslo"}), ("c2", "lookup", {"city": f"Rome {SECRET}"})],
                    prompt=120,
                    completion=30,
                    cached=64,
                    reasoning=12,
                ),
            ),
            Reply(
                json=chat_completion(
                    "[[ ## answer ## ]]\nboth sunny\n\n[[ ## completed ## ]]", prompt=200, completion=8
                )
            ),
        )
        lm = imp.lm("openai:gpt-4o", api_key=SECRET, base_url=fake.base_url, retry_policy=FAST, timeout=5.0)
        async with lm:
            agent = imp.react(
                "question -> answer", [imp.tool(lookup)], lm=lm, config={"max_tokens": 300, "temperature": 0.2}
            )
            return await imp.call(agent, question=f"weather? my key is {SECRET}", on_event=sink)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_react_run_with_concurrent_tools_and_a_retried_request(exporter: InMemorySpanExporter, backend: str) -> None:
    prediction = anyio.run(_react_run, backend=backend)
    assert prediction.answer == "both sunny"
    spans = list(exporter.get_finished_spans())
    (agent,) = [s for s in spans if s.parent is None]
    assert agent.name == "invoke_agent ReAct" and agent.kind is SpanKind.INTERNAL
    assert agent.attributes is not None and agent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert agent.attributes["imp.termination_reason"] == "answered" and agent.attributes["imp.complete"] is True
    names = [s.name for s in _children(spans, agent)]
    assert names == ["chat gpt-4o", "execute_tool lookup", "execute_tool lookup", "chat gpt-4o"]
    first, tool_a, tool_b, second = _children(spans, agent)
    assert len(spans) == 5 and all(s.context.trace_id == agent.context.trace_id for s in spans)

    # the retried request is one chat span with the retry marked on it
    assert first.kind is SpanKind.CLIENT
    (retry,) = first.events
    assert retry.name == "imp.retry" and retry.attributes is not None
    assert retry.attributes["http.response.status_code"] == 429 and retry.attributes["imp.attempt"] == 1
    attrs = dict(first.attributes or {})
    assert attrs["gen_ai.operation.name"] == "chat"
    assert attrs["gen_ai.provider.name"] == "openai"
    assert attrs["gen_ai.request.model"] == "gpt-4o"
    assert attrs["gen_ai.response.model"] == "gpt-4o-2024-08-06"
    assert attrs["gen_ai.response.finish_reasons"] == ("tool_calls",)
    assert attrs["gen_ai.usage.input_tokens"] == 120 and attrs["gen_ai.usage.output_tokens"] == 30
    assert attrs["gen_ai.usage.cache_read.input_tokens"] == 64
    assert attrs["gen_ai.usage.reasoning.output_tokens"] == 12
    assert attrs["gen_ai.request.max_tokens"] == 300 and attrs["gen_ai.request.temperature"] == 0.2
    assert dict(second.attributes or {})["gen_ai.usage.input_tokens"] == 200

    # the two tool calls ran side by side, each its own span with its outcome
    for span, call_id in ((tool_a, "c1"), (tool_b, "c2")):
        tool_attrs = dict(span.attributes or {})
        assert tool_attrs["gen_ai.operation.name"] == "execute_tool" and tool_attrs["gen_ai.tool.name"] == "lookup"
        assert tool_attrs["gen_ai.tool.call.id"] == call_id and tool_attrs["imp.tool.outcome"] == "result"
        assert span.status.status_code is StatusCode.UNSET
    assert tool_a.start_time is not None and tool_b.end_time is not None and tool_a.end_time is not None
    assert tool_b.start_time is not None and tool_b.start_time < tool_a.end_time and tool_a.start_time < tool_b.end_time
    assert first.end_time is not None and first.end_time <= tool_a.start_time
    assert second.start_time is not None and second.start_time >= max(tool_a.end_time, tool_b.end_time)

    _check_names(spans)
    text = _everything(spans)
    assert SECRET not in text
    # content stays out unless asked for
    for name in ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.tool.call.arguments"):
        assert name not in text
    assert "Oslo" not in text and "sunny" not in text and "Check both" not in text


@pytest.mark.parametrize("installed", [False, True], ids=["on_event", "process-wide"])
def test_content_is_recorded_only_when_asked_and_redacted_even_then(installed: bool) -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    if installed:  # the sink sees payloads before they are made (redacted) events
        from imp.observe.otel import uninstrument_otel

        imp.instrument_otel(provider, include_content=True)
        try:
            anyio.run(_react_run)
        finally:
            uninstrument_otel()
    else:  # a call's own on_event sink, handed redacted events
        sink = OtelSink(provider, include_content=True)
        anyio.run(lambda: _react_run(sink=sink))
    spans = list(memory.get_finished_spans())
    assert len(spans) == 5
    chat = next(s for s in spans if s.name == "chat gpt-4o")
    tools = [s for s in spans if s.name == "execute_tool lookup"]
    inputs = json.loads(str(dict(chat.attributes or {})["gen_ai.input.messages"]))
    assert inputs[-1]["role"] == "user" and "weather?" in inputs[-1]["content"]
    outputs = json.loads(str(dict(chat.attributes or {})["gen_ai.output.messages"]))
    assert [c["name"] for c in outputs[0]["tool_calls"]] == ["lookup", "lookup"]
    assert "Oslo" in str(dict(tools[0].attributes or {})["gen_ai.tool.call.arguments"])
    assert "sunny in Oslo" in str(dict(tools[0].attributes or {})["gen_ai.tool.call.result"])
    _check_names(spans)
    assert SECRET not in _everything(spans)


def _answer(messages: list[dict[str, Any]], options: dict[str, Any]) -> dict[str, Any]:
    return {"answer": messages[-1]["content"].split("\n")[1].upper()}


@pytest.mark.parametrize("backend", BACKENDS)
def test_parents_are_right_under_parallel_and_nested_programs(exporter: InMemorySpanExporter, backend: str) -> None:
    qa = imp.predict("question -> answer", lm=imp.StaticLM(_answer))
    seen: list[str] = []

    async def ask_expert(question: str) -> str:
        """Ask the expert program."""
        seen.append(trace.get_current_span().get_span_context().span_id.to_bytes(8, "big").hex())
        await anyio.sleep(0.01 if question == "a" else 0)
        return (await imp.call(qa, question=question)).answer

    lm = imp.ScriptedLM(
        [
            {
                "next_thought": "ask",
                "tool_calls": [
                    {"name": "ask_expert", "arguments": {"question": "a"}},
                    {"name": "ask_expert", "arguments": {"question": "b"}},
                ],
            },
            {"answer": "A"},
        ]
    )
    outer = imp.react("question -> answer", [imp.tool(ask_expert)], lm=lm)

    async def main() -> list[object]:
        return await imp.parallel(
            [(qa, {"question": f"q{i}"}) for i in range(6)] + [(outer, {"question": "a"})], concurrency=4
        )

    results = anyio.run(main, backend=backend)
    assert all(isinstance(r, imp.Prediction) for r in results), results
    spans = list(exporter.get_finished_spans())
    roots = [s for s in spans if s.parent is None]
    assert sorted(s.name for s in roots) == ["invoke_agent Predict"] * 6 + ["invoke_agent ReAct"]
    for root in roots:
        if root.name == "invoke_agent Predict":
            assert [s.name for s in _children(spans, root)] == ["chat static"]
    (react_span,) = [s for s in roots if s.name == "invoke_agent ReAct"]
    kids = _children(spans, react_span)
    assert [s.name for s in kids] == [
        "chat scripted",
        "execute_tool ask_expert",
        "execute_tool ask_expert",
        "chat scripted",
    ]
    for tool_span in kids[1:3]:  # each program a tool called nests under that tool's own span
        nested = _children(spans, tool_span)
        assert [s.name for s in nested] == ["invoke_agent Predict"]
        assert [s.name for s in _children(spans, nested[0])] == ["chat static"]
        assert tool_span.start_time is not None and nested[0].start_time is not None
        assert tool_span.end_time is not None and nested[0].end_time is not None
        assert tool_span.start_time <= nested[0].start_time and nested[0].end_time <= tool_span.end_time
    # inside the tool, the current span (for other libraries' spans) is the agent's own
    assert seen == [react_span.context.span_id.to_bytes(8, "big").hex()] * 2
    _check_names(spans)


def test_an_error_sets_the_status_and_its_type(exporter: InMemorySpanExporter) -> None:
    def down(messages: Any, options: Any) -> Any:
        raise imp.LMError(f"the provider is down (key {SECRET})", status=503, provider="scripted")

    qa = imp.predict("question -> answer", lm=imp.StaticLM(down))
    with pytest.raises(imp.LMError):
        imp.call_sync(qa, question="q")
    spans = list(exporter.get_finished_spans())
    chat = next(s for s in spans if s.name.startswith("chat"))
    agent = next(s for s in spans if s.name.startswith("invoke_agent"))
    for span in (chat, agent):
        assert span.status.status_code is StatusCode.ERROR
        assert dict(span.attributes or {})["error.type"] == "ProviderUnavailable"
    assert dict(chat.attributes or {})["http.response.status_code"] == 503
    assert "provider is down" in (chat.status.description or "")
    assert SECRET not in _everything(spans)


def test_a_refused_tool_call_is_an_error_span(exporter: InMemorySpanExporter) -> None:
    lm = imp.ScriptedLM(
        [
            {"tool_calls": [{"name": "nope", "arguments": {}}]},
            {"answer": "x"},
        ]
    )
    imp.call_sync(imp.react("question -> answer", [imp.tool(lookup)], lm=lm), question="q")
    spans = list(exporter.get_finished_spans())
    refused = next(s for s in spans if s.name == "execute_tool nope")
    assert refused.status.status_code is StatusCode.ERROR
    assert dict(refused.attributes or {})["error.type"] == "refused"


def test_uninstrument_stops_the_spans() -> None:
    from imp.observe.otel import uninstrument_otel

    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    qa = imp.predict("question -> answer", lm=imp.StaticLM(_answer))
    imp.instrument_otel(provider)
    imp.instrument_otel(provider)  # a second call replaces the first: one span per call, not two
    imp.call_sync(qa, question="q")
    uninstrument_otel()
    imp.call_sync(qa, question="q")
    assert [s.name for s in memory.get_finished_spans()] == ["chat static", "invoke_agent Predict"]


def test_include_content_is_checked() -> None:
    with pytest.raises(TypeError, match="include_content"):
        OtelSink(include_content="yes")  # type: ignore[arg-type]


def test_import_imp_imports_no_opentelemetry_and_a_missing_extra_says_how_to_install_it() -> None:
    code = (
        "import sys, imp\n"
        "assert not [m for m in sys.modules if m.startswith('opentelemetry')], 'opentelemetry imported'\n"
        "sys.modules['opentelemetry'] = None\n"
        "try:\n"
        "    imp.instrument_otel()\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'imp[otel]'" in out.stdout


def test_a_cancelled_call_ends_its_spans_and_leaves_no_current_span(exporter: InMemorySpanExporter) -> None:
    async def slow(messages: Any, options: Any) -> Any:
        await anyio.sleep(5)
        return {"answer": "late"}

    qa = imp.predict("question -> answer", lm=imp.StaticLM(slow))

    async def main() -> bool:
        with anyio.move_on_after(0.05):
            await imp.call(qa, question="q")
        return trace.get_current_span().get_span_context().is_valid

    assert anyio.run(main) is False  # the call's span is no longer current after it
    spans = {s.name: s for s in exporter.get_finished_spans()}
    assert set(spans) == {"invoke_agent Predict", "chat static"}
    assert dict(spans["invoke_agent Predict"].attributes or {})["imp.cancelled"] is True
    assert dict(spans["chat static"].attributes or {})["imp.unfinished"] is True


def test_a_context_projection_is_a_span_event() -> None:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    sink = OtelSink(provider)

    def event(seq: int, kind: str, **payload: Any) -> imp.Event:
        return imp.Event(seq, "call-x", None, kind, 100.0 + seq, payload)

    sink(event(1, "run_started", program="ReAct"))
    sink(event(2, "model_request", model="openai:gpt-4o", step=3))
    sink(event(3, "context_projected", step=3, omitted_steps=2, recovery_requests=1, reason="context_window_exceeded"))
    sink(event(4, "model_response", model="openai:gpt-4o", finish_reason="stop", usage={"input_tokens": 9}))
    sink(event(5, "run_finished", complete=True, termination_reason="answered"))
    chat = next(s for s in memory.get_finished_spans() if s.name == "chat gpt-4o")
    (projected,) = chat.events
    assert projected.name == "imp.context_projected" and projected.timestamp == 103_000_000_000
    assert dict(projected.attributes or {})["imp.omitted_steps"] == 2
    assert chat.start_time == 102_000_000_000 and chat.end_time == 104_000_000_000
    _check_names(list(memory.get_finished_spans()))


def test_the_clients_own_default_options_are_reported_under_the_requests(exporter: InMemorySpanExporter) -> None:
    async def run() -> None:
        with FakeProvider() as fake:
            fake.add(
                Reply(
                    json=chat_completion("[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]", prompt=9, completion=3)
                )
            )
            lm = imp.lm("openai:gpt-4o", api_key=SECRET, base_url=fake.base_url, temperature=0.3, max_tokens=64)
            async with lm:
                qa = imp.predict("question -> answer", lm=lm, config={"max_tokens": 32})
                await imp.call(qa, question="Capital of France?")

    anyio.run(run)
    (chat,) = [s for s in exporter.get_finished_spans() if s.name.startswith("chat")]
    attrs = dict(chat.attributes or {})
    assert attrs["gen_ai.request.temperature"] == 0.3  # the client's default
    assert attrs["gen_ai.request.max_tokens"] == 32  # the program's config wins over it


@pytest.mark.parametrize(
    ("provider", "expected"), [("openai-responses", "openai"), ("openai", "openai"), ("gemini", "gcp.gemini")]
)
def test_the_provider_name_follows_the_conventions(
    exporter: InMemorySpanExporter, provider: str, expected: str
) -> None:
    class Named(imp.StaticLM):
        pass

    Named.provider = provider  # type: ignore[misc]
    qa = imp.predict("question -> answer", lm=Named(lambda messages, options: {"answer": "a"}))
    imp.call_sync(qa, question="q")
    chat = next(s for s in exporter.get_finished_spans() if s.name.startswith("chat"))
    assert dict(chat.attributes or {})["gen_ai.provider.name"] == expected
