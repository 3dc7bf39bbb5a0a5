"""The Streamable HTTP transport of `imp.mcp`, for the installed SDK's line (`_http_v1`, `_http_v2`).

Either way a request that failed below the protocol fails that one request, with a JSON-RPC error
naming what happened (`_codes`), and the connection stays usable.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Mapping
from typing import Any

from imp.mcp._codes import HTTP_BROKEN, HTTP_STATUS_ERROR, HTTP_UNREACHABLE
from imp.mcp._sdk import V2

__all__ = ["HTTP_BROKEN", "HTTP_STATUS_ERROR", "HTTP_UNREACHABLE", "http_streams"]


@contextlib.asynccontextmanager
async def http_streams(url: str, headers: Mapping[str, str], *, http_timeout: float) -> AsyncIterator[tuple[Any, Any]]:
    """The (read, write) streams a `ClientSession` takes, for the installed SDK's line."""
    if V2:
        from imp.mcp._http_v2 import http_streams as opened
    else:
        from imp.mcp._http_v1 import http_streams as opened
    async with opened(url, headers, http_timeout=http_timeout) as streams:
        yield streams
