"""The one place imp touches its HTTP library: a pooled client per LM value, errors made plain.

imp is written against the httpx API and runs on httpx2 (the maintained successor, same API) when
that is installed, else on httpx. `IMP_HTTP_BACKEND=httpx|httpx2`, `http_backend=` or passing an
`AsyncClient` of either library as `http_client` chooses explicitly.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from types import ModuleType
from typing import Any, Literal

import anyio.lowlevel

from imp.models._media_wire import StreamedBody

__all__ = ["HTTPFailure", "RawResponse", "StreamingResponse", "Transport", "backend_name"]

FailureKind = Literal["connect", "timeout", "read", "protocol"]

Body = bytes | StreamedBody
"""A request body: bytes, or a body that streams its media's base64 as it is sent."""


def _sized(content: Body, headers: Mapping[str, str]) -> Mapping[str, str]:
    """A streamed body's exact length as `content-length` (the library would send it chunked otherwise)."""
    if isinstance(content, bytes):
        return headers
    return {**headers, "content-length": str(len(content))}


class HTTPFailure(Exception):
    """A request that got no (whole) HTTP response: refused, reset, timed out or cut short."""

    def __init__(self, kind: FailureKind, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.kind = kind
        self.sent = sent


@dataclass(frozen=True, slots=True)
class RawResponse:
    """A whole HTTP response: status, case-insensitive headers and body bytes."""

    status: int
    headers: Mapping[str, str]
    content: bytes


class StreamingResponse:
    """An HTTP response whose body is read as it arrives."""

    __slots__ = ("_response", "_transport")

    def __init__(self, response: Any, transport: Transport) -> None:
        self._response = response
        self._transport = transport

    @property
    def status(self) -> int:
        """The HTTP status code."""
        return int(self._response.status_code)

    @property
    def headers(self) -> Mapping[str, str]:
        """Case-insensitive response headers."""
        headers: Mapping[str, str] = self._response.headers
        return headers

    async def aread(self) -> bytes:
        """The rest of the body at once (for error responses)."""
        try:
            content: bytes = await self._response.aread()
        except Exception as exc:
            raise self._transport.failure(exc, sent=True) from None
        return content

    async def aiter_bytes(self) -> AsyncIterator[bytes]:
        """Body bytes as they arrive."""
        iterator = self._response.aiter_bytes()
        while True:
            try:
                chunk: bytes = await iterator.__anext__()
            except StopAsyncIteration:
                return
            except Exception as exc:
                raise self._transport.failure(exc, sent=True) from None
            yield chunk


def backend_name(client: Any = None) -> str:
    """Which HTTP library to use: the given client's, else `IMP_HTTP_BACKEND`, else httpx2 when it is
    installed (about twice the requests per second of httpx 0.28 at high concurrency), else httpx."""
    if client is not None:
        return type(client).__module__.split(".")[0]
    return os.environ.get("IMP_HTTP_BACKEND") or _installed_default()


@functools.cache
def _installed_default() -> str:
    return "httpx2" if importlib.util.find_spec("httpx2") is not None else "httpx"


class Transport:
    """One pooled `AsyncClient` for one LM value; created on first use, closed with the LM."""

    def __init__(
        self,
        *,
        connect_timeout: float,
        read_timeout: float,
        max_connections: int | None,
        max_keepalive: int | None,
        http_client: Any = None,
        backend: str | None = None,
    ) -> None:
        self._module: ModuleType | None = None
        self._client = http_client
        self._owns_client = http_client is None
        self._backend = backend or backend_name(http_client)
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._max_connections = max_connections
        self._max_keepalive = max_keepalive
        self._default_timeout: Any = None
        self._loop: object = None
        """The event loop (its native token) the owned pool was made in."""

    @property
    def backend(self) -> str:
        """The HTTP library's module name (`httpx` or `httpx2`)."""
        return self._backend

    def _lib(self) -> ModuleType:
        if self._module is None:
            self._module = importlib.import_module(self._backend)
        return self._module

    def _get_client(self) -> Any:
        if self._owns_client:
            # A pool's kept-alive connections belong to the event loop that opened them. Each
            # `imp.call_sync` runs its own loop, so an LM made once and called twice meets a pool whose
            # loop is closed ("Event loop is closed"): that pool is left behind and a new one is made.
            loop = anyio.lowlevel.current_token().native_token
            if loop is not self._loop:
                self._client, self._loop = None, loop
        if self._client is None:
            lib = self._lib()
            limits = lib.Limits(max_connections=self._max_connections, max_keepalive_connections=self._max_keepalive)
            self._default_timeout = self._timeout(None)
            self._client = lib.AsyncClient(limits=limits, timeout=self._default_timeout, follow_redirects=False)
        return self._client

    def _timeout(self, cap: float | None) -> Any:
        if cap is None and self._default_timeout is not None:
            return self._default_timeout
        connect, read = self.connect_timeout, self.read_timeout
        if cap is not None:
            connect, read = min(connect, cap), min(read, cap)
        return self._lib().Timeout(connect=connect, read=read, write=read, pool=read)

    def failure(self, exc: BaseException, *, sent: bool) -> HTTPFailure:
        """Turn the library's exception into an `HTTPFailure` (credentials never travel with it)."""
        lib = self._lib()
        kind: FailureKind
        if isinstance(exc, lib.ConnectTimeout | lib.PoolTimeout):
            kind, sent = "timeout", False
        elif isinstance(exc, lib.TimeoutException):
            kind = "timeout"
        elif isinstance(exc, lib.ConnectError):
            kind, sent = "connect", False
        elif isinstance(exc, lib.RemoteProtocolError | lib.ReadError | lib.WriteError | lib.CloseError):
            kind = "read"
        else:
            kind = "protocol"
        return HTTPFailure(kind, f"{type(exc).__name__}: {exc}".rstrip(": "), sent=sent)

    def _known(self, exc: BaseException) -> bool:
        return isinstance(exc, self._lib().TransportError)

    async def post(self, url: str, content: Body, headers: Mapping[str, str], cap: float | None) -> RawResponse:
        """POST a body and read the whole response."""
        client = self._get_client()
        headers = _sized(content, headers)
        try:
            response = await client.post(url, content=content, headers=headers, timeout=self._timeout(cap))
        except Exception as exc:
            if self._known(exc):
                raise self.failure(exc, sent=True) from None
            raise
        return RawResponse(response.status_code, response.headers, response.content)

    @asynccontextmanager
    async def stream(
        self, url: str, content: Body, headers: Mapping[str, str], cap: float | None
    ) -> AsyncIterator[StreamingResponse]:
        """POST a body and read the response as it arrives; leaving the block closes it."""
        client = self._get_client()
        headers = _sized(content, headers)
        try:
            manager = client.stream("POST", url, content=content, headers=headers, timeout=self._timeout(cap))
            response = await manager.__aenter__()
        except Exception as exc:
            if self._known(exc):
                raise self.failure(exc, sent=True) from None
            raise
        try:
            yield StreamingResponse(response, self)
        finally:
            await manager.__aexit__(None, None, None)

    async def aclose(self) -> None:
        """Close the pool (only when this transport made the client)."""
        if self._client is not None and self._owns_client:
            client, self._client = self._client, None
            await client.aclose()
