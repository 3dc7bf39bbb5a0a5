"""The LM protocol: what every model client takes (messages, options) and returns (LMResponse)."""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Literal, Unpack

from imp._frozen import fast_init
from imp.media import MediaKind
from imp.models._tokens import TokenCount, estimate
from imp.records import NO_USAGE, Message, ToolCall, Usage

if TYPE_CHECKING:
    from imp.models._options import Options

__all__ = [
    "LM",
    "LMCapabilities",
    "LMResponse",
    "Message",
    "ResponseFormatSupport",
    "StreamEvent",
    "TokenCount",
    "Usage",
]

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


class LM(abc.ABC):
    """A language model client. Subclasses implement `request` (and may implement `stream`).

    Usage: imp's own clients add each response's usage to the open accumulators
    (`imp.runtime.usage.record_usage`) themselves, so direct `await lm.request(...)` calls are
    counted like a program's. A subclass only has to return `LMResponse(usage=...)`: when nothing
    recorded usage during a program's request, the program records the response's.
    """

    provider: str = "lm"
    model: str = "unknown"
    capabilities: LMCapabilities = LMCapabilities()
    defaults: Mapping[str, Any] = MappingProxyType({})
    """Request options the client sends unless a request gives its own (`imp.lm(..., temperature=0.2)`)."""
    context_window: int | None = None
    """The most tokens a request (prompt and `max_tokens`) may hold, where known: a request that cannot
    fit is refused before it is sent (`imp.ContextWindowExceeded`)."""
    counts_exactly: bool = False
    """Whether `count_tokens` asks the provider or the server's tokenizer (else it estimates)."""

    @abc.abstractmethod
    async def request(self, messages: Sequence[Message], **options: Unpack[Options]) -> LMResponse:
        """Send one request and return the normalised response."""

    async def stream(self, messages: Sequence[Message], **options: Unpack[Options]) -> AsyncIterator[StreamEvent]:
        """Yield deltas, then one final event holding the whole response.

        The default sends one ordinary request and yields its text as one delta.
        """
        response = await self.request(messages, **options)
        if response.reasoning:
            yield StreamEvent(kind="reasoning", delta=response.reasoning)
        if response.text:
            yield StreamEvent(kind="text", delta=response.text)
        for index, call in enumerate(response.tool_calls):
            yield StreamEvent(kind="tool_call", index=index, tool_name=call.name, tool_call_id=call.id)
        yield StreamEvent(kind="final", response=response)

    async def count_tokens(self, messages: Sequence[Message], **options: Unpack[Options]) -> TokenCount:
        """The input tokens these messages (with these options' tools) would take, without sending them.

        The default estimates from the text (`method="estimate"`, `exact=False`); a client whose
        provider counts (Anthropic's counting endpoint) or whose server tokenizes (llama.cpp's
        `/tokenize`) asks it instead.
        """
        return estimate(messages, options)

    async def aclose(self) -> None:  # noqa: B027 - optional hook, not abstract
        """Release connections; the default holds none."""

    async def __aenter__(self) -> LM:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.provider}:{self.model})"
