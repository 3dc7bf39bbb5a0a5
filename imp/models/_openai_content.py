"""Chat Completions content: text, images, audio and documents as OpenAI's parts, for OpenAI,
OpenRouter and the OpenAI-compatible servers (llama.cpp, vLLM, Ollama, ...).

A user message with media becomes a list of parts: `text`, `image_url` (a URL or a data URI),
`input_audio` (base64 WAV or MP3) and `file` (a PDF as base64 `file_data` with a `filename`).
A tool message takes text only in this API, so a tool result holding media is written as its
text (each value shown by its description) and the values follow in one user message after the
run of tool messages, each named by its description and call id.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from imp.media import MediaKind
from imp.models._media_wire import (
    ANY_TYPE,
    Encoded,
    MediaClient,
    MediaRule,
    MediaWriter,
    audio_format,
    is_text_document,
    parts_of,
    written_parts,
)
from imp.records import MediaPart, content_text

__all__ = ["NO_VISION", "ChatContent", "chat_media_writer"]

_MB = 1024 * 1024
# OpenAI documents image inputs as PNG, JPEG, WebP and non-animated GIF, up to 20 MB per image and
# 50 MB of image bytes per request, given as a URL or a base64 data URI.
_OPENAI_IMAGE = MediaRule(frozenset({"image/png", "image/jpeg", "image/webp", "image/gif"}), 20 * _MB, url=True)
# OpenAI documents `input_audio` as base64 WAV or MP3, with no URL form, on its audio models.
_OPENAI_AUDIO = MediaRule(frozenset({"audio/wav", "audio/mpeg"}))
# OpenAI documents PDFs in Chat Completions as a `file` part with base64 `file_data`: "inputs by file
# URL are not supported for chat completions"; up to 100 pages and 32 MB across the files of a request.
_OPENAI_FILE = MediaRule(frozenset({"application/pdf"}))
_OPENAI_TOTALS: Mapping[MediaKind, int] = {"image": 50 * _MB, "file": 32 * _MB}

# What the compatible servers document for `/v1/chat/completions`: llama.cpp's server (with a model's
# multimodal projector) and vLLM take `image_url` (a data URI or a URL) and `input_audio` (WAV, MP3) on
# models that read them; Ollama takes images (base64 or a URL) and no audio. None documents `file`
# parts: a text document is written into the text, a PDF is refused. Each server decodes images
# itself, so any image type is passed on; sizes are the server's own settings.
_COMPATIBLE: Mapping[MediaKind, MediaRule] = {"image": MediaRule(ANY_TYPE, url=True), "audio": _OPENAI_AUDIO}
_COMPATIBLE_REFUSAL: Mapping[MediaKind, str] = {
    "file": "an OpenAI-compatible server takes no file parts (a text document is sent as text; a PDF is not)",
}

# OpenAI's models that read no images (nor PDFs, which are read as page images); only the audio models
# read audio. Declare others with `capabilities=imp.LMCapabilities(media=...)`.
NO_VISION = re.compile(
    r"^(gpt-3\.5|gpt-4(-0314|-0613|-32k.*)?$|o1-mini|o1-preview|o3-mini|gpt-4o(-mini)?-(audio|realtime|search)"
    r"|gpt-audio|gpt-realtime|davinci|babbage)"
)


_VISUAL: tuple[MediaKind, ...] = ("image", "file")


def chat_media_writer(lm: MediaClient) -> MediaWriter:
    """What this client takes: OpenAI's documented limits on OpenAI and OpenRouter, the compatible
    servers' documented part shapes elsewhere; narrowed (or widened) by `capabilities.media`."""
    official = lm.base_url == lm.default_base_url.rstrip("/")
    declared = lm.capabilities.media
    rules: dict[MediaKind, MediaRule]
    refusal: dict[MediaKind, str] = {}
    if official:
        rules = {"image": _OPENAI_IMAGE, "audio": _OPENAI_AUDIO, "file": _OPENAI_FILE}
        if declared is None and lm.provider == "openai":
            if NO_VISION.match(lm.model):
                for kind in _VISUAL:
                    del rules[kind]
                    refusal[kind] = f"openai's {lm.model} reads no images or PDFs"
            if "audio" not in lm.model:
                del rules["audio"]
                refusal["audio"] = f"openai's {lm.model} reads no audio (OpenAI's audio models do: gpt-audio, ...)"
    else:
        rules = dict(_COMPATIBLE)
        refusal.update(_COMPATIBLE_REFUSAL)
        if declared is not None and "file" in declared:
            rules["file"] = _OPENAI_FILE
    if declared is not None:
        for kind in list(rules):
            if kind not in declared:
                del rules[kind]
                refusal[kind] = f"{lm.model} at {lm.base_url} is declared to take no {kind}s (capabilities.media)"
    label = lm.provider if official else f"{lm.provider} at {lm.base_url}"
    return MediaWriter(label, rules, refusal, totals=_OPENAI_TOTALS if official else {})


