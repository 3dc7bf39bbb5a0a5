"""OpenTelemetry spans from imp's events, named and attributed by the GenAI semantic conventions.

`OtelSink` is an `on_event` sink; `instrument_otel()` installs one for every run in the process.
Spans are built from each event's call id, parent id and tool call id (never from which task is
running), so their parents are right under `imp.parallel`, concurrent tool calls and nested
programs, on asyncio and trio alike.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

try:
    from opentelemetry import context as otel_context
    from opentelemetry import trace
    from opentelemetry.trace import Span, SpanKind, Status, StatusCode, TracerProvider
    from opentelemetry.util.types import AttributeValue
except ImportError:  # pragma: no cover - exercised by installing without the extra
    raise ImportError("imp's OpenTelemetry spans need the opentelemetry-api package: pip install 'imp[otel]'") from None

from imp._redact import redact, redact_text
from imp._version import version
from imp.exchanges import recent_exchanges
from imp.records import plain
from imp.runtime.events import (
    ModelError,
    ModelRequest,
    ModelResponse,
    ModelRetry,
    Payload,
    RunCancelled,
    RunFailed,
    RunFinished,
    RunStarted,
    ToolCalled,
    ToolReturned,
)
from imp.runtime.run import Event, Run, add_process_sink, current_run, remove_process_sink
from imp.tools.events import current_tool_call_id

__all__ = ["OtelSink", "instrument_otel", "uninstrument_otel"]

_REQUEST_OPTIONS = {
    "temperature": "gen_ai.request.temperature",
    "max_tokens": "gen_ai.request.max_tokens",
    "top_p": "gen_ai.request.top_p",
    "top_k": "gen_ai.request.top_k",
    "seed": "gen_ai.request.seed",
    "n": "gen_ai.request.choice.count",
    "frequency_penalty": "gen_ai.request.frequency_penalty",
    "presence_penalty": "gen_ai.request.presence_penalty",
}
_PROVIDERS = {
    "openai-responses": "openai",
    "gemini": "gcp.gemini",
    "mistral": "mistral_ai",
    "xai": "x_ai",
    "bedrock": "aws.bedrock",
}
"""imp's provider names where the conventions spell them otherwise; the rest are the same word."""


def _ns(at: float) -> int:
    return int(at * 1_000_000_000)


def _text(value: object) -> str:
    """A redacted JSON text of a value (attribute values are strings, numbers or lists of them)."""
    return redact_text(json.dumps(redact(value), ensure_ascii=False, default=str))


def _error_type(error: object) -> str:
    """The class name at the front of an event's `Type: message` error text."""
    head = str(error).split(":", 1)[0].strip()
    return head if head.isidentifier() else "Error"


@dataclass(slots=True)
class _Call:
    """The open spans of one `imp.call`."""

    span: Span
    context: otel_context.Context
    """The span as a parent, for the call's LM requests and tool calls."""
    token: object | None
    chat: Span | None = None
    tools: dict[str, Span] = field(default_factory=dict)


