"""Output fields read incrementally from a streamed reply: each field's text as it is written.

Each adapter says how its replies are split (`Adapter.field_splitter`): a splitter is fed the
reply's text deltas and returns `(field, delta)` pieces. Markers (Chat's `[[ ## name ## ]]`, XML
tags, a template's literal text) are found even when split across two chunks, and never leak into
a delta: text that could be the start of a marker is held back until the next chunk says what it
is. A field's deltas joined are its value text as the adapter reads it (stripped; XML entities and
JSON string escapes decoded); typed values arrive as their raw text. An adapter that says nothing
of its form gets `WholeReply`: its fields arrive whole, read by the adapter itself, when the
reply ends.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal, Protocol

from imp.errors import AdapterParseError
from imp.signature import Signature
from imp.values import render_value

__all__ = [
    "FieldSplitter",
    "JSONSplitter",
    "Piece",
    "PlainOrFields",
    "Splitter",
    "WholeReply",
    "json_escape",
    "prefilled",
    "with_plain_text",
]

Piece = tuple[str, str]
"""A field's name and more of its text."""


class Splitter(Protocol):
    """Reads a streamed reply's text deltas into field pieces."""

    def feed(self, chunk: str) -> list[Piece]:
        """The field pieces this chunk completes."""
        ...

    def close(self) -> list[Piece]:
        """The pieces held back at the end of the reply."""
        ...


class FieldSplitter:
    """The reply read as marked places: a field opens at its marker and ends at the next one."""

    def __init__(
        self,
        find_open: Callable[[str, int], tuple[str, int, int] | None],
        find_close: Callable[[str, int, str], tuple[int, int] | None],
        markers: Callable[[str], tuple[str, ...]],
        decode: Callable[[str], str] | None = None,
    ) -> None:
        self._find_open = find_open
        self._find_close = find_close
        self._markers = markers
        self._holdback = max((len(m) for m in markers("")), default=0)
        self._decode = decode
        self._buf = ""
        self._pos = 0
        self._field: str | None = None
        self._started = False
        self._spaces = ""
        self._starts: dict[str, tuple[tuple[str, ...], re.Pattern[str] | None]] = {}

    def feed(self, chunk: str) -> list[Piece]:
        """The field pieces this chunk completes."""
        self._buf += chunk
        return self._scan(final=False)

    def close(self) -> list[Piece]:
        """The pieces held back at the end of the reply."""
        return self._scan(final=True)

    def _scan(self, *, final: bool) -> list[Piece]:
        out: list[Piece] = []
        buf = self._buf
        while True:
            if self._field is None:
                found = self._find_open(buf, self._pos)
                if found is None:
                    return out
                self._field, _, self._pos = found
                self._started, self._spaces = False, ""
                continue
            close = self._find_close(buf, self._pos, self._field)
            if close is not None:
                self._emit(out, buf[self._pos : close[0]], end=True)
                self._field, self._pos = None, close[1]
                continue
            safe = len(buf) if final else self._safe(buf, self._field)
            if self._decode is not None and not final:
                amp = buf.rfind("&", self._pos, safe)
                if amp >= 0 and ";" not in buf[amp:safe]:
                    safe = amp  # an entity cut by the chunk's end
            self._emit(out, buf[self._pos : safe], end=final)
            # Keep only what is not read yet: the reply is never held (or copied per chunk) whole.
            self._buf, self._pos = buf[safe:], 0
            return out

    def _safe(self, buf: str, field: str) -> int:
        """Where text that could be the start of a marker begins (the end when none could)."""
        found = self._starts.get(field)
        if found is None:
            markers = tuple(m for m in self._markers(field) if m)
            firsts = "".join(sorted({m[0] for m in markers}))
            found = self._starts[field] = (markers, re.compile(f"[{re.escape(firsts)}]") if firsts else None)
        markers, starts = found
        if starts is None:
            return len(buf)
        # Only where a marker's first character is: a chunk of plain text costs one C-level search.
        at = starts.search(buf, max(self._pos, len(buf) - self._holdback))
        while at is not None:
            i = at.start()
            tail = " ".join(buf[i:].split())
            if any(m.startswith(tail) for m in markers):
                return i
            at = starts.search(buf, i + 1)
        return len(buf)

    def _emit(self, out: list[Piece], text: str, *, end: bool) -> None:
        field = self._field
        assert field is not None
        if not self._started:
            text = text.lstrip()
            if not text:
                return
            self._started = True
        body = text.rstrip()
        if body:
            piece = self._spaces + body
            out.append((field, self._decode(piece) if self._decode else piece))
            self._spaces = ""
        self._spaces += text[len(body) :]
        if end:
            self._spaces = ""


