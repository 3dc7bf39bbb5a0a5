"""What the model reads for an MCP tool result: text and structured content, images kept aside."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from imp._json import loads_strict
from imp.media import Audio, File, Image, Media

__all__ = ["MCPImage", "MCPResult", "render_result"]


@dataclass(frozen=True, slots=True)
class MCPImage:
    """An image an MCP tool returned: base64 `data` and its `mime_type`, for providers that take images."""

    data: str
    mime_type: str

    def bytes(self) -> bytes:
        """The decoded image."""
        return base64.b64decode(self.data)


class MCPResult(str):
    """An MCP tool's answer: the text the model reads (it *is* that string), with the rest kept.

    - `structured`: the `structuredContent` object, or None;
    - `images`: the images, as `MCPImage` values (the text shows a placeholder for each);
    - `content`: every content block as the server sent it (plain dicts);
    - `parts`: what the model reads, in order: text, and each image, audio clip or document as an
      `imp.Image` / `imp.Audio` / `imp.File`, so a provider that takes media gets them as media.
    """

    structured: dict[str, Any] | None
    images: tuple[MCPImage, ...]
    content: tuple[dict[str, Any], ...]
    parts: tuple[str | Media, ...]

    def __new__(
        cls,
        text: str,
        *,
        structured: dict[str, Any] | None = None,
        images: tuple[MCPImage, ...] = (),
        content: tuple[dict[str, Any], ...] = (),
        parts: tuple[str | Media, ...] = (),
    ) -> MCPResult:
        self = super().__new__(cls, text)
        self.structured = structured
        self.images = images
        self.content = content
        self.parts = parts or (text,)
        return self

    def content_parts(self) -> list[str | Media]:
        """The result as the model reads it, its media as values (how an adapter places them)."""
        return list(self.parts)

    @property
    def text(self) -> str:
        """The text the model reads, as a plain `str`."""
        return str.__str__(self)

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (self.text, self.structured, self.images, self.content, self.parts))


def _rebuild(
    text: str,
    structured: dict[str, Any] | None,
    images: tuple[MCPImage, ...],
    content: tuple[dict[str, Any], ...],
    parts: tuple[str | Media, ...] = (),
) -> MCPResult:
    return MCPResult(text, structured=structured, images=images, content=content, parts=parts)


def _size(data: str) -> str:
    try:
        count = len(base64.b64decode(data, validate=False))
    except (binascii.Error, ValueError):
        return "?"
    return f"{count} bytes"


def _block_text(block: Mapping[str, object], images: list[MCPImage]) -> str:
    """One content block (its wire form) as the model reads it."""
    kind = block.get("type")
    if kind == "text":
        return str(block.get("text", ""))
    mime_type = str(block.get("mimeType") or "")
    data = str(block.get("data") or "")
    if kind == "image":
        images.append(MCPImage(data, mime_type))
        return f"[image {len(images)}: {mime_type}, {_size(data)}]"
    if kind == "audio":
        return f"[audio: {mime_type}, {_size(data)}]"
    if kind == "resource_link":
        name = f" ({block['name']})" if block.get("name") else ""
        return f"[resource: {block.get('uri')}{name}]"
    resource = block.get("resource")
    if kind == "resource" and isinstance(resource, Mapping):
        if isinstance(resource.get("text"), str):
            return str(resource["text"])
        return f"[resource: {resource.get('uri')}, {resource.get('mimeType') or 'binary'}]"
    return f"[{kind or 'unknown'} content]"


def _says(text: str, value: object) -> bool:
    if isinstance(value, str) and text.strip() == value.strip():
        return True
    try:
        return bool(loads_strict(text) == value)  # bounded: a server's text may be nested to crash the decoder
    except ValueError:
        return False


def _said(texts: list[str], structured: Mapping[str, object]) -> bool:
    """Whether a text block already says the structured content: as JSON, or (for a one-key
    wrapper such as FastMCP's `{"result": value}`) as the value itself."""
    values: list[object] = [structured]
    if len(structured) == 1:
        values.append(next(iter(structured.values())))
    return any(_says(text, value) for text in texts for value in values)


def _block_media(block: Mapping[str, object]) -> Media | None:
    """An image, audio or blob block's bytes (its wire form) as a media value, or None when they
    cannot be read as one (the placeholder text stands for it)."""
    kind = block.get("type")
    resource = block.get("resource")
    if kind in ("image", "audio"):
        data, mime = block.get("data"), str(block.get("mimeType") or "")
    elif kind == "resource" and isinstance(resource, Mapping) and isinstance(resource.get("blob"), str):
        data, mime = resource["blob"], str(resource.get("mimeType") or "")
    else:
        return None
    cls = {"image": Image, "audio": Audio}.get(mime.split("/", 1)[0], File)
    try:
        return cls.from_bytes(base64.b64decode(str(data), validate=True), mime or None)
    except (binascii.Error, ValueError, TypeError):
        return None


def render_result(result: Mapping[str, object]) -> MCPResult:
    """The result (its wire form) as the model reads it: each block's text on its own line, then
    the structured content as JSON unless a text block already says the same (`_said`)."""
    images: list[MCPImage] = []
    content = result.get("content")
    blocks = [block for block in content if isinstance(block, Mapping)] if isinstance(content, list | tuple) else []
    parts = [_block_text(block, images) for block in blocks]
    texts = [str(block.get("text", "")) for block in blocks if block.get("type") == "text"]
    structured = result.get("structuredContent")
    if not isinstance(structured, Mapping):
        structured = None
    pieces: list[str | Media] = []
    for block, part in zip(blocks, parts, strict=True):
        media = _block_media(block)
        if media is None and not part:
            continue
        if pieces:
            pieces.append("\n")
        pieces.append(media if media is not None else part)
    if structured is not None and not _said(texts, structured):
        parts.append(json.dumps(structured, ensure_ascii=False))
        pieces.extend(["\n", parts[-1]] if pieces else [parts[-1]])
    return MCPResult(
        "\n".join(part for part in parts if part),
        structured=dict(structured) if structured is not None else None,
        images=tuple(images),
        content=tuple(dict(block) for block in blocks),
        parts=tuple(pieces) if any(isinstance(p, Media) for p in pieces) else (),
    )
