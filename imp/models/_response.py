"""What a model client returns and declares: `LMResponse`, `StreamEvent`, `LMCapabilities`.

Below the LM protocol (`base`) and the request options (`_options`), so the options, the cache and
the step-down rules name these records without reaching up to the protocol that takes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from imp._frozen import fast_init
from imp.media import MediaKind
from imp.models._wire import wire_arguments
from imp.records import NO_USAGE, ToolCall, Usage

__all__ = ["FinishReason", "LMCapabilities", "LMResponse", "ResponseFormatSupport", "StreamEvent", "as_deltas"]

ResponseFormatSupport = Literal["none", "json_object", "json_schema"]
"""How much structured output an LM accepts through `response_format`."""

_KINDS = ("image", "audio", "file")

FinishReason = Literal["stop", "length", "tool_calls", "content_filter", "error", "other"]


@dataclass(frozen=True, slots=True)
class LMCapabilities:
    """What an LM can take: native tools, `tool_choice` forms, structured output, streams, media."""

    tool_calling: bool = True
    named_tool_choice: bool = True
    response_format: ResponseFormatSupport = "none"
    streaming: bool = True
    """Whether the server streams a reply; when not, `stream` reads it whole and hands it on as deltas."""
    stream_tool_calls: bool = True
    """Whether the server streams a request that offers tools (llama-cpp-python's
    `chatml-function-calling` cannot once the model chose a tool); when not, such requests are read whole."""
    media: frozenset[MediaKind] | None = None
    """The media kinds (`image`, `audio`, `file`) the model takes; None: what its provider and model
    name say (a local server's model declares its own: `frozenset()` for a text-only one)."""

    def __post_init__(self) -> None:
        given: object = self.media
        if given is None:
            return
        if isinstance(given, str) or not isinstance(given, Iterable) or any(k not in _KINDS for k in given):
            raise ValueError(f"LMCapabilities media is a set of 'image', 'audio', 'file', got {given!r}")
        object.__setattr__(self, "media", frozenset(given))


@fast_init
@dataclass(frozen=True, slots=True)
class LMResponse:
    """One normalised LM reply, whatever the provider."""

    text: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    fields: Mapping[str, Any] | None = None
    """Output fields given directly as a mapping (a scripted step, or a structured reply)."""
    reasoning: str | None = None
    reasoning_data: Any = None
    """The provider's own reasoning payload, kept verbatim to continue a turn."""
    usage: Usage = NO_USAGE
    finish_reason: str | None = "stop"
    model: str | None = None
    request_id: str | None = None
    cache_hit: bool = False
    raw: Any = None
    answered_by: str | None = None
    """`"provider:model"` of the member of an `imp.fallback` chain that answered (None: the LM asked)."""


@fast_init
@dataclass(frozen=True, slots=True)
class StreamEvent:
    """One streamed delta (`text`, `reasoning`, `tool_call`) or the final event with the response."""

    kind: Literal["text", "reasoning", "tool_call", "final"]
    delta: str = ""
    index: int | None = None
    tool_name: str | None = None
    tool_call_id: str | None = None
    response: LMResponse | None = None


def as_deltas(response: LMResponse) -> list[StreamEvent]:
    """A whole response handed on as a stream: its reasoning, text and tool calls (each with its
    arguments as one delta), then the final event. Every LM that reads a reply whole and streams it
    (`LM.stream`'s default, a server that cannot stream) hands it on this one way."""
    events: list[StreamEvent] = []
    if response.reasoning:
        events.append(StreamEvent(kind="reasoning", delta=response.reasoning))
    if response.text:
        events.append(StreamEvent(kind="text", delta=response.text))
    for index, call in enumerate(response.tool_calls):
        arguments = wire_arguments(call.arguments)
        events.append(
            StreamEvent(kind="tool_call", delta=arguments, index=index, tool_name=call.name, tool_call_id=call.id)
        )
    events.append(StreamEvent(kind="final", response=response))
    return events
