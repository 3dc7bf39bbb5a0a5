"""The MCP servers an editor lists for a session, connected through `imp.mcp` for the session's life."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import anyio
from anyio.abc import TaskGroup

__all__ = ["MCPApproval", "descriptor", "open_servers"]

MCPApproval = Mapping[str, Any]
"""`{"trusted": [descriptors]}` or `{"authorize": function}`: what `imp.mcp.connect` takes."""


def descriptor(server: Any) -> dict[str, Any]:
    """An ACP server entry as an `imp.mcp` descriptor (stdio: command, args, env; HTTP: url, headers)."""
    env = {v.name: v.value for v in getattr(server, "env", None) or ()}
    if getattr(server, "command", None) is not None:
        found: dict[str, Any] = {"name": server.name, "command": server.command, "args": list(server.args)}
        if env:
            found["env"] = env
        return found
    headers = {h.name: h.value for h in getattr(server, "headers", None) or ()}
    return {"name": server.name, "url": server.url, **({"headers": headers} if headers else {})}


async def open_servers(
    group: TaskGroup, servers: Sequence[Any], approval: MCPApproval, closed: anyio.Event, ended: anyio.Event
) -> list[Any]:
    """Connect the servers (approved as `imp.mcp.connect` approves them) in a task of `group` that
    holds them open until `closed` is set, and sets `ended` once they are shut down (their
    processes gone); their tools, or the connection's error raised."""
    import imp.mcp

    descriptors = [descriptor(s) for s in servers]
    ready = anyio.Event()
    held: dict[str, Any] = {}

    async def hold() -> None:
        try:
            async with imp.mcp.connect(descriptors, **approval) as tools:
                held["tools"] = list(tools)
                ready.set()
                await closed.wait()
        except Exception as exc:
            held["error"] = exc
            ready.set()
        finally:
            ended.set()

    group.start_soon(hold)
    await ready.wait()
    if "error" in held:
        raise held["error"]
    tools: list[Any] = held["tools"]
    return tools
