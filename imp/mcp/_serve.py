"""`serve` and `app`: imp programs as an MCP server's tools, over stdio or Streamable HTTP.

The server is the SDK's lowlevel `Server` (its handlers registered as the installed line wants
them: decorators in 1.x, constructor arguments in 2.x); each call is `ServedProgram.call`, in the
request's own task, so the client's `notifications/cancelled` cancels the run with it.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Mapping
from typing import Any, Literal

from mcp import types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from imp._jsondata import JSONObject
from imp._version import version
from imp.mcp._sdk import V2
from imp.mcp._served import Progress, ServedProgram, served_programs
from imp.programs.base import Program

__all__ = ["app", "serve"]

log = logging.getLogger("imp.mcp")

Programs = Program | Mapping[str, Program]


class _Tools:
    """The served programs by tool name, answering `tools/list` and `tools/call` in wire form."""

    def __init__(self, programs: Programs, name: str) -> None:
        self.served = {p.name: p for p in served_programs(programs, name)}

    def listed(self) -> list[JSONObject]:
        return [p.tool() for p in self.served.values()]

    async def call(self, name: str, arguments: Mapping[str, object] | None, progress: Progress | None) -> JSONObject:
        served: ServedProgram | None = self.served.get(name)
        if served is None:
            known = ", ".join(self.served)
            return {
                "content": [{"type": "text", "text": f"no tool named {name!r}; this server has {known}"}],
                "isError": True,
            }
        return await served.call(arguments, progress)


def _progress(session: Any, token: str | int | None, request_id: Any) -> Progress | None:
    """Progress notifications for one call, when its caller asked for them (gave a progress token)."""
    if token is None:
        return None

    async def send(count: float, message: str) -> None:
        await session.send_progress_notification(token, count, None, message, related_request_id=request_id)

    return send


def _server_v1(tools: _Tools, name: str) -> object:
    server: Any = Server(name, version=version())

    @server.list_tools()  # type: ignore[misc, no-untyped-call, untyped-decorator, unused-ignore]
    async def list_tools() -> list[Any]:
        return [types.Tool.model_validate(tool) for tool in tools.listed()]

    @server.call_tool(validate_input=False)  # type: ignore[misc, untyped-decorator, unused-ignore]
    async def call_tool(tool: str, arguments: dict[str, Any]) -> Any:
        context = server.request_context
        meta = context.meta
        token = getattr(meta, "progressToken", None) if meta is not None else None
        progress = _progress(context.session, token, context.request_id)
        return types.CallToolResult.model_validate(await tools.call(tool, arguments, progress))

    return server


def _server_v2(tools: _Tools, name: str) -> object:
    async def list_tools(context: object, params: object) -> Any:
        return types.ListToolsResult.model_validate({"tools": tools.listed()})

    async def call_tool(context: Any, params: Any) -> Any:
        meta = context.meta or {}
        progress = _progress(context.session, meta.get("progress_token"), context.request_id)
        return types.CallToolResult.model_validate(await tools.call(params.name, params.arguments, progress))

    return Server(name, version=version(), on_list_tools=list_tools, on_call_tool=call_tool)  # type: ignore[call-arg, unused-ignore]


def _server(programs: Programs, name: str) -> Any:
    if not isinstance(name, str) or not name:
        raise ValueError("imp.mcp.serve needs a name: the server's name (and a single program's tool name)")
    tools = _Tools(programs, name)
    return _server_v2(tools, name) if V2 else _server_v1(tools, name)


class _Endpoint:
    """The session manager as an ASGI app (Starlette routes an object, unlike a function, as one)."""

    def __init__(self, manager: StreamableHTTPSessionManager) -> None:
        self.manager = manager

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        await self.manager.handle_request(scope, receive, send)


def app(programs: Programs, *, name: str = "imp", path: str = "/mcp", allowed_hosts: list[str] | None = None) -> Any:
    """An ASGI app (Starlette) serving the programs over Streamable HTTP at `path`.

    Run it with uvicorn, or mount it in a FastAPI app whose lifespan enters this app's
    (`FastAPI(lifespan=mcp_app.router.lifespan_context)`): the lifespan runs the session manager.
    `allowed_hosts` (`"host:port"` patterns) are the `Host` headers accepted besides loopback ones:
    the SDK refuses others (DNS rebinding protection).
    """
    from mcp.server.transport_security import TransportSecuritySettings
    from starlette.applications import Starlette
    from starlette.routing import Route

    server = _server(programs, name)
    hosts = ["127.0.0.1:*", "localhost:*", "[::1]:*", *(allowed_hosts or [])]
    origins = ["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"]
    origins += [f"http://{host}" for host in allowed_hosts or []] + [f"https://{host}" for host in allowed_hosts or []]
    security = TransportSecuritySettings(
        enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins
    )
    manager = StreamableHTTPSessionManager(app=server, security_settings=security)

    @contextlib.asynccontextmanager
    async def lifespan(_: object) -> AsyncIterator[None]:
        async with manager.run():
            yield

    return Starlette(
        routes=[Route(path, endpoint=_Endpoint(manager), methods=["GET", "POST", "DELETE"])], lifespan=lifespan
    )


async def serve(
    programs: Programs,
    *,
    name: str = "imp",
    transport: Literal["stdio", "http"] = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    allowed_hosts: list[str] | None = None,
) -> None:
    """Serve `programs` as an MCP server's tools until the client leaves (stdio) or the task is cancelled.

    - `programs`: one program (the tool `name`) or a mapping of tool name to program. Each tool's
      input schema is its signature's inputs, its output schema the outputs; a call's
      `structuredContent` is the prediction's fields. A caller that sends a progress token gets a
      notification per stream part; `notifications/cancelled` cancels the run; a failed run is an
      error result (`isError`) saying why.
    - `transport`: `"stdio"` (stdin and stdout carry the protocol) or `"http"` (Streamable HTTP
      at `http://host:port/path`, served by uvicorn; `allowed_hosts` as `app` takes them, and
      `host:port` itself when it is not a loopback address).
    """
    if transport == "stdio":
        server = _server(programs, name)
        async with stdio_server() as (read, write):
            await server.run(read, write, server.create_initialization_options())
        return
    if transport != "http":
        raise ValueError(f"transport is 'stdio' or 'http', got {transport!r}")
    import uvicorn

    hosts = list(allowed_hosts or [])
    if host not in ("127.0.0.1", "localhost", "::1"):
        hosts.append(f"{host}:{port}")
    asgi = app(programs, name=name, path=path, allowed_hosts=hosts)
    config = uvicorn.Config(asgi, host=host, port=port, log_level="warning", lifespan="on")
    await uvicorn.Server(config).serve()
