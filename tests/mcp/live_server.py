"""A FastMCP server served over Streamable HTTP on 127.0.0.1 in a thread, for tests that watch it
from the inside: which calls were cancelled, which headers came, and tools that change mid-import."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import anyio
import uvicorn

try:
    from mcp.server.fastmcp import Context, FastMCP
except ModuleNotFoundError:  # mcp 2.x: FastMCP is MCPServer
    from mcp.server.mcpserver import Context  # type: ignore[no-redef]
    from mcp.server.mcpserver import MCPServer as FastMCP  # type: ignore[assignment]


class Watched:
    """What the server saw: the request ids whose handlers were cancelled, and the last headers."""

    def __init__(self) -> None:
        self.cancelled: list[Any] = []
        self.started: list[Any] = []
        self.headers: dict[str, str] = {}
        self.posted: list[dict[str, Any]] = []
        """Every JSON-RPC message the client POSTed, as sent."""

    def notes(self, method: str) -> list[dict[str, Any]]:
        """The POSTed notifications of one method."""
        return [m for m in self.posted if m.get("method") == method and "id" not in m]

    def requests(self, method: str) -> list[dict[str, Any]]:
        """The POSTed requests of one method."""
        return [m for m in self.posted if m.get("method") == method and "id" in m]


def build(watched: Watched) -> FastMCP:
    server = FastMCP("live")

    @server.tool()
    async def slow(seconds: float, ctx: Context) -> str:  # type: ignore[type-arg]
        """Sleep, noting a cancellation."""
        watched.started.append(ctx.request_id)
        try:
            await anyio.sleep(seconds)
        except anyio.get_cancelled_exc_class():
            watched.cancelled.append(ctx.request_id)
            raise
        return "slept"

    @server.tool()
    def whoami(ctx: Context) -> str:  # type: ignore[type-arg]
        """The headers the request came with."""
        request = ctx.request_context.request
        watched.headers = dict(request.headers) if request is not None else {}
        return watched.headers.get("x-team", "")

    @server.tool()
    async def grow(ctx: Context) -> str:  # type: ignore[type-arg]
        """Add the tool `extra`, drop `shrinking`, and say the list changed."""

        def extra(n: int) -> int:
            """Double n."""
            return 2 * n

        server.add_tool(extra, name="extra")
        server.remove_tool("shrinking")
        await ctx.session.send_tool_list_changed()
        # The notice (on the GET stream) and the client's re-listing come first. Nothing the server
        # sees says the client has taken the new list in (its refresh runs in a task of its own),
        # so this one pause stays (what the next step of a react turn offers depends on it).
        await anyio.sleep(0.5)
        return "changed"

    @server.tool()
    def shrinking() -> str:
        """A tool that goes away."""
        return "still here"

    return server


class _RequireToken:
    """ASGI middleware: HTTP requests without `Authorization: Bearer <token>` get 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and dict(scope.get("headers") or []).get(b"authorization") != (
            f"Bearer {self.token}".encode()
        ):
            await send({"type": "http.response.start", "status": 401, "headers": []})
            await send({"type": "http.response.body", "body": b"unauthorized"})
            return
        await self.app(scope, receive, send)


class _Record:
    """ASGI middleware: keeps each POSTed JSON-RPC message (what went over the wire)."""

    def __init__(self, app: Any, watched: Watched) -> None:
        self.app, self.watched = app, watched

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope.get("method") != "POST":
            await self.app(scope, receive, send)
            return
        chunks: list[bytes] = []

        async def reading() -> Any:
            message = await receive()
            if message.get("type") == "http.request":
                chunks.append(message.get("body", b""))
                if not message.get("more_body"):
                    data = json.loads(b"".join(chunks) or b"null")
                    self.watched.posted.extend(data if isinstance(data, list) else [data])
            return message

        await self.app(scope, reading, send)


@contextmanager
def serve(watched: Watched, token: str | None = None) -> Iterator[str]:
    """Serve `build(watched)` on 127.0.0.1; yields the URL."""
    app: Any = _Record(build(watched).streamable_http_app(), watched)
    if token is not None:
        app = _RequireToken(app, token)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)
