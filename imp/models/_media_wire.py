"""Media on the wire: what a provider takes (kinds, types, sizes, URLs), refused before sending,
and a request body that streams the bytes' base64 instead of copying them.

Each client writes a media value in its own shape; what they share is here. `MediaRule` says what
a provider takes of one kind; `MediaWriter` checks each value against its client's rules (naming
where the value stands, the provider and the limit) and leaves an `Encoded` placeholder in the
body where the base64 goes. `encode_body` then serializes the body: a body without media is the
same bytes as before; one with media is a `StreamedBody` that yields the JSON around each value
and encodes the value's bytes in 48 KB slices as the request is sent, so a request adds no copy
of an image's bytes (nor of their base64) to memory. The cache key reads an `Encoded` as the
value's SHA-256 (its `str`), never its bytes.
"""

from __future__ import annotations

import binascii
import json
import secrets
from collections.abc import AsyncIterator, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from imp.errors import MediaRefused
from imp.media import Media, MediaKind, describe_size
from imp.models._response import LMCapabilities
from imp.records import ContentPart, MediaPart

__all__ = [
    "ANY_TYPE",
    "Encoded",
    "MediaClient",
    "MediaRule",
    "MediaWriter",
    "StreamedBody",
    "audio_format",
    "encode_body",
    "is_text_document",
    "parts_of",
    "written_parts",
]


class MediaClient(Protocol):
    """What a media writer reads of its client: who it is, where it sends, and the media its model
    declares (each client's writer takes this, not the client's class, so the writers sit below it)."""

    @property
    def provider(self) -> str: ...
    @property
    def model(self) -> str: ...
    @property
    def base_url(self) -> str: ...
    @property
    def default_base_url(self) -> str: ...
    @property
    def capabilities(self) -> LMCapabilities: ...


ANY_TYPE: frozenset[str] = frozenset()
"""A rule's `types` when any media type of the kind is taken."""

_CHUNK = 3 * 16 * 1024
"""Bytes encoded per slice (a multiple of 3, so slices join into one base64 text)."""

_TEXT_TYPES = frozenset({"application/json", "application/xml", "application/x-yaml", "application/yaml"})


def is_text_document(media: Media) -> bool:
    """Whether a document is text a model can read as it is (`text/*`, JSON, XML, YAML)."""
    media_type = media.media_type or ""
    return media.kind == "file" and (media_type.startswith("text/") or media_type in _TEXT_TYPES)


def audio_format(media: Media) -> str | None:
    """The `format` an OpenAI-shaped `input_audio` part names (`wav`, `mp3`), or None for other types."""
    return {"audio/wav": "wav", "audio/mpeg": "mp3"}.get(media.media_type or "")


@dataclass(frozen=True, slots=True)
class MediaRule:
    """What a provider takes of one kind: its media types (empty: any), the largest value, URLs or not."""

    types: frozenset[str] = ANY_TYPE
    max_bytes: int | None = None
    """The largest value taken, in bytes as held (or, with `encoded_limit`, as base64)."""
    encoded_limit: bool = False
    """Whether `max_bytes` counts the base64 text (Anthropic's image limit does)."""
    url: bool = False
    """Whether a URL is sent as it is (else a URL value is refused: imp does not download it)."""


