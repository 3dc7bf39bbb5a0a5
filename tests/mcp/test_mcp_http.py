"""The Streamable HTTP path against the SDK's own server (FastMCP, served by uvicorn in a thread):
tools, headers, structured content, images, error results, and HTTP failures."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from mcp_helpers import run

import imp
from imp.mcp import MCPConnectionError, MCPResult, MCPTools, connect
from imp.tools import ToolCall, ToolResult, format_tool_result, run_tool_calls


def _calls(*calls: tuple[str, dict[str, Any]]) -> list[ToolCall]:
    return [ToolCall(str(i), name, arguments) for i, (name, arguments) in enumerate(calls)]


def test_tools_over_streamable_http(http_server: Callable[..., str], backend: str) -> None:
    url = http_server()
    server = {"name": "remote", "url": url, "headers": {"X-Team": "atlas"}}

    async def body() -> tuple[MCPTools, list[ToolResult]]:
        async with connect([server], trusted=[server]) as tools:
            results = await run_tool_calls(
                _calls(
                    ("echo", {"text": "hello"}),
                    ("forecast", {"city": "Lisbon"}),
                    ("picture", {}),
                    ("fail", {"why": "the pager service is down"}),
                    ("header", {"name": "x-team"}),
                    ("echo", {"text": 5}),
                ),
                tools,
            )
            return tools, results

    tools, (echo, forecast, picture, fail, header, bad) = run(body, backend)
    echo_tool = next(t for t in tools if t.name == "echo")
    assert echo_tool.metadata["mcp"]["server"] == "remote"
    assert echo_tool.metadata["mcp"]["annotations"] == {"title": "Echo", "readOnlyHint": True}
    assert echo_tool.description == "Say the text back."
    assert (echo.outcome, echo.result) == ("result", "hello")
    assert isinstance(echo.result, MCPResult)
    # structured content is rendered for the model and kept as data
    assert forecast.result.structured == {"city": "Lisbon", "high": 21, "sky": "clear"}
    assert '"city": "Lisbon"' in format_tool_result(forecast)
    # images are kept for providers that take them; the model's text says one is there
    assert picture.ok
    assert format_tool_result(picture) == "a one-pixel picture\n[image 1: image/png, 70 bytes]"
    (image,) = picture.result.images
    assert image.mime_type == "image/png"
    assert image.bytes().startswith(b"\x89PNG")
    # an MCP error result is the tool's own answer
    assert fail.outcome == "result"
    assert fail.error is not None and "the pager service is down" in fail.error
    assert header.result == "atlas"
    assert bad.outcome == "refused"
    assert bad.error == "echo got invalid arguments: `text` must be a string, not an integer (5)."


def test_a_react_agent_over_http(http_server: Callable[..., str]) -> None:
    server = {"name": "remote", "url": http_server()}
    lm = imp.ScriptedLM(
        [
            {"tool_calls": [{"name": "forecast", "arguments": {"city": "Porto"}}]},
            {"answer": "Clear, 21 degrees.", "tool_calls": []},
        ]
    )

    async def body() -> imp.Prediction:
        async with connect([server], authorize=lambda descriptor: descriptor["name"] == "remote") as tools:
            return await imp.call(imp.react("question -> answer", tools, lm=lm), question="Weather in Porto?")

    prediction = run(body)
    assert prediction.answer == "Clear, 21 degrees."
    (observation,) = (m for m in lm.requests[1].messages if m["role"] == "tool")
    # FastMCP writes the structured content as text too; the model reads it once
    assert json.loads(observation["content"]) == {"city": "Porto", "high": 21, "sky": "clear"}


def test_a_refused_credential_fails_the_import_or_drops_the_server(http_server: Callable[..., str]) -> None:
    url = http_server(token="good")
    wrong = {"name": "remote", "url": url, "headers": {"Authorization": "Bearer wrong"}}

    async def refuse() -> None:
        async with connect([wrong], trusted=[wrong], connect_timeout=10):
            raise AssertionError("the import must fail")

    with pytest.raises(MCPConnectionError) as caught:
        run(refuse)
    assert caught.value.failures[0].reason == "HTTP 401"
    assert "wrong" not in str(caught.value)  # headers never appear in errors

    right = {"name": "remote", "url": url, "headers": {"Authorization": "Bearer good"}}

    async def drop() -> tuple[MCPTools, list[ToolResult]]:
        servers = [wrong | {"name": "stale"}, right]
        async with connect(servers, trusted=servers, on_failure="drop") as tools:
            return tools, await run_tool_calls(_calls(("echo", {"text": "in"})), tools)

    tools, (echo,) = run(drop)
    assert [(u.server, u.reason) for u in tools.unavailable] == [("stale", "HTTP 401")]
    assert echo.result == "in"


def test_a_server_that_is_not_there(http_server: Callable[..., str]) -> None:
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens on this port
    server = {"name": "gone", "url": f"http://127.0.0.1:{port}/mcp"}

    async def body() -> MCPTools:
        async with connect([server], trusted=[server], on_failure="drop", connect_timeout=5) as tools:
            return tools

    tools = run(body)
    assert list(tools) == []
    assert tools.unavailable[0].server == "gone"


def test_an_http_call_past_its_timeout_is_unknown(http_server: Callable[..., str]) -> None:
    server = {"name": "remote", "url": http_server()}

    async def body() -> list[ToolResult]:
        async with connect([server], trusted=[server], call_timeout=0.3) as tools:
            return await run_tool_calls(_calls(("nap", {"seconds": 5}), ("echo", {"text": "quick"})), tools)

    slow, quick = run(body)
    assert (slow.outcome, slow.error) == ("unknown", "nap did not answer within 0.3 s; it may have run.")
    assert quick.result == "quick"