_RAW_STOP = re.compile(r'["\[\]{},]')
"""Where a non-string value's text may change state: a string, a nesting, its end."""
_RAW_STRING_STOP = re.compile(r'["\\]')
"""Where a string inside a non-string value may end or escape."""


class JSONSplitter:
    """The top-level keys of a JSON object reply: string values decoded, other values (numbers,
    lists, objects, ...) as their raw text, each streamed as it is written."""

    def __init__(self, names: frozenset[str]) -> None:
        self._names = names
        self._buf = ""
        self._i = 0
        self._state = "seek"  # seek, keyseek, key, colon, value, string, raw, after, done
        self._key: list[str] = []
        self._field: str | None = None
        self._depth = 0
        self._in_str = False
        self._escape = False
        self._spaces = ""

    def close(self) -> list[Piece]:
        """Nothing is held back but whitespace, which the value's end drops."""
        return []

    def feed(self, chunk: str) -> list[Piece]:
        """The field pieces this chunk completes."""
        self._buf += chunk
        out: list[Piece] = []
        buf, n = self._buf, len(self._buf)
        text: list[str] = []
        while self._i < n:
            state = self._state
            if state == "raw":
                self._raw(buf, n, out)
                continue
            c = buf[self._i]
            if state == "seek":
                if c == "{":
                    self._state = "keyseek"
            elif state == "keyseek":
                if c == '"':
                    self._state, self._key = "key", []
                elif c == "}":
                    self._state = "done"
            elif state == "key" or state == "string":
                if c == "\\":
                    decoded = json_escape(buf, self._i)
                    if decoded is None:
                        break  # an escape cut by the chunk's end
                    char, width = decoded
                    (self._key if state == "key" else text).append(char)
                    self._i += width
                    continue
                if c == '"':
                    if state == "key":
                        self._state = "colon"
                    else:
                        self._flush(out, text)
                        self._state = "after"
                elif state == "string":
                    # The run of plain characters up to the next quote or escape, in one slice.
                    stop = _RAW_STRING_STOP.search(buf, self._i)
                    end = stop.start() if stop is not None else n
                    text.append(buf[self._i : end])
                    self._i = end
                    continue
                else:
                    self._key.append(c)
            elif state == "colon":
                if c == ":":
                    name = "".join(self._key)
                    self._field = name if name in self._names else None
                    self._state = "value"
            elif state == "value":
                if c == '"':
                    self._state = "string"
                elif not c.isspace():
                    self._state, self._depth, self._in_str, self._escape, self._spaces = "raw", 0, False, False, ""
                    continue
            elif state == "after":
                if c == ",":
                    self._state = "keyseek"
                elif c == "}":
                    self._state = "done"
            self._i += 1
        self._flush(out, text)
        # Keep only what is not read yet: the reply is never held (or copied per chunk) whole.
        self._buf, self._i = buf[self._i :], 0
        return out

    def _raw(self, buf: str, n: int, out: list[Piece]) -> None:
        """Read a non-string value up to its end or the buffer's, and send what was read."""
        start = i = self._i
        ended = False
        while i < n:
            if self._in_str:
                if self._escape:
                    self._escape = False
                    i += 1
                    continue
                stop = _RAW_STRING_STOP.search(buf, i)
                if stop is None:
                    i = n
                    break
                i = stop.start()
                if buf[i] == "\\":
                    self._escape = True
                else:
                    self._in_str = False
                i += 1
                continue
            stop = _RAW_STOP.search(buf, i)
            if stop is None:
                i = n
                break
            i = stop.start()
            c = buf[i]
            if c == '"':
                self._in_str = True
            elif c in "[{":
                self._depth += 1
            elif self._depth:
                if c in "]}":
                    self._depth -= 1
            elif c in ",}":
                ended = True
                break
            i += 1
        self._emit_raw(buf[start:i], out)
        if ended:
            self._spaces = ""
            self._state = "keyseek" if buf[i] == "," else "done"
            i += 1
        self._i = i

    def _emit_raw(self, text: str, out: list[Piece]) -> None:
        body = text.rstrip()
        if body and self._field is not None:
            out.append((self._field, self._spaces + body))
            self._spaces = ""
        self._spaces = text[len(body) :] if body else self._spaces + text

    def _flush(self, out: list[Piece], text: list[str]) -> None:
        if self._field is not None:
            joined = "".join(text)
            if joined:
                out.append((self._field, joined))
        text.clear()


