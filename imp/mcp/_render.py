"""What the model reads for an MCP tool result: text and structured content, images kept aside."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from mcp import types

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
    - `content`: every content block as the server sent it (plain dicts).
    """

    structured: dict[str, Any] | None
    images: tuple[MCPImage, ...]
    content: tuple[dict[str, Any], ...]

    def __new__(
        cls,
        text: str,
        *,
        structured: dict[str, Any] | None = None,
        images: tuple[MCPImage, ...] = (),
        content: tuple[dict[str, Any], ...] = (),
    ) -> MCPResult:
        self = super().__new__(cls, text)
        self.structured = structured
        self.images = images
        self.content = content
        return self

    @property
    def text(self) -> str:
        """The text the model reads, as a plain `str`."""
        return str.__str__(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (self.text, self.structured, self.images, self.content))


def _rebuild(
    text: str, structured: dict[str, Any] | None, images: tuple[MCPImage, ...], content: tuple[dict[str, Any], ...]
) -> MCPResult:
    return MCPResult(text, structured=structured, images=images, content=content)


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


def _says(text: str, value: object) -> bool:
    if isinstance(value, str) and text.strip() == value.strip():
        return True
    try:
        return bool(json.loads(text) == value)
    except ValueError:
        return False


def _said(texts: list[str], structured: Mapping[str, object]) -> bool:
    """Whether a text block already says the structured content: as JSON, or (for a one-key
    wrapper such as FastMCP's `{"result": value}`) as the value itself."""
    values: list[Any] = [structured]
    if len(structured) == 1:
        values.append(next(iter(structured.values())))
    return any(_says(text, value) for text in texts for value in values)


def render_result(result: types.CallToolResult) -> MCPResult:
    """The result as the model reads it: each block's text on its own line, then the structured
    content as JSON unless a text block already says the same (`_said`)."""
    images: list[MCPImage] = []
    parts = [_block_text(block, images) for block in result.content]
    texts = [block.text for block in result.content if isinstance(block, types.TextContent)]
    structured = result.structuredContent
    if structured is not None and not _said(texts, structured):
        parts.append(json.dumps(structured, ensure_ascii=False))
    content = tuple(block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in result.content)
    return MCPResult(
        "\n".join(part for part in parts if part),
        structured=dict(structured) if structured is not None else None,
        images=tuple(images),
        content=content,
    )
