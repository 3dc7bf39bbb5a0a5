"""Messages API content: text, images and documents as Anthropic's blocks.

An image is an `image` block and a document a `document` block, each with a `base64` source (the
media type and the data) or a `url` source; a text document is a `document` with a `text` source.
A tool result holding media carries them as blocks inside its `tool_result`, after its text.
Anthropic reads no audio: an audio value is refused before sending.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from imp.media import MediaKind
from imp.models._media_wire import (
    Encoded,
    MediaClient,
    MediaRule,
    MediaWriter,
    is_text_document,
    parts_of,
    written_parts,
)
from imp.records import MediaPart, content_text

__all__ = ["AnthropicContent", "anthropic_media_writer"]

_MB = 1024 * 1024
# Anthropic documents images as JPEG, PNG, GIF and WebP, as base64 or a URL; the API refuses one whose
# base64 is over 5 MB (and one over 8000x8000 px, which it checks itself).
_IMAGE = MediaRule(frozenset({"image/jpeg", "image/png", "image/gif", "image/webp"}), 5 * _MB, True, url=True)
# Anthropic documents PDFs as base64 or a URL (up to 100 pages), and plain text as a `text` source.
_DOCUMENT = MediaRule(frozenset({"application/pdf"}), url=True)
# Anthropic documents a 32 MB limit on a whole Messages request.
_REQUEST_LIMIT = 32 * _MB
_NO_AUDIO = "anthropic takes no audio (its Messages API reads text, images and PDFs)"


def anthropic_media_writer(lm: MediaClient) -> MediaWriter:
    """Anthropic's documented limits, narrowed by `capabilities.media` when the model declares its own."""
    rules: dict[MediaKind, MediaRule] = {"image": _IMAGE, "file": _DOCUMENT}
    refusal: dict[MediaKind, str] = {"audio": _NO_AUDIO}
    declared = lm.capabilities.media
    if declared is not None:
        for kind in list(rules):
            if kind not in declared:
                del rules[kind]
                refusal[kind] = f"{lm.model} is declared to take no {kind}s (capabilities.media)"
    return MediaWriter(lm.provider, rules, refusal, request_limit=_REQUEST_LIMIT)


class AnthropicContent:
    """Writes one request's content blocks, checking each media value once."""

    __slots__ = ("_lm", "_writer")

    def __init__(self, lm: MediaClient) -> None:
        self._lm = lm
        self._writer: MediaWriter | None = None

    @property
    def writer(self) -> MediaWriter:
        if self._writer is None:
            self._writer = anthropic_media_writer(self._lm)
        return self._writer

    def blocks(self, content: object) -> list[dict[str, Any]]:
        """A user message's content as blocks: text, and each media value where it stands."""
        return written_parts(content, "text", self._media)

    def tool_result(self, content: object) -> str | list[dict[str, Any]]:
        """A `tool_result`'s content: its text, or text and media blocks when it holds media."""
        if not isinstance(content, list):
            return "" if content is None else str(content)
        if not any(isinstance(p, MediaPart) for p in parts_of(content)):
            return content_text(content)
        return self.blocks(content)

    def _media(self, part: MediaPart) -> dict[str, Any]:
        media = part.media
        if media.kind == "file" and media.data is not None and is_text_document(media):
            if "file" not in self.writer.rules:
                self.writer.check(part)
            text = self.writer.decoded(part)
            return {"type": "document", "source": {"type": "text", "media_type": "text/plain", "data": text}}
        self.writer.check(part)
        kind = "image" if media.kind == "image" else "document"
        if media.data is None:
            return {"type": kind, "source": {"type": "url", "url": media.url}}
        source: Mapping[str, Any] = {"type": "base64", "media_type": media.media_type, "data": Encoded(media)}
        return {"type": kind, "source": dict(source)}
