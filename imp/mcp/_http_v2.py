"""The Streamable HTTP transport of `imp.mcp` under mcp 2.x: the SDK's own client, over an httpx2
client whose transport says what went wrong with each request in a JSON-RPC error imp classifies.

The 2.x SDK already fails one request (not the whole connection) for an HTTP error, but as
`-32603 Server returned an error response`, without the status; and a request that never reaches
the server ends the connection. Here a POST answered with an HTTP error, refused before it was
sent, or broken after, is answered with a JSON-RPC error naming what happened (the codes of
`_http`), which the SDK hands to that one call as it stands.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Mapping
from typing import Any

import httpx2
from mcp.client.streamable_http import streamable_http_client

from imp.mcp._codes import HTTP_BROKEN, HTTP_STATUS_ERROR, HTTP_UNREACHABLE

__all__ = ["http_streams"]


def _request_id(request: httpx2.Request) -> int | str | None:
    """The JSON-RPC id of a POSTed request (None for a notification or a response)."""
    if request.method != "POST":
        return None
    try:
        body = json.loads(request.content or b"null")
    except ValueError:
        return None
    found = body.get("id") if isinstance(body, dict) and "method" in body else None
    return found if isinstance(found, int | str) and not isinstance(found, bool) else None


def _error(request_id: int | str, code: int, message: str, data: object = None) -> httpx2.Response:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    body = json.dumps({"jsonrpc": "2.0", "id": request_id, "error": error}).encode()
    return httpx2.Response(200, headers={"content-type": "application/json"}, content=body)


def _text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


class _Classified(httpx2.AsyncBaseTransport):
    """Each POSTed request's failure as a JSON-RPC error for that request."""

    def __init__(self) -> None:
        self._inner = httpx2.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request_id = _request_id(request)
        try:
            response = await self._inner.handle_async_request(request)
        except (httpx2.ConnectError, httpx2.ConnectTimeout, httpx2.UnsupportedProtocol) as exc:
            if request_id is None:
                raise
            return _error(request_id, HTTP_UNREACHABLE, _text(exc))
        except httpx2.TransportError as exc:
            if request_id is None:
                raise
            return _error(request_id, HTTP_BROKEN, _text(exc))
        if request_id is None or response.status_code < 400 or response.status_code == 404:
            return response  # 404: the SDK's own "session terminated"
        await response.aclose()
        status = response.status_code
        return _error(request_id, HTTP_STATUS_ERROR, f"HTTP {status}", {"status": status})

    async def aclose(self) -> None:
        await self._inner.aclose()


@contextlib.asynccontextmanager
async def http_streams(url: str, headers: Mapping[str, str], *, http_timeout: float) -> AsyncIterator[tuple[Any, Any]]:
    """The (read, write) streams a `ClientSession` takes; leaving ends the session on the server."""
    client = httpx2.AsyncClient(
        headers=dict(headers), timeout=httpx2.Timeout(http_timeout, read=300.0), transport=_Classified()
    )
    opened: Any = streamable_http_client  # typed against whichever line mypy sees
    async with client, opened(url, http_client=client) as (read, write):
        yield read, write
