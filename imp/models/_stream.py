"""One streamed response read as it arrives: SSE events into deltas, bounded in size and in stalled time.

The reader is an async generator of deltas that ends with the `final` event. The client reads its
first item before the stream counts as started (a failure before it is a failed request, retried),
then passes the rest on. What it enforces, for every provider:

- size: a stream's text, reasoning and tool arguments, plus the whole of each event that carries
  none of them, count toward `max_response_bytes` (the per-chunk JSON around a delta is not counted,
  so a reply streamed a token at a time is measured like the same reply read whole); one event, or
  an unfinished line, is bounded by the same figure;
- progress: keep-alive comments (and Anthropic's `ping` events) are not progress: a stream that sends
  only those for longer than the read timeout fails as a timeout would;
- shape: an event the provider's reader cannot make sense of is an `imp.InvalidResponse`, never a
  `KeyError` or a `RecursionError` from deep inside it.
"""

from __future__ import annotations

import abc
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass

from imp._redact import redact_text
from imp.errors import InvalidResponse, LMError, ResponseTooLarge, StreamBroken, UnsupportedOption
from imp.models._sse import SSEDecoder, SSEEvent, SSELimitExceeded
from imp.models._transport import BodyTooLarge, HTTPFailure
from imp.models.base import LMResponse, StreamEvent

__all__ = [
    "Arrived",
    "EmptyStream",
    "StreamReader",
    "StreamState",
    "answered_whole",
    "empty_stream_error",
    "malformed",
    "read_json",
    "too_large_error",
]

_MALFORMED = (ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError)
"""What reading a well-formed SSE event of the wrong shape raises inside a provider's reader."""


class StreamState(abc.ABC):
    """Reads one provider's SSE events into deltas and, at the end, the whole response."""

    @abc.abstractmethod
    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        """Take one SSE event; return the deltas it carries. Raise `LMError` for an error event."""

    @abc.abstractmethod
    def finish(self) -> LMResponse:
        """The whole response once the body ended; raise `LMError` if the terminal event never came."""


class EmptyStream(Exception):
    """The body ended before a single event (`received` bytes of comments, or none at all)."""

    def __init__(self, received: int) -> None:
        super().__init__(f"the stream ended before any event ({received} byte(s) of keep-alives)")
        self.received = received


@dataclass
class Arrived:
    """How much of a stream reached the caller, for the error when it breaks later."""

    deltas: int = 0
    chars: int = 0

    def count(self, event: StreamEvent) -> StreamEvent:
        self.deltas += 1
        self.chars += len(event.delta)
        return event

    def __str__(self) -> str:
        return f"{self.deltas} delta(s), {self.chars} character(s) of text, reasoning and tool arguments"


def malformed(
    exc: BaseException, what: str, data: str, *, provider: str, secrets: tuple[str, ...] = ()
) -> InvalidResponse:
    """The error for a body or event of the wrong shape (its first 300 characters kept, redacted)."""
    kind = "nested too deeply" if isinstance(exc, RecursionError) else type(exc).__name__
    snippet = redact_text(data[:300], secrets)
    message = f"the server sent {what} imp cannot read ({kind})" + (f": {snippet}" if snippet else "")
    return InvalidResponse(message, status=200, provider=provider, body=snippet)


