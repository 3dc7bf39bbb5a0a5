"""What the model reads for an MCP tool result: text and structured content, images kept aside."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp import types

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

    def __reduce__(self) -> tuple[Any, ...]:
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


def _block_text(block: types.ContentBlock, images: list[MCPImage]) -> str:
    if isinstance(block, types.TextContent):
        return block.text
    if isinstance(block, types.ImageContent):
        images.append(MCPImage(block.data, block.mimeType))
        return f"[image {len(images)}: {block.mimeType}, {_size(block.data)}]"
    if isinstance(block, types.AudioContent):
        return f"[audio: {block.mimeType}, {_size(block.data)}]"
    if isinstance(block, types.ResourceLink):
        name = f" ({block.name})" if block.name else ""
        return f"[resource: {block.uri}{name}]"
    resource = block.resource  # an embedded resource
    if isinstance(resource, types.TextResourceContents):
        return resource.text
    return f"[resource: {resource.uri}, {resource.mimeType or 'binary'}]"


def _says(text: str, value: Any) -> bool:
    if isinstance(value, str) and text.strip() == value.strip():
        return True
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False


def _said(texts: list[str], structured: Mapping[str, Any]) -> bool:
    """Whether a text block already says the structured content: as JSON, or (for a one-key
    wrapper such as FastMCP's `{"result": value}`) as the value itself."""
    values: list[Any] = [structured]
    if len(structured) == 1:
        values.append(next(iter(structured.values())))
    return any(_says(text, value) for text in texts for value in values)


def _block_media(block: types.ContentBlock) -> Media | None:
    """An image, audio or blob block's bytes as a media value (None when they cannot be read as one)."""
    if isinstance(block, types.ImageContent | types.AudioContent):
        data, mime = block.data, block.mimeType
    elif isinstance(block, types.EmbeddedResource) and isinstance(block.resource, types.BlobResourceContents):
        data, mime = block.resource.blob, block.resource.mimeType or ""
    else:
        return None
    kind = {"image": Image, "audio": Audio}.get(mime.split("/", 1)[0], File)
    try:
        return kind.from_bytes(base64.b64decode(data, validate=True), mime or None)
    except (binascii.Error, ValueError, TypeError):
        return None  # the placeholder text stands for it


def render_result(result: types.CallToolResult) -> MCPResult:
    """The result as the model reads it: each block's text on its own line, then the structured
    content as JSON unless a text block already says the same (`_said`)."""
    images: list[MCPImage] = []
    parts = [_block_text(block, images) for block in result.content]
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    structured = result.structuredContent
    pieces: list[str | Media] = []
    for block, part in zip(result.content, parts, strict=True):
        media = _block_media(block)
        if media is None and not part:
            continue
        if pieces:
            pieces.append("\n")
        pieces.append(media if media is not None else part)
    if structured is not None and not _said(texts, structured):
        parts.append(json.dumps(structured, ensure_ascii=False))
        pieces.extend(["\n", parts[-1]] if pieces else [parts[-1]])
    content = tuple(block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content)
    text = "\n".join(part for part in parts if part)
    return MCPResult(
        text,
        structured=dict(structured) if structured is not None else None,
        images=tuple(images),
        content=content,
        parts=tuple(pieces) if any(isinstance(p, Media) for p in pieces) else (),
    )