class Encoded:
    """A placeholder in a request body for a media value's base64 (after `prefix`, as in a data URI)."""

    __slots__ = ("media", "prefix")

    def __init__(self, media: Media, prefix: str = "") -> None:
        self.media = media
        self.prefix = prefix

    def __len__(self) -> int:
        size = media_size(self.media)
        return len(self.prefix) + 4 * ((size + 2) // 3)

    def __str__(self) -> str:
        # What a cache key (and anything else that prints a body) reads: the content's digest.
        return f"{self.prefix}<{self.media.kind} sha256:{self.media.sha256}>"

    __repr__ = __str__


def media_size(media: Media) -> int:
    data = media.data
    return 0 if data is None else len(data)


@dataclass(slots=True)
class MediaWriter:
    """Checks each media value of one request against a client's rules and counts the request's totals."""

    provider: str
    rules: Mapping[MediaKind, MediaRule]
    refusal: Mapping[MediaKind, str] = field(default_factory=dict)
    """Why a kind is not taken, by kind (the sentence after "takes no ...")."""
    totals: Mapping[MediaKind, int] = field(default_factory=dict)
    """The most bytes of one kind a request may carry (held bytes)."""
    request_limit: int | None = None
    """The most base64 bytes of media one request may carry (Anthropic's 32 MB request)."""
    _sums: dict[str, int] = field(default_factory=dict)

    def refused(self, part: MediaPart, reason: str) -> MediaRefused:
        """The error for a value this provider cannot take (where it stands, the provider, the value)."""
        return MediaRefused(reason, provider=self.provider, origin=part.origin, media=part.media)

    def check(self, part: MediaPart, *, url_ok: bool | None = None) -> MediaRule:
        """Refuse a value this provider cannot take, naming where it stands; its rule when it can."""
        media = part.media
        rule = self.rules.get(media.kind)
        if rule is None:
            why = self.refusal.get(media.kind) or f"{self.provider} takes no {media.noun}s"
            raise self.refused(part, f"{why} (got {media.describe()})")
        typed = media.media_type is not None and (not rule.types or media.media_type in rule.types)
        if media.data is None:
            if not typed and media.media_type is not None and url_ok is not False:
                raise self.refused(part, f"{self._types(rule, media)} ({media.describe()})")
            if not (rule.url if url_ok is None else url_ok):
                raise self.refused(
                    part,
                    f"{self.provider} takes {media.noun}s only as data, not as a URL ({media.describe()}); "
                    "imp does not download it on its own: `await value.fetch()` first",
                )
            return rule
        if not typed:
            raise self.refused(part, self._types(rule, media))
        size = media_size(media)
        counted = 4 * ((size + 2) // 3) if rule.encoded_limit else size
        if rule.max_bytes is not None and counted > rule.max_bytes:
            as_what = " as base64" if rule.encoded_limit else ""
            raise self.refused(
                part,
                f"{media.media_type} of {describe_size(counted)}{as_what} is over {self.provider}'s "
                f"{describe_size(rule.max_bytes)} limit for one {media.noun}",
            )
        self._count(part, size)
        return rule

    def _types(self, rule: MediaRule, media: Media) -> str:
        return f"{self.provider} takes {media.noun}s of type {', '.join(sorted(rule.types))}, not {media.media_type}"

    def _count(self, part: MediaPart, size: int) -> None:
        media = part.media
        kind_total = self._sums.get(media.kind, 0) + size
        self._sums[media.kind] = kind_total
        limit = self.totals.get(media.kind)
        if limit is not None and kind_total > limit:
            raise self.refused(
                part,
                f"the request's {media.noun}s come to {describe_size(kind_total)}, over {self.provider}'s "
                f"{describe_size(limit)} limit for one request",
            )
        encoded = self._sums.get("", 0) + 4 * ((size + 2) // 3)
        self._sums[""] = encoded
        if self.request_limit is not None and encoded > self.request_limit:
            raise self.refused(
                part,
                f"the request's media come to {describe_size(encoded)} as base64, over {self.provider}'s "
                f"{describe_size(self.request_limit)} request limit",
            )

    def decoded(self, part: MediaPart) -> str:
        """A text document's text (refused when it is not UTF-8)."""
        data = part.media.data or b""
        try:
            return data.decode("utf-8")
        except UnicodeDecodeError:
            raise self.refused(part, f"{part.media.describe()} is not UTF-8 text") from None

    def text_of(self, part: MediaPart) -> str:
        """A text document's text, as a model reads it inline (for providers that take no files)."""
        text = self.decoded(part)
        name = part.media.name or "document"
        return f"[document {name} ({part.media.media_type})]\n{text}\n[end of document {name}]"


def written_parts(
    content: object,
    text_type: str,
    media: Callable[[MediaPart], dict[str, Any] | str],
    known: Callable[[Mapping[str, Any]], dict[str, Any]] = dict,
) -> list[dict[str, Any]]:
    """A message's content as a provider's parts: runs of text joined into one `text_type` part, each
    media value written by `media` (as a part, or as text that joins the run), each provider-shaped
    part by `known`; empty text parts left out."""
    out: list[dict[str, Any]] = []
    text: list[str] = []
    for part in parts_of(content):
        written = media(part) if isinstance(part, MediaPart) else part if isinstance(part, str) else known(part)
        if isinstance(written, str):
            text.append(written)
            continue
        if text:
            out.append({"type": text_type, "text": "".join(text)})
            text = []
        out.append(written)
    if text:
        out.append({"type": text_type, "text": "".join(text)})
    return [p for p in out if p.get("type") != text_type or p.get("text")]


def parts_of(content: object) -> list[ContentPart]:
    """A message's content as a list of parts (a bare media value becomes a `MediaPart`)."""
    if content is None or content == "":
        return []
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [MediaPart(p) if isinstance(p, Media) else p for p in content]
    return [str(content)]


# --- the body ----------------------------------------------------------------------------------------


class StreamedBody:
    """A JSON request body whose media bytes are base64-encoded slice by slice as it is sent.

    `len()` is its exact size (sent as `content-length`, so no chunked encoding); it can be
    iterated again for a retry.
    """

    __slots__ = ("_length", "_pieces")

    def __init__(self, pieces: list[bytes | Encoded]) -> None:
        self._pieces = pieces
        self._length = sum(len(p) for p in pieces)

    def __len__(self) -> int:
        return self._length

    async def __aiter__(self) -> AsyncIterator[bytes]:
        for piece in self._pieces:
            if isinstance(piece, bytes):
                yield piece
                continue
            if piece.prefix:
                yield piece.prefix.encode()
            data = memoryview(piece.media.data or b"")
            for start in range(0, len(data), _CHUNK):
                yield binascii.b2a_base64(data[start : start + _CHUNK], newline=False)

    def read(self) -> bytes:
        """The whole body at once (for a test or a debugger: a request never calls this)."""
        out = bytearray()
        for piece in self._pieces:
            if isinstance(piece, bytes):
                out += piece
            else:
                out += piece.prefix.encode() + binascii.b2a_base64(piece.media.data or b"", newline=False)
        return bytes(out)


def encode_body(body: Mapping[str, Any]) -> bytes | StreamedBody:
    """A request body's bytes, as `json.dumps` writes them; a `StreamedBody` when it holds media."""
    try:  # the usual body, without media: the bytes json.dumps writes
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()
    except TypeError:
        pass
    found: list[Encoded] = []
    token = ""

    def placeholder(value: object) -> str:
        nonlocal token
        if not isinstance(value, Encoded):
            raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")
        if not token:
            token = f"imp-media-{secrets.token_hex(8)}-"
        found.append(value)
        return f"{token}{len(found) - 1}"

    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"), default=placeholder)
    if not found:
        return text.encode()
    pieces: list[bytes | Encoded] = []
    chunks = text.split(f'"{token}')
    # Each placeholder was written as the JSON string "<token><n>": the text up to it keeps its opening
    # quote, the value's prefix and base64 take its place, and the text after it starts with its closing quote.
    pieces.append(chunks[0].encode() + b'"')
    last = len(chunks) - 1
    for index, chunk in enumerate(chunks[1:], start=1):
        number, _, rest = chunk.partition('"')
        pieces.append(found[int(number)])
        pieces.append(b'"' + rest.encode() + (b'"' if index < last else b""))
    return StreamedBody(pieces)