_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def json_escape(buf: str, i: int) -> tuple[str, int] | None:
    """The character a JSON escape at `buf[i]` stands for and its width, or None when it is cut."""
    if i + 1 >= len(buf):
        return None
    kind = buf[i + 1]
    if kind != "u":
        return _ESCAPES.get(kind, kind), 2
    if i + 6 > len(buf):
        return None
    code = int(buf[i + 2 : i + 6], 16) if re.fullmatch(r"[0-9a-fA-F]{4}", buf[i + 2 : i + 6]) else 0xFFFD
    if 0xD800 <= code < 0xDC00:  # a surrogate pair: the low half follows
        if i + 12 > len(buf):
            return None
        low = buf[i + 8 : i + 12]
        if buf[i + 6 : i + 8] == "\\u" and re.fullmatch(r"[0-9a-fA-F]{4}", low):
            return chr(0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00)), 12
    return chr(code), 6


class PlainOrFields:
    """A reply that may be plain text, which the adapter reads as its `text_field` (a loop step's
    answer or thought), or fields in the adapter's form: its first visible character decides."""

    def __init__(self, inner: Splitter, text_field: str, opens: str) -> None:
        self._inner = inner
        self._field = text_field
        self._opens = opens
        self._mode: Literal["undecided", "fields", "plain"] = "undecided"
        self._held = ""
        self._spaces = ""
        self._started = False

    def feed(self, chunk: str) -> list[Piece]:
        """The field pieces this chunk completes."""
        if self._mode == "undecided":
            self._held += chunk
            visible = self._held.lstrip()
            if not visible:
                return []
            self._mode = "fields" if visible[0] in self._opens else "plain"
            chunk, self._held = self._held, ""
        if self._mode == "fields":
            return self._inner.feed(chunk)
        return self._plain(chunk)

    def close(self) -> list[Piece]:
        """The pieces held back at the end of the reply."""
        return self._inner.close() if self._mode == "fields" else []

    def _plain(self, chunk: str) -> list[Piece]:
        if not self._started:
            chunk = chunk.lstrip()
            if not chunk:
                return []
            self._started = True
        body = chunk.rstrip()
        out: list[Piece] = []
        if body:
            out.append((self._field, self._spaces + body))
            self._spaces = ""
        self._spaces += chunk[len(body) :]
        return out


class WholeReply:
    """The splitter of an adapter that does not say how its replies are split: nothing while the reply
    is written, then each output the adapter reads from the whole reply, as its text."""

    def __init__(self, parse: Callable[[Signature, str], dict[str, Any]], signature: Signature) -> None:
        self._parse = parse
        self._signature = signature
        self._chunks: list[str] = []

    def feed(self, chunk: str) -> list[Piece]:
        self._chunks.append(chunk)
        return []

    def close(self) -> list[Piece]:
        try:
            values = self._parse(self._signature, "".join(self._chunks))
        except AdapterParseError:
            return []  # the request's own reading says what is wrong with the reply
        pieces: list[Piece] = []
        for name, field in self._signature.outputs.items():
            value = values.get(name)
            if value is not None:
                text = value if isinstance(value, str) else render_value(value, field)
                if text:
                    pieces.append((name, text))
        return pieces


def with_plain_text(inner: Splitter, signature: Signature, opens: str) -> Splitter:
    """`inner`, or, for a signature whose `text_field` takes a marker-free reply (a loop step), a splitter
    that reads a reply starting with none of `opens` as that field's plain text."""
    text_field = signature.metadata.get("text_field")
    if isinstance(text_field, str) and text_field in signature.outputs:
        return PlainOrFields(inner, text_field, opens)
    return inner


def prefilled(splitter: Splitter, prefill: str | None) -> Splitter:
    """`splitter` having read a template's prefill: the reply the model writes goes on from it."""
    if prefill:
        splitter.feed(prefill)
    return splitter
