"""A stream's first content: read before the stream counts as started, so a failure before it is retried."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from imp.models._http import StreamState
    from imp.models._sse import SSEDecoder, SSEEvent
    from imp.models.base import LMResponse, StreamEvent

__all__ = ["Arrived", "Opened", "read_first_content"]


@dataclass
class Opened:
    """A stream that has delivered its first deltas (or ended whole before any came)."""

    state: StreamState
    decoder: SSEDecoder
    chunks: AsyncIterator[bytes]
    first: list[StreamEvent] = field(default_factory=list)
    pending: list[SSEEvent] = field(default_factory=list)
    """Events that came in the same chunk after the first delta: read once that delta was yielded."""
    ended: bool = False
    """The body ended before any delta."""
    response: LMResponse | None = None
    """The whole response, when the body ended (well) before any delta."""


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


async def read_first_content(opened: Opened) -> None:
    """Read chunks until the stream yields a delta or its body ends (transport failures propagate)."""
    while not opened.first:
        chunk = await anext(opened.chunks, None)
        if chunk is None:
            opened.ended = True
            return
        for event in opened.decoder.feed(chunk):
            if opened.first:  # content came: what follows (an error event, say) is the started stream's
                opened.pending.append(event)
            else:
                opened.first.extend(opened.state.feed(event))
