"""Responses API content: text, images, documents and audio as `input_*` parts.

An image is an `input_image` (a URL or a data URI, `detail: auto`), a document an `input_file`
(base64 `file_data` with a `filename`, or a `file_url`), audio an `input_audio` (base64 WAV or
MP3). A tool result holding media is a `function_call_output` whose `output` is a list of
`input_text`, `input_image` and `input_file` parts; that list takes no audio.
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
    audio_format,
    parts_of,
    written_parts,
)
from imp.models._openai_content import NO_VISION
from imp.records import MediaPart, content_text

__all__ = ["ResponsesContent", "responses_media_writer"]

_MB = 1024 * 1024
# OpenAI documents image inputs as PNG, JPEG, WebP and non-animated GIF, up to 20 MB per image and
# 50 MB of image bytes per request, as a URL or a base64 data URI.
_IMAGE = MediaRule(frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"}), 20 * _MB, url=True)
# OpenAI documents `input_file` for PDFs (text and page images) and for text, code, rich documents,
# presentations and spreadsheets (text only), as base64 `file_data`, a `file_url` or a file id; PDFs
# up to 100 pages and 32 MB across the files of a request.
_FILE = MediaRule(
    frozenset(
        {
            "application/pdf",
            "text/plain",
            "text/markdown",
            "text/html",
            "text/csv",
            "text/tab-separated-values",
            "application/json",
            "application/xml",
            "text/xml",
            "application/rtf",
            "application/msword",
            "application/vnd.openxmlformats-officedocument.wordprocessingml.document",
            "application/vnd.oasis.opendocument.text",
            "application/vnd.ms-powerpoint",
            "application/vnd.openxmlformats-officedocument.presentationml.presentation",
            "application/vnd.ms-excel",
            "application/vnd.openxmlformats-officedocument.spreadsheetml.sheet",
        }
    ),
    url=True,
)
# The Responses API reference lists an `input_audio` part (base64 WAV or MP3, no URL); only OpenAI's
# audio models read it.
_AUDIO = MediaRule(frozenset({"audio/wav", "audio/mpeg"}))
_TOTALS: Mapping[MediaKind, int] = {"image": 50 * _MB, "file": 32 * _MB}


def responses_media_writer(lm: MediaClient) -> MediaWriter:
    """OpenAI's documented limits for this API (its model families on OpenAI itself), narrowed or
    widened by `capabilities.media`."""
    rules: dict[MediaKind, MediaRule] = {"image": _IMAGE, "file": _FILE, "audio": _AUDIO}
    refusal: dict[MediaKind, str] = {}
    declared = lm.capabilities.media
    official = lm.base_url == lm.default_base_url.rstrip("/")
    if declared is None and official:
        if NO_VISION.match(lm.model):
            del rules["image"], rules["file"]
            refusal["image"] = refusal["file"] = f"openai's {lm.model} reads no images or documents"
        if "audio" not in lm.model:
            del rules["audio"]
            refusal["audio"] = f"openai's {lm.model} reads no audio (OpenAI's audio models do)"
    if declared is not None:
        for kind in list(rules):
            if kind not in declared:
                del rules[kind]
                refusal[kind] = f"{lm.model} is declared to take no {kind}s (capabilities.media)"
    return MediaWriter(lm.provider, rules, refusal, totals=_TOTALS if official else {})


class ResponsesContent:
    """Writes one request's `input_*` parts, checking each media value once."""

    __slots__ = ("_lm", "_writer")

    def __init__(self, lm: MediaClient | None) -> None:
        self._lm = lm
        self._writer: MediaWriter | None = None

    @property
    def writer(self) -> MediaWriter:
        if self._writer is None:
            if self._lm is None:
                raise TypeError("media need the client that sends them (input_items(messages, content=...))")
            self._writer = responses_media_writer(self._lm)
        return self._writer

    def user(self, content: object) -> Any:
        """A user message's text, or its parts in this API's spelling."""
        if not isinstance(content, list):
            return "" if content is None else str(content)
        parts = self._parts(content)
        if all(p.get("type") == "input_text" for p in parts):
            return "".join(str(p["text"]) for p in parts)
        return parts

    def tool_output(self, content: object) -> Any:
        """A `function_call_output`'s output: its text, or a list of parts when it holds media."""
        if not isinstance(content, list) or not any(isinstance(p, MediaPart) for p in parts_of(content)):
            return content_text(content)
        for part in parts_of(content):
            if isinstance(part, MediaPart) and part.media.kind == "audio":
                self.writer.check(part)  # refused first when audio is not taken at all
                raise self._no_audio_output(part)
        return self._parts(content)

    def _no_audio_output(self, part: MediaPart) -> Exception:
        return self.writer.refused(
            part, f"{self.writer.provider} takes no audio in a tool's output (only text, images and files)"
        )

    def _parts(self, content: list[Any]) -> list[dict[str, Any]]:
        return written_parts(content, "input_text", self._media, _known_part)

    def _media(self, part: MediaPart) -> dict[str, Any]:
        media = part.media
        self.writer.check(part)
        if media.kind == "image":
            url: Any = media.url if media.data is None else Encoded(media, f"data:{media.media_type};base64,")
            return {"type": "input_image", "image_url": url, "detail": "auto"}
        if media.kind == "audio":
            return {"type": "input_audio", "input_audio": {"data": Encoded(media), "format": audio_format(media)}}
        if media.data is None:
            return {"type": "input_file", "file_url": media.url}
        extension = (media.media_type or "application/pdf").rsplit("/", 1)[-1]
        return {
            "type": "input_file",
            "filename": media.name or f"document.{extension}",
            "file_data": Encoded(media, f"data:{media.media_type};base64,"),
        }


def _known_part(part: Mapping[str, Any]) -> dict[str, Any]:
    """A part given in a provider's shape, in this API's spelling (a chat `image_url` part is read)."""
    kind = part.get("type")
    if kind in (None, "text", "input_text"):
        return {"type": "input_text", "text": str(part.get("text", ""))}
    if kind == "image_url":
        image = part.get("image_url")
        url = image.get("url") if isinstance(image, Mapping) else image
        return {"type": "input_image", "image_url": str(url)}
    return dict(part)  # already an input part of this API (input_image, input_file, ...)
