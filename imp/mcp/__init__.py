"""MCP both ways. `connect(servers, trusted=... | authorize=...)` imports every tool the servers
publish as an `imp.Tool`, for `imp.react` or `run_tool_calls`, and ends the servers when the
context closes; `serve(programs, name=...)` (or `app(...)`, an ASGI app) offers imp programs as an
MCP server's tools, over stdio or Streamable HTTP.

```python
async with imp.mcp.connect([{"name": "time", "command": "mcp-server-time", "args": []}],
                           trusted=[...]) as tools:
    agent = imp.react("question -> answer", tools, lm=lm)
```

Needs the optional extra `imp[mcp]` (the official `mcp` SDK, 1.x or 2.x); `import imp` never loads it.

Rooms: `_connect` (the import and each server's runner), `_servers` (descriptors, errors, the
gate), `_stdio` and `_http` (the two transports; `_http_v1`, `_http_v2` per SDK line), `_render`
(what the model reads of a result), `_served` and `_serve` (programs as tools, and the server),
`_sdk` (the two SDK lines behind one surface).
"""

try:
    import mcp as _sdk  # noqa: F401  (only to say clearly what is missing)
except ImportError as exc:  # pragma: no cover - only without the extra
    raise ImportError("imp.mcp needs the MCP SDK: pip install 'imp[mcp]'") from exc

from imp.mcp._connect import MCPTools, connect
from imp.mcp._render import MCPImage, MCPResult
from imp.mcp._serve import app, serve
from imp.mcp._servers import (
    InvalidMCPServer,
    MCPConnectionError,
    MCPEnvironmentError,
    MCPError,
    MCPServerNotAuthorized,
    MCPToolNameError,
    ServerAuthorizer,
    Unavailable,
)
from imp.mcp._stdio import ENV_PASSED

__all__ = [
    "ENV_PASSED",
    "InvalidMCPServer",
    "MCPConnectionError",
    "MCPEnvironmentError",
    "MCPError",
    "MCPImage",
    "MCPResult",
    "MCPServerNotAuthorized",
    "MCPToolNameError",
    "MCPTools",
    "ServerAuthorizer",
    "Unavailable",
    "app",
    "connect",
    "serve",
]