class OtelSink:
    """An `on_event` sink that turns a run's events into OpenTelemetry spans.

    `invoke_agent {program}` per call (nested calls nest), `chat {model}` (CLIENT) per LM request,
    `execute_tool {tool}` per tool call; retries, reasoning and context projection are span
    events; an error sets the span's status and `error.type`. Message content and tool arguments
    and results are recorded only with `include_content=True`, redacted even then.
    """

    def __init__(self, tracer_provider: TracerProvider | None = None, *, include_content: bool = False) -> None:
        if not isinstance(include_content, bool):
            raise TypeError(f"include_content is True or False, got {include_content!r}")
        self.include_content = include_content
        self._tracer = trace.get_tracer("imp", version(), tracer_provider=tracer_provider)
        self._calls: dict[str, _Call] = {}

    def __call__(self, event: Event) -> None:
        self._handle(event.call_id, event.parent_id, event.kind, event.at, event.payload)

    def raw_event(self, run: Run, kind: str, payload: Payload, at: float) -> None:
        """The same, for a payload before it is made an event: what is exported is redacted here."""
        self._handle(run.call_id, run.parent_id, kind, at, payload)

    def _handle(self, call_id: str, parent_id: str | None, kind: str, at: float, payload: Payload) -> None:
        handler = _HANDLERS.get(type(payload))
        if handler is not None:
            handler(self, call_id, parent_id, at, payload)
        elif (call := self._calls.get(call_id)) is not None:
            attributes = _event_attributes(payload, self.include_content)
            (call.chat or call.span).add_event(f"imp.{kind}", attributes, _ns(at))

    # --- one call ---------------------------------------------------------------------------------

    def _run_started(self, call_id: str, parent_id: str | None, at: float, payload: RunStarted) -> None:
        program = payload.program
        parent = self._calls.get(parent_id) if parent_id is not None else None
        context = None
        if parent is not None:
            context = parent.context
            tool_call_id = current_tool_call_id()  # a program called by a tool nests under the tool's span
            tool = parent.tools.get(redact_text(tool_call_id)) if tool_call_id is not None else None
            if tool is not None:
                context = trace.set_span_in_context(tool)
        span = self._tracer.start_span(
            f"invoke_agent {program}",
            context=context,
            kind=SpanKind.INTERNAL,
            start_time=_ns(at),
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": program,
                "imp.call_id": call_id,
            },
        )
        token = None
        context = trace.set_span_in_context(span)
        run = current_run()
        if run is not None and run.call_id == call_id:
            # Called inline by the run itself: spans other libraries open inside the call (an HTTP
            # client's, a tool's own) nest under it. A sink behind a queue attaches nothing.
            token = otel_context.attach(context)
        self._calls[call_id] = _Call(span, context, token)

    def _run_ended(
        self, call_id: str, parent_id: str | None, at: float, payload: RunFinished | RunFailed | RunCancelled
    ) -> None:
        call = self._calls.pop(call_id, None)
        if call is None:
            return
        end = _ns(at)
        for open_span in (call.chat, *call.tools.values()):
            if open_span is not None:
                open_span.set_attribute("imp.unfinished", True)
                open_span.end(end)
        span = call.span
        match payload:
            case RunFinished():
                span.set_attribute("imp.complete", payload.complete)
                if payload.termination_reason is not None:
                    span.set_attribute("imp.termination_reason", payload.termination_reason)
            case RunFailed():
                span.set_attribute("error.type", _error_type(payload.error))
                span.set_status(Status(StatusCode.ERROR, redact_text(payload.error)))
            case RunCancelled():
                span.set_attribute("imp.cancelled", True)
                span.add_event("imp.run_cancelled", timestamp=end)
        span.end(end)
        if call.token is not None:
            otel_context.detach(call.token)  # type: ignore[arg-type]

    # --- LM requests --------------------------------------------------------------------------------

    def _model_request(self, call_id: str, parent_id: str | None, at: float, payload: ModelRequest) -> None:
        call = self._calls.get(call_id)
        if call is None:
            return
        provider, _, model = (payload.model or "").partition(":")
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "chat",
            "gen_ai.provider.name": _PROVIDERS.get(provider, provider),
            "gen_ai.request.model": model,
        }
        if payload.step is not None:
            attributes["imp.step"] = payload.step
        if payload.forced is not None:
            attributes["imp.forced"] = payload.forced
        if call.chat is not None:  # an answered request that said nothing more: close it here
            call.chat.end(_ns(at))
        call.chat = self._tracer.start_span(
            f"chat {model}",
            context=call.context,
            kind=SpanKind.CLIENT,
            start_time=_ns(at),
            attributes=attributes,
        )

    def _model_retry(self, call_id: str, parent_id: str | None, at: float, payload: ModelRetry) -> None:
        call = self._calls.get(call_id)
        if call is None:
            return
        attributes: dict[str, AttributeValue] = {
            "imp.attempt": payload.attempt,
            "error.type": payload.error_type or "LMError",
            "imp.wait": payload.wait,
        }
        if payload.status is not None:
            attributes["http.response.status_code"] = payload.status
        (call.chat or call.span).add_event("imp.retry", attributes, _ns(at))

    def _model_response(self, call_id: str, parent_id: str | None, at: float, payload: ModelResponse) -> None:
        call = self._calls.get(call_id)
        if call is None or call.chat is None:
            return
        span, call.chat = call.chat, None
        if payload.finish_reason is not None:
            span.set_attribute("gen_ai.response.finish_reasons", [payload.finish_reason])
        usage = payload.usage
        if usage is not None:
            for value, name in (
                (usage.input_tokens, "gen_ai.usage.input_tokens"),
                (usage.output_tokens, "gen_ai.usage.output_tokens"),
                (usage.cached_tokens, "gen_ai.usage.cache_read.input_tokens"),
                (usage.reasoning_tokens, "gen_ai.usage.reasoning.output_tokens"),
            ):
                if value:
                    span.set_attribute(name, value)
            if usage.cost is not None:
                span.set_attribute("imp.usage.cost", usage.cost)
        if payload.cache_hit:
            span.set_attribute("imp.cache_hit", True)
        self._exchange_attributes(span, payload)
        span.end(_ns(at))

    def _model_error(self, call_id: str, parent_id: str | None, at: float, payload: ModelError) -> None:
        call = self._calls.get(call_id)
        if call is None or call.chat is None:
            return
        span, call.chat = call.chat, None
        span.set_attribute("error.type", payload.error_type or "LMError")
        if payload.status is not None:
            span.set_attribute("http.response.status_code", payload.status)
        self._exchange_attributes(span, payload)
        span.set_status(Status(StatusCode.ERROR, redact_text(payload.error)))
        span.end(_ns(at))

    def _exchange_attributes(self, span: Span, payload: ModelResponse | ModelError) -> None:
        """Request options, the response's model and id, and (with `include_content`) the messages,
        read from the exchange the LM request recorded just before this event (no await between)."""
        exchanges = recent_exchanges(1)
        if not exchanges:
            return
        exchange = exchanges[0]
        model = (payload.model or "").partition(":")[2]
        response = exchange.response
        if exchange.model != model or (response is None) != isinstance(payload, ModelError):
            return  # not this request's exchange (one announced by the program itself)
        if (
            isinstance(payload, ModelResponse)
            and response is not None
            and response.finish_reason != payload.finish_reason
        ):
            return
        for key, value in exchange.options.items():
            name = _REQUEST_OPTIONS.get(key)
            if name is not None and isinstance(value, int | float) and not isinstance(value, bool):
                span.set_attribute(name, value)
        stop = exchange.options.get("stop")
        if stop and isinstance(stop, str | list | tuple):
            span.set_attribute(
                "gen_ai.request.stop_sequences", [stop] if isinstance(stop, str) else list(map(str, stop))
            )
        if response is not None:
            if response.model:
                span.set_attribute("gen_ai.response.model", response.model)
            if response.request_id:
                span.set_attribute("gen_ai.response.id", response.request_id)
        if not self.include_content:
            return
        span.set_attribute("gen_ai.input.messages", _text(plain(list(exchange.messages))))
        if response is not None:
            output: dict[str, Any] = {"role": "assistant", "content": response.text}
            if response.fields is not None:
                output["fields"] = dict(response.fields)
            if response.tool_calls:
                output["tool_calls"] = [
                    {"id": c.id, "name": c.name, "arguments": c.arguments} for c in response.tool_calls
                ]
            span.set_attribute("gen_ai.output.messages", _text([output]))

    # --- tool calls -----------------------------------------------------------------------------------

    def _tool_call(self, call_id: str, parent_id: str | None, at: float, payload: ToolCalled) -> None:
        call = self._calls.get(call_id)
        if call is None:
            return
        name = redact_text(payload.tool_name)  # both written by the model
        tool_call_id = redact_text(payload.tool_call_id)
        attributes: dict[str, AttributeValue] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": tool_call_id,
            "gen_ai.tool.type": "function",
        }
        if self.include_content and payload.arguments is not None:
            attributes["gen_ai.tool.call.arguments"] = _text(payload.arguments)
        call.tools[tool_call_id] = self._tracer.start_span(
            f"execute_tool {name}",
            context=call.context,
            kind=SpanKind.INTERNAL,
            start_time=_ns(at),
            attributes=attributes,
        )

    def _tool_result(self, call_id: str, parent_id: str | None, at: float, payload: ToolReturned) -> None:
        call = self._calls.get(call_id)
        tool_call_id = redact_text(payload.tool_call_id)
        span = call.tools.pop(tool_call_id, None) if call is not None else None
        if span is None:
            return
        outcome = payload.outcome or "result"
        span.set_attribute("imp.tool.outcome", outcome)
        if self.include_content and payload.output is not None:
            span.set_attribute("gen_ai.tool.call.result", _text(payload.output))
        if outcome != "result":
            span.set_attribute("error.type", outcome)
            span.set_status(Status(StatusCode.ERROR, redact_text(payload.error or outcome)))
        span.end(_ns(at))


