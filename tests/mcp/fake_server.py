"""A small FastMCP server for imp's MCP tests: over stdio (`python fake_server.py [--exit-at-start]`)
or built in-process (`build()`) and served over Streamable HTTP by the tests."""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time
from typing import Any

import anyio

try:
    from mcp.server.fastmcp import Context, FastMCP
    from mcp.server.fastmcp.exceptions import ToolError
except ModuleNotFoundError:  # mcp 2.x: FastMCP is MCPServer
    from mcp.server.mcpserver import Context  # type: ignore[no-redef]
    from mcp.server.mcpserver import MCPServer as FastMCP  # type: ignore[assignment]
    from mcp.server.mcpserver.exceptions import ToolError  # type: ignore[assignment]
from mcp.types import ImageContent, TextContent, ToolAnnotations

PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg=="
)


def build(name: str = "fake", **settings: Any) -> FastMCP:
    server = FastMCP(name, **settings)

    @server.tool(annotations=ToolAnnotations(readOnlyHint=True, title="Echo"))
    def echo(text: str) -> str:
        """Say the text back."""
        return text

    @server.tool()
    async def nap(seconds: float) -> str:
        """Sleep, then answer."""
        started = os.environ.get("FAKE_SERVER_NAP_STARTED")
        if started:  # tell the test the call is running here (a file is the one channel across processes)
            await anyio.Path(started).write_text("napping")
        await anyio.sleep(seconds)
        return f"slept {seconds}"

    @server.tool()
    def crash() -> str:
        """End the server process at once, without answering."""
        os._exit(1)

    @server.tool()
    def fail(why: str) -> str:
        """Fail with the reason (an MCP error result)."""
        raise ToolError(why)

    @server.tool()
    def forecast(city: str) -> dict[str, Any]:
        """A structured answer."""
        return {"city": city, "high": 21, "sky": "clear"}

    @server.tool(structured_output=False)
    def picture() -> list[TextContent | ImageContent]:
        """A caption and an image."""
        image = ImageContent(type="image", data=base64.b64encode(PNG).decode(), mimeType="image/png")
        return [TextContent(type="text", text="a one-pixel picture"), image]

    @server.tool()
    def getenv(key: str) -> str:
        """The server's value of an environment variable, or <unset>."""
        return os.environ.get(key, "<unset>")

    @server.tool()
    def spawn(token: str, stubborn: bool = False, holds_stdout: bool = False) -> int:
        """Start a long-lived child process (in the server's process group); return its pid.

        A stubborn child ignores SIGTERM; one that holds stdout keeps the server's stdout open."""
        ignore = "signal.signal(signal.SIGTERM, signal.SIG_IGN); " if stubborn else ""
        code = f"import os, signal, sys, time; {ignore}os.write(3, b'ready'); time.sleep(600)"
        ready, done = os.pipe()
        os.set_inheritable(done, True)
        stdout = None if holds_stdout else subprocess.DEVNULL
        child = subprocess.Popen(
            [sys.executable, "-c", code.replace("3", str(done)), token], stdout=stdout, pass_fds=(done,)
        )
        os.close(done)
        os.read(ready, 5)  # its signal handler is in place
        os.close(ready)
        return child.pid

    @server.tool()
    def header(name: str, ctx: Context) -> str:  # type: ignore[type-arg]
        """A request header the server received (HTTP only)."""
        request = ctx.request_context.request
        headers = getattr(request, "headers", {})
        return str(headers.get(name, "<none>"))

    if os.environ.get("FAKE_SERVER_SUBMIT"):

        @server.tool(name="submit")
        def submit(answer: str) -> str:
            """A tool that takes the name of imp's own."""
            return answer

    return server


if __name__ == "__main__":
    if "--exit-at-start" in sys.argv:
        print("fake server: the configuration file is missing", file=sys.stderr)
        sys.exit(3)
    if "--slow-start" in sys.argv:
        time.sleep(30)
    build(os.environ.get("FAKE_SERVER_NAME", "fake")).run("stdio")
