"""The LM protocol: what every model client takes (messages, options) and returns (LMResponse)."""

from __future__ import annotations

import abc
from collections.abc import AsyncIterator, Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, Unpack

from imp.models._response import LMCapabilities, LMResponse, ResponseFormatSupport, StreamEvent, as_deltas
from imp.models._tokens import TokenCount, estimate
from imp.records import Message, Usage

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

        The default sends one ordinary request and hands it on as an HTTP client hands on a reply
        its server could not stream: its reasoning, its text, each tool call with its arguments as
        one delta, then the final event.
        """
        for event in as_deltas(await self.request(messages, **options)):
            yield event

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
