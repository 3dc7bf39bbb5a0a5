"""What the model reads for each kind of MCP content, and what is kept beside it."""

from __future__ import annotations

import base64
import pickle

from mcp import types

from imp.history import ToolResult
from imp.mcp import MCPImage, MCPResult
from imp.mcp._render import render_result
from imp.mcp._sdk import wire
from imp.tools import format_tool_result

PIXEL = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 8).decode()


def _result(*content: types.ContentBlock, structured: dict[str, object] | None = None) -> MCPResult:
    return render_result(wire(types.CallToolResult(content=list(content), structuredContent=structured)))


def test_text_blocks_are_joined_by_lines() -> None:
    result = _result(types.TextContent(type="text", text="one"), types.TextContent(type="text", text="two"))
    assert result == "one\ntwo"
    assert result.structured is None and result.images == ()


def test_structured_content_is_shown_unless_a_text_block_says_the_same() -> None:
    alone = _result(structured={"city": "Lisbon", "high": 21})
    assert alone == '{"city": "Lisbon", "high": 21}'
    assert alone.structured == {"city": "Lisbon", "high": 21}
    both = _result(types.TextContent(type="text", text="Sunny in Lisbon."), structured={"high": 21, "sky": "clear"})
    assert both == 'Sunny in Lisbon.\n{"high": 21, "sky": "clear"}'
    same = _result(types.TextContent(type="text", text='{\n "high": 21\n}'), structured={"high": 21})
    assert same == '{\n "high": 21\n}'
    wrapped = _result(types.TextContent(type="text", text="42"), structured={"result": 42})
    assert wrapped == "42"


def test_images_are_kept_and_named_in_the_text() -> None:
    result = _result(
        types.TextContent(type="text", text="the chart"),
        types.ImageContent(type="image", data=PIXEL, mimeType="image/png"),
        types.AudioContent(type="audio", data=PIXEL, mimeType="audio/wav"),
    )
    assert result == "the chart\n[image 1: image/png, 16 bytes]\n[audio: audio/wav, 16 bytes]"
    assert result.images == (MCPImage(PIXEL, "image/png"),)
    assert [block["type"] for block in result.content] == ["text", "image", "audio"]


def test_resources_are_shown_by_text_or_by_address() -> None:
    result = _result(
        types.EmbeddedResource(
            type="resource",
            resource=types.TextResourceContents(uri="file:///notes.txt", text="remember the milk"),
        ),
        types.EmbeddedResource(
            type="resource",
            resource=types.BlobResourceContents(uri="file:///a.bin", blob=PIXEL, mimeType="application/zip"),
        ),
        types.ResourceLink(type="resource_link", uri="file:///report.pdf", name="report"),
    )
    assert (
        result
        == "remember the milk\n[resource: file:///a.bin, application/zip]\n[resource: file:///report.pdf (report)]"
    )


def test_a_result_is_the_string_the_model_reads_and_survives_a_round_trip() -> None:
    result = _result(types.ImageContent(type="image", data=PIXEL, mimeType="image/png"), structured={"n": 1})
    record = ToolResult("call_1", "chart", result)
    assert format_tool_result(record) == '[image 1: image/png, 16 bytes]\n{"n": 1}'
    assert record.dump()["result"] == result.text
    copy = pickle.loads(pickle.dumps(result))
    assert (copy, copy.images, copy.structured) == (result, result.images, result.structured)