def _event_attributes(payload: Payload, include_content: bool) -> dict[str, AttributeValue]:
    """A span event's attributes (redacted): scalars as they are, anything else as JSON text; the
    model's reasoning text only with `include_content`."""
    out: dict[str, AttributeValue] = {}
    for key, value in redact(payload.dump()).items():
        if key == "text" and not include_content:
            continue
        if isinstance(value, bool | int | float | str):
            out[f"imp.{key}"] = redact_text(value) if isinstance(value, str) else value
        elif value is not None:
            out[f"imp.{key}"] = _text(value)
    return out


_HANDLERS: dict[type[Payload], Callable[[OtelSink, str, str | None, float, Any], None]] = {
    RunStarted: OtelSink._run_started,
    RunFinished: OtelSink._run_ended,
    RunFailed: OtelSink._run_ended,
    RunCancelled: OtelSink._run_ended,
    ModelRequest: OtelSink._model_request,
    ModelRetry: OtelSink._model_retry,
    ModelResponse: OtelSink._model_response,
    ModelError: OtelSink._model_error,
    ToolCalled: OtelSink._tool_call,
    ToolReturned: OtelSink._tool_result,
}
"""Each of imp's payload types the sink turns into spans (the others become span events)."""

_installed: OtelSink | None = None


def instrument_otel(tracer_provider: TracerProvider | None = None, include_content: bool = False) -> OtelSink:
    """Send every run in this process to OpenTelemetry (replacing an earlier `instrument_otel`);
    returns the sink. `uninstrument_otel()` stops it."""
    global _installed
    sink = OtelSink(tracer_provider, include_content=include_content)
    if _installed is not None:
        remove_process_sink(_installed)
    add_process_sink(sink)
    _installed = sink
    return sink


def uninstrument_otel() -> None:
    """Stop what `instrument_otel` started (nothing happens if it was not)."""
    global _installed
    if _installed is not None:
        remove_process_sink(_installed)
        _installed = None
