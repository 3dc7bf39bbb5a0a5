"""An incremental Server-Sent Events parser: feed it bytes as they arrive, get whole events out."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["SSEDecoder", "SSEEvent"]


@dataclass(frozen=True, slots=True)
class SSEEvent:
    """One dispatched event: its `event:` name (default "message"), its joined `data:` and `id:`."""

    event: str
    data: str
    id: str | None = None


class SSEDecoder:
    """Splits a byte stream into SSE events, across any chunk boundaries (WHATWG rules).

    Lines end in LF, CR LF or CR; a blank line dispatches; `:` lines are comments (keep-alives);
    `data:` lines join with newlines; an event with no data is not dispatched.
    """

    __slots__ = ("_buffer", "_data", "_event", "_id", "_pending_cr")

    def __init__(self) -> None:
        self._buffer = b""
        self._pending_cr = False
        self._event = ""
        self._data: list[str] = []
        self._id: str | None = None

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        """Take the next bytes; return the events they complete, in order."""
        if self._pending_cr and chunk.startswith(b"\n"):
            chunk = chunk[1:]
        self._pending_cr = False
        buffer = self._buffer + chunk
        if b"\r" in buffer:
            self._pending_cr = buffer.endswith(b"\r")
            buffer = buffer.replace(b"\r\n", b"\n").replace(b"\r", b"\n")
        lines = buffer.split(b"\n")
        self._buffer = lines.pop()
        events: list[SSEEvent] = []
        for raw in lines:
            event = self._line(raw.decode("utf-8", errors="replace"))
            if event is not None:
                events.append(event)
        return events

    def _line(self, line: str) -> SSEEvent | None:
        if not line:
            if not self._data:
                self._event = ""
                return None
            event = SSEEvent(self._event or "message", "\n".join(self._data), self._id)
            self._event = ""
            self._data = []
            return event
        if line.startswith(":"):
            return None
        name, sep, value = line.partition(":")
        if sep and value.startswith(" "):
            value = value[1:]
        if name == "data":
            self._data.append(value)
        elif name == "event":
            self._event = value
        elif name == "id" and "\0" not in value:
            self._id = value
        return None
