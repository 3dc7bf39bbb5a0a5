"""Output fields read incrementally from a streamed reply: each field's text as it is written.

A splitter is fed the reply's text deltas and returns `(field, delta)` pieces. Markers (Chat's
`[[ ## name ## ]]`, XML tags, a template's literal text) are found even when split across two
chunks, and never leak into a delta: text that could be the start of a marker is held back until
the next chunk says what it is. A field's deltas joined are its value text as the adapter reads it
(stripped; XML entities and JSON string escapes decoded); typed values arrive as their raw text.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Literal

from imp.adapters.base import Adapter
from imp.signature import Signature

__all__ = ["FieldSplitter", "splitter_for"]

Piece = tuple[str, str]
_XML_ENTITIES = {"&lt;": "<", "&gt;": ">", "&amp;": "&", "&quot;": '"', "&apos;": "'"}
_XML_ENTITY = re.compile("|".join(re.escape(e) for e in _XML_ENTITIES))


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
            self._pos = safe
            return out

    def _safe(self, buf: str, field: str) -> int:
        """Where text that could be the start of a marker begins (the end when none could)."""
        markers = self._markers(field)
        for i in range(max(self._pos, len(buf) - self._holdback), len(buf)):
            tail = " ".join(buf[i:].split()) if not buf[i].isspace() else ""
            if tail and any(m.startswith(tail) for m in markers):
                return i
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


def _chat(signature: Signature) -> FieldSplitter:
    names = [*signature.outputs, "completed"]
    marker = re.compile(r"\[\[ ## (" + "|".join(re.escape(n) for n in names) + r") ## \]\][^\S\n]*")

    def find_open(buf: str, pos: int) -> tuple[str, int, int] | None:
        while (match := marker.search(buf, pos)) is not None:
            if match.group(1) != "completed":
                return match.group(1), match.start(), match.end()
            pos = match.end()
        return None

    def find_close(buf: str, pos: int, field: str) -> tuple[int, int] | None:
        match = marker.search(buf, pos)
        return (match.start(), match.start()) if match is not None else None

    texts = tuple(f"[[ ## {n} ## ]]" for n in names)
    return FieldSplitter(find_open, find_close, lambda field: texts)


def _xml(signature: Signature) -> FieldSplitter:
    names = list(signature.outputs)
    opening = re.compile(r"<(" + "|".join(re.escape(n) for n in names) + r")(\s[^<>]*)?>")

    def find_open(buf: str, pos: int) -> tuple[str, int, int] | None:
        match = opening.search(buf, pos)
        return (match.group(1), match.start(), match.end()) if match is not None else None

    def find_close(buf: str, pos: int, field: str) -> tuple[int, int] | None:
        match = re.compile(rf"</{re.escape(field)}\s*>").search(buf, pos)
        return (match.start(), match.end()) if match is not None else None

    def decode(text: str) -> str:
        return _XML_ENTITY.sub(lambda m: _XML_ENTITIES[m.group(0)], text)

    opens = tuple(f"<{n}>" for n in names) + tuple(f"<{n} " for n in names)

    def markers(field: str) -> tuple[str, ...]:
        return (*opens, f"</{field}>", f"</{field} >") if field else (*opens, *(f"</{n} >" for n in names))

    return FieldSplitter(find_open, find_close, markers, decode)


def _template(adapter: Any, signature: Signature) -> FieldSplitter | None:
    bound = adapter._bind(signature.without(signature.history_field) if signature.history_field else signature)
    form = bound.form
    if form is None:
        (only,) = signature.outputs
        return FieldSplitter(lambda buf, pos: (only, 0, 0) if pos == 0 else None, lambda b, p, f: None, lambda f: ())
    patterns = form.patterns
    names = [f.name for f in form.fields]
    anchors = tuple(" ".join(t.split()) for t in form.texts)

    def anchor(i: int, buf: str, pos: int) -> tuple[int, int] | None:
        pattern = patterns[i]
        if pattern is None:
            return (0, 0) if i == 0 else None
        match = pattern.search(buf, pos)
        return match.span() if match is not None else None

    state = {"next": 0}

    def find_open(buf: str, pos: int) -> tuple[str, int, int] | None:
        for i in range(state["next"], len(names)):
            span = anchor(i, buf, pos)
            if span is not None:
                state["next"] = i + 1
                return names[i], span[0], span[1]
        return None

    def find_close(buf: str, pos: int, field: str) -> tuple[int, int] | None:
        for i in range(names.index(field) + 1, len(names) + 1):
            span = anchor(i, buf, pos)
            if span is not None:
                return span[0], span[0]
        return None

    def markers(field: str) -> tuple[str, ...]:
        later = anchors[names.index(field) + 1 :] if field else anchors
        return tuple(a for a in later if a)

    return FieldSplitter(find_open, find_close, markers)


class JSONSplitter:
    """The top-level keys of a JSON object reply: string values decoded, other values as raw text."""

    def __init__(self, names: frozenset[str]) -> None:
        self._names = names
        self._buf = ""
        self._i = 0
        self._state = "seek"  # seek, key, colon, value, string, raw, after, done
        self._key: list[str] = []
        self._field: str | None = None
        self._depth = 0
        self._in_str = False
        self._raw: list[str] = []

    def close(self) -> list[Piece]:
        """The raw value of a last field left open by a cut reply."""
        if self._state == "raw" and self._field is not None and "".join(self._raw).strip():
            return [(self._field, "".join(self._raw).strip())]
        return []

    def feed(self, chunk: str) -> list[Piece]:
        """The field pieces this chunk completes."""
        self._buf += chunk
        out: list[Piece] = []
        buf, n = self._buf, len(self._buf)
        text: list[str] = []
        while self._i < n:
            c, state = buf[self._i], self._state
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
                    decoded = _json_escape(buf, self._i)
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
                else:
                    (self._key if state == "key" else text).append(c)
            elif state == "colon":
                if c == ":":
                    name = "".join(self._key)
                    self._field = name if name in self._names else None
                    self._state = "value"
            elif state == "value":
                if c == '"':
                    self._state = "string"
                elif not c.isspace():
                    self._state, self._depth, self._in_str, self._raw = "raw", 0, False, []
                    continue
            elif state == "raw":
                if self._in_str:
                    if c == "\\" and self._i + 1 < n:
                        self._raw.append(c + buf[self._i + 1])
                        self._i += 2
                        continue
                    if c == "\\":
                        break
                    self._in_str = c != '"'
                elif c == '"':
                    self._in_str = True
                elif c in "[{":
                    self._depth += 1
                elif c in "]}" and self._depth:
                    self._depth -= 1
                elif c in ",}":
                    value = "".join(self._raw).strip()
                    if value and self._field is not None:
                        out.append((self._field, value))
                    self._state = "keyseek" if c == "," else "done"
                    self._i += 1
                    continue
                self._raw.append(c)
            elif state == "after":
                if c == ",":
                    self._state = "keyseek"
                elif c == "}":
                    self._state = "done"
            self._i += 1
        self._flush(out, text)
        return out

    def _flush(self, out: list[Piece], text: list[str]) -> None:
        if text and self._field is not None:
            out.append((self._field, "".join(text)))
        text.clear()


_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


def _json_escape(buf: str, i: int) -> tuple[str, int] | None:
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

    def __init__(self, inner: FieldSplitter | JSONSplitter, text_field: str, opens: str) -> None:
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


Splitter = FieldSplitter | JSONSplitter | PlainOrFields


def splitter_for(adapter: Adapter, signature: Signature) -> Splitter | None:
    """The incremental reader of this adapter's replies (None: the adapter's form is unknown)."""
    from imp.adapters.chat import ChatAdapter
    from imp.adapters.json import JSONAdapter
    from imp.adapters.template import TemplateAdapter, TemplateJSONAdapter
    from imp.adapters.xml import XMLAdapter

    if not signature.outputs:
        return None
    inner: FieldSplitter | JSONSplitter
    if isinstance(adapter, JSONAdapter | TemplateJSONAdapter):
        inner, opens = JSONSplitter(frozenset(signature.outputs)), "{`"
    elif isinstance(adapter, TemplateAdapter):
        return _template(adapter, signature)
    elif isinstance(adapter, XMLAdapter):
        inner, opens = _xml(signature), "<"
    elif isinstance(adapter, ChatAdapter):
        inner, opens = _chat(signature), "["
    else:
        return None
    text_field = signature.metadata.get("text_field")
    if isinstance(text_field, str) and text_field in signature.outputs:
        return PlainOrFields(inner, text_field, opens)
    return inner
