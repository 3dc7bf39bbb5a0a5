"""An incremental Server-Sent Events parser: feed it bytes as they arrive, get whole events out.

It does work in proportion to the bytes fed (each byte is scanned once, whatever the chunking: a
line that arrives a byte at a time is joined once, when it ends) and holds at most `max_event_bytes`
of one event, so a hostile stream can neither stall it nor grow it without bound.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["SSEDecoder", "SSEEvent", "SSELimitExceeded"]


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event: its `event:` name (default "message"), its joined `data:` and `id:`."""

    event: str
    data: str
    id: str | None = None
    size: int = field(default=0, compare=False)
    """The bytes of the lines that made it (what the reply-size limit counts for an event without content)."""


class SSELimitExceeded(ValueError):
    """One event (or one unfinished line) grew past the decoder's `max_event_bytes`."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"a stream event is over {limit:,} bytes")
        self.limit = limit


class SSEDecoder:
    """Splits a byte stream into SSE events, across any chunk boundaries (WHATWG rules).

    Lines end in LF, CR LF or CR; a blank line dispatches; `:` lines are comments (keep-alives);
    `data:` lines join with newlines; an event with no data is not dispatched. `max_event_bytes`
    bounds one event (its lines together) and the line being read; None leaves them unbounded.
    """

    __slots__ = (
        "_data",
        "_event",
        "_id",
        "_limit",
        "_lines",
        "_partial",
        "_partial_size",
        "_pending_cr",
        "_size",
        "comments",
        "progress",
        "scanned",
    )

    def __init__(self, max_event_bytes: int | None = None) -> None:
        self._limit = max_event_bytes
        self._partial: list[bytes] = []
        self._partial_size = 0
        self._pending_cr = False
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None
        self._size = 0
        self.scanned = 0
        """Bytes examined so far: the decoder's work, which stays in proportion to what was fed."""
        self._lines = 0
        self.comments = 0
        """Comment lines (keep-alives) read so far."""
        self.progress = 0
        """Grows with every line, or piece of one, that is not a keep-alive (a comment, or a line of an
        event named `ping`, Anthropic's keep-alive): what a stall check compares."""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Take the next bytes; return the events they complete, in order."""
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._pending_cr = False
        self.scanned += len(chunk)
        if b"\r" in chunk:
            self._pending_cr = chunk.endswith(b"\r")
            chunk = chunk.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = chunk.split(b"\n")
        tail = lines.pop()
        events: list[SSEEvent] = []
        if lines:
            if self._partial:
                self._partial.append(lines[0])
                lines[0] = b"".join(self._partial)
                self._partial, self._partial_size = [], 0
            for raw in lines:
                event = self._line(raw)
                if event is not None:
                    events.append(event)
        if tail:
            self._partial.append(tail)
            self._partial_size += len(tail)
            if not tail.startswith(b":"):
                self.progress += 1
            if self._limit is not None and self._size + self._partial_size > self._limit:
                raise SSELimitExceeded(self._limit)
        return events

    def _line(self, raw: bytes) -> SSEEvent | None:
        if not raw:
            if not self._data:
                if self._event == "ping":
                    self.progress -= self._lines
                self._event, self._size, self._lines = "", 0, 0
                return None
            event = SSEEvent(self._event or "message", "\n".join(self._data), self._id, self._size)
            if event.event == "ping":
                self.progress -= self._lines
            self._event, self._data, self._size, self._lines = "", [], 0, 0
            return event
        if raw.startswith(b":"):
            self.comments += 1
            return None
        self._size += len(raw) + 1
        self._lines += 1
        self.progress += 1
        if self._limit is not None and self._size > self._limit:
            raise SSELimitExceeded(self._limit)
        name, sep, value = raw.decode("utf-8", errors="replace").partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None