class ChatContent:
    """Writes one request's message contents, keeping each tool result's media to send after its run."""

    __slots__ = ("_lm", "_writer", "carried")

    def __init__(self, lm: MediaClient) -> None:
        self._lm = lm
        self._writer: MediaWriter | None = None
        self.carried: dict[int, list[dict[str, Any]]] = {}
        """Parts of a tool result's media, by the identity of its written tool message."""

    @property
    def writer(self) -> MediaWriter:
        if self._writer is None:
            self._writer = chat_media_writer(self._lm)
        return self._writer

    def placed(self, messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The written messages with one user message after each run of tool messages whose results
        held media, carrying those media (a tool message must follow its call directly)."""
        out: list[dict[str, Any]] = []
        waiting: list[dict[str, Any]] = []
        for message in messages:
            if waiting and message["role"] != "tool":
                out.append({"role": "user", "content": waiting})
                waiting = []
            out.append(message)
            waiting.extend(self.carried.get(id(message), ()))
        if waiting:
            out.append({"role": "user", "content": waiting})
        return out

    def content(self, role: str, content: list[Any]) -> Any:
        """A user, system or assistant message's list `content` in this API's shape."""
        if role != "user":
            return content_text(content)
        parts = written_parts(content, "text", self._media)
        if all(p["type"] == "text" for p in parts):  # no media after all: the plain string
            return "".join(str(p["text"]) for p in parts)
        return parts

    def tool_content(self, content: list[Any], call_id: str) -> tuple[str, list[dict[str, Any]]]:
        """A tool message's text (each media value by its description), and the parts to send after it."""
        media = [p for p in parts_of(content) if isinstance(p, MediaPart)]
        carried: list[dict[str, Any]] = []
        for part in media:
            written = self._media(part)
            if isinstance(written, str):
                carried.append({"type": "text", "text": f"{part} from tool call {call_id}:\n{written}"})
                continue
            carried.append({"type": "text", "text": f"{part} from tool call {call_id}:"})
            carried.append(written)
        shown = content_text(content)
        return (f"{shown}\n(the media are in the next message)" if media else shown), carried

    def _media(self, part: MediaPart) -> dict[str, Any] | str:
        """One media value as a part (a text document as its text, where no file part is taken)."""
        media = part.media
        writer = self.writer
        file_rule = writer.rules.get("file")
        if is_text_document(media) and (file_rule is None or media.media_type not in file_rule.types):
            if media.data is None:  # a text document by URL, where none is taken: refused, saying why
                writer.check(part, url_ok=False)
            return writer.text_of(part)
        writer.check(part)
        if media.kind == "image":
            source: Any = media.url if media.data is None else Encoded(media, f"data:{media.media_type};base64,")
            return {"type": "image_url", "image_url": {"url": source}}
        if media.kind == "audio":
            return {"type": "input_audio", "input_audio": {"data": Encoded(media), "format": audio_format(media)}}
        extension = (media.media_type or "application/pdf").rsplit("/", 1)[-1]
        return {
            "type": "file",
            "file": {
                "filename": media.name or f"document.{extension}",
                "file_data": Encoded(media, f"data:{media.media_type};base64,"),
            },
        }