class StreamReader:
    """Reads one streamed response: SSE events through the provider's `StreamState` into deltas."""

    __slots__ = (
        "_chunks",
        "_decoder",
        "_limit",
        "_provider",
        "_secrets",
        "_stall",
        "_state",
        "arrived",
        "events",
        "received",
        "size",
    )

    def __init__(
        self,
        state: StreamState,
        chunks: AsyncIterator[bytes],
        *,
        provider: str,
        limit: int | None,
        stall: float | None,
        secrets: tuple[str, ...] = (),
    ) -> None:
        self._state = state
        self._secrets = secrets
        self._chunks = chunks
        self._provider = provider
        self._limit = limit
        self._stall = stall
        self._decoder = SSEDecoder(limit)
        self.arrived = Arrived()
        """The deltas passed on so far."""
        self.events = 0
        """SSE events dispatched so far (comments are not events)."""
        self.received = 0
        """Body bytes received so far."""
        self.size = 0
        """What counts toward `max_response_bytes` so far (see the module docstring)."""

    @property
    def scanned(self) -> int:
        """Bytes the SSE decoder examined: its work, in proportion to what arrived."""
        return self._decoder.scanned

    async def deltas(self) -> AsyncGenerator[StreamEvent]:
        """Each delta as its event is read, then the `final` event with the whole response."""
        stall = self._stall
        progress, idle_since = -1, 0.0
        async for chunk in self._chunks:
            self.received += len(chunk)
            try:
                events = self._decoder.feed(chunk)
            except SSELimitExceeded as exc:
                raise self._too_large(str(exc)) from None
            if stall is not None:  # the clock is read only while nothing but keep-alives arrives
                if self._decoder.progress != progress:
                    progress, idle_since = self._decoder.progress, 0.0
                elif not idle_since:
                    idle_since = time.monotonic()
                elif time.monotonic() - idle_since > stall:
                    raise HTTPFailure(
                        "timeout",
                        f"only keep-alives for over {stall:g} s: the read timeout, counted from the last event",
                        sent=True,
                    )
            for event in events:
                self.events += 1
                for delta in self._feed(event):
                    yield self.arrived.count(delta)
        if self.events == 0:
            raise EmptyStream(self.received)
        yield StreamEvent(kind="final", response=self._finish())

    def _feed(self, event: SSEEvent) -> list[StreamEvent]:
        try:
            deltas = self._state.feed(event)
        except LMError:
            raise
        except _MALFORMED as exc:
            raise malformed(exc, "a stream event", event.data, provider=self._provider, secrets=self._secrets) from None
        if deltas:
            self.size += sum(len(d.delta) + len(d.tool_name or "") for d in deltas)
        else:
            self.size += event.size
        if self._limit is not None and self.size > self._limit:
            raise self._too_large(f"the streamed reply is over {self._limit:,} bytes")
        return deltas

    def _finish(self) -> LMResponse:
        try:
            return self._state.finish()
        except LMError:
            raise
        except _MALFORMED as exc:
            raise malformed(exc, "a stream", "", provider=self._provider) from None

    def _too_large(self, what: str) -> ResponseTooLarge:
        limit = self._limit or 0
        return ResponseTooLarge(
            f"{what} (max_response_bytes={limit:,}); raise imp.lm(..., max_response_bytes=...) for longer replies",
            status=200,
            provider=self._provider,
            limit=limit,
        )


def read_json(content: bytes, *, provider: str, status: int, secrets: tuple[str, ...] = ()) -> object:
    """A whole body as JSON; an `imp.InvalidResponse` for text that is not JSON or nests too deeply."""
    try:
        return json.loads(content)
    except (ValueError, RecursionError) as exc:
        snippet = redact_text(content[:300].decode("utf-8", errors="replace"), secrets)
        if isinstance(exc, RecursionError):
            raise malformed(exc, "a response body", snippet, provider=provider) from None  # already redacted
        raise InvalidResponse(
            f"the response body is not JSON: {snippet}" if snippet.strip() else "the response body is empty",
            status=status,
            provider=provider,
            body=snippet,
        ) from None


def answered_whole(headers: Mapping[str, str]) -> bool:
    """Whether a 200 to a streamed request is a whole JSON body (a server that ignores `stream`), not events."""
    kind = headers.get("content-type", "").partition(";")[0].strip().lower()
    return kind == "application/json" or kind.endswith("+json")


def empty_stream_error(empty: EmptyStream, options: Mapping[str, object], provider: str) -> LMError:
    """A streamed body that ended before any event. With tools, the server could not stream them
    (a step down to a request read whole); with none at all, a reply that will not change (never
    sent again); keep-alives and then nothing, a stream cut short (retried)."""
    if options.get("tools"):
        return UnsupportedOption(
            "the server ended a streamed request with tools before a single event "
            "(it cannot stream the tool call it chose)",
            option="stream",
            status=200,
            provider=provider,
            code="empty_stream",
        )
    if empty.received == 0:
        return InvalidResponse(
            "the server answered 200 with an empty stream, which sending again will not change",
            status=200,
            provider=provider,
            code="empty_stream",
        )
    return StreamBroken(
        f"{empty}: the stream ended before the completion started", provider=provider, code="stream_truncated"
    )


def too_large_error(too_large: BodyTooLarge, provider: str) -> ResponseTooLarge:
    """The `imp.ResponseTooLarge` for a reply (or one stream event) over `max_response_bytes`."""
    return ResponseTooLarge(
        f"{too_large} (max_response_bytes={too_large.limit:,}); "
        "raise imp.lm(..., max_response_bytes=...) for longer replies",
        status=200,
        provider=provider,
        limit=too_large.limit,
    )
