"""The one place imp touches its HTTP library: a pooled client per LM value, errors made plain.

imp is written against the httpx API and runs on httpx2 (the maintained successor, same API) when
that is installed, else on httpx. `IMP_HTTP_BACKEND=httpx|httpx2`, `http_backend=` or passing an
`AsyncClient` of either library as `http_client` chooses explicitly.

Every request is sent as httpx's `AsyncClient.send(request, stream=True)` does it: the response
opens at its headers, and the caller reads the body whole (`Response.read`, bounded) or as it
arrives (`Response.chunks`). `importlib` loads the HTTP library on first use, not at import: the
library is chosen at run time, and `import imp` stays light.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import inspect
import os
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from types import ModuleType
from typing import Literal, Protocol

import anyio.lowlevel

__all__ = ["BodyTooLarge", "HTTPFailure", "Response", "Transport", "backend_name", "check_http_client"]

FailureKind = Literal["connect", "timeout", "read", "protocol", "client"]
"""`client`: the `http_client` a user gave cannot send (closed, or failing in a way of its own)."""

_STALE_CONNECTIONS = 64
"""How many dead kept-alive connections a user's client may hand out in a row, one per attempt, before
imp gives up (each fails at once, before anything is sent: see `Transport._send`)."""


class HTTPFailure(Exception):
    """A request that got no (whole) HTTP response: refused, reset, timed out or cut short."""

    def __init__(self, kind: FailureKind, message: str, *, sent: bool) -> None:
        super().__init__(message)
        self.kind = kind
        self.sent = sent


class BodyTooLarge(Exception):
    """A response body longer than the limit it was read with (reading stopped there)."""

    def __init__(self, limit: int, declared: int | None = None) -> None:
        said = f" (content-length {declared:,})" if declared is not None else ""
        super().__init__(f"the response body is over {limit:,} bytes{said}")
        self.limit = limit


class _LibResponse(Protocol):
    """What imp reads of an httpx (or httpx2) response."""

    @property
    def status_code(self) -> int: ...
    @property
    def headers(self) -> Mapping[str, str]: ...
    def aiter_bytes(self) -> AsyncIterator[bytes]: ...
    async def aclose(self) -> None: ...


class Response:
    """An HTTP response opened at its headers; its body is read whole or as it arrives."""

    __slots__ = ("_response", "_transport")

    def __init__(self, response: _LibResponse, transport: Transport) -> None:
        self._response = response
        self._transport = transport

    @property
    def status(self) -> int:
        """The HTTP status code."""
        return int(self._response.status_code)

    @property
    def headers(self) -> Mapping[str, str]:
        """Case-insensitive response headers."""
        return self._response.headers

    async def read(self, limit: int | None) -> bytes:
        """The whole body; `BodyTooLarge` as soon as it passes `limit` bytes (None: no limit)."""
        declared = self.headers.get("content-length")
        if limit is not None and declared is not None and declared.isdigit() and int(declared) > limit:
            raise BodyTooLarge(limit, int(declared))
        parts: list[bytes] = []
        size = 0
        async for chunk in self.chunks():
            size += len(chunk)
            if limit is not None and size > limit:
                raise BodyTooLarge(limit)
            parts.append(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def chunks(self) -> AsyncIterator[bytes]:
        """Body bytes as they arrive (decompressed)."""
        iterator = self._response.aiter_bytes()
        while True:
            try:
                chunk = await anext(iterator)
            except StopAsyncIteration:
                return
            except Exception as exc:
                raise self._transport.failure(exc, sent=True) from None
            yield chunk


def backend_name(client: object = None) -> str:
    """Which HTTP library to use: the given client's, else `IMP_HTTP_BACKEND`, else httpx2 when it is
    installed (about twice the requests per second of httpx 0.28 at high concurrency), else httpx."""
    if client is not None:
        return type(client).__module__.split(".")[0]
    return os.environ.get("IMP_HTTP_BACKEND") or _installed_default()


@functools.cache
def _installed_default() -> str:
    return "httpx2" if importlib.util.find_spec("httpx2") is not None else "httpx"


def check_http_client(client: object) -> None:
    """Refuse, when the LM is built, an `http_client` that is not an async httpx-style client."""
    if client is None:
        return
    send = getattr(client, "send", None)
    if not callable(getattr(client, "build_request", None)) or not inspect.iscoroutinefunction(send):
        kind = type(client).__module__.split(".")[0] + "." + type(client).__qualname__
        hint = " (a sync client: use httpx.AsyncClient)" if callable(send) else ""
        raise TypeError(f"http_client is an httpx.AsyncClient or an httpx2.AsyncClient, got {kind}{hint}")


class Transport:
    """One pooled `AsyncClient` for one LM value (or the user's own); created on first use, closed with the LM."""

    def __init__(
        self,
        *,
        connect_timeout: float,
        read_timeout: float,
        max_connections: int | None,
        max_keepalive: int | None,
        http_client: object = None,
        backend: str | None = None,
    ) -> None:
        self._module: ModuleType | None = None
        self._client: object = http_client
        self._owns_client = http_client is None
        self._backend = backend or backend_name(http_client)
        self.connect_timeout = connect_timeout
        self.read_timeout = read_timeout
        self._max_connections = max_connections
        self._max_keepalive = max_keepalive
        self._default_timeout: object = None
        self._loop: object = None
        """The event loop (its native token) the client was last used in."""

    @property
    def backend(self) -> str:
        """The HTTP library's module name (`httpx` or `httpx2`)."""
        return self._backend

    def _lib(self) -> ModuleType:
        if self._module is None:
            self._module = importlib.import_module(self._backend)
        return self._module

    def _get_client(self) -> tuple[object, bool]:
        """The client to send with, and whether the event loop changed since it was last used."""
        loop = anyio.lowlevel.current_token().native_token
        moved = self._loop is not None and loop is not self._loop
        self._loop = loop
        if self._owns_client and moved:
            # A pool's kept-alive connections belong to the event loop that opened them. Each
            # `imp.call_sync` runs its own loop, so an LM made once and called twice meets a pool whose
            # loop is closed ("Event loop is closed"): that pool is left behind and a new one is made.
            self._client = None
        if self._client is None:
            lib = self._lib()
            limits = lib.Limits(max_connections=self._max_connections, max_keepalive_connections=self._max_keepalive)
            self._default_timeout = self._timeout(None)
            self._client = lib.AsyncClient(limits=limits, timeout=self._default_timeout, follow_redirects=False)
        return self._client, moved

    def _timeout(self, cap: float | None) -> object:
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

    @asynccontextmanager
    async def open(
        self, url: str, content: bytes, headers: Mapping[str, str], cap: float | None
    ) -> AsyncIterator[Response]:
        """POST a body and open the response at its headers; leaving the block closes it."""
        client, moved = self._get_client()
        request = client.build_request(  # type: ignore[attr-defined]
            "POST", url, content=content, headers=headers, timeout=self._timeout(cap)
        )
        response = await self._send(client, request, moved)
        try:
            yield Response(response, self)
        finally:
            await response.aclose()

    async def _send(self, client: object, request: object, moved: bool) -> _LibResponse:
        """`client.send(request, stream=True)`, with the library's and the client's failures made plain.

        A user's client made in one event loop and used in the next (each `imp.call_sync` runs its
        own) holds kept-alive connections of a loop that has closed; httpx finds each one dead when
        it closes it, raising `RuntimeError: Event loop is closed` before anything is sent, and drops
        it. So the request is sent again at once, until a live connection (or a new one) takes it.
        """
        stale = 0
        while True:
            try:
                response: _LibResponse = await client.send(request, stream=True)  # type: ignore[attr-defined]
            except RuntimeError as exc:
                if _dead_loop(exc) and stale < _STALE_CONNECTIONS and not self._owns_client:
                    stale += 1
                    continue
                raise self._client_failure(exc, moved) from None
            except Exception as exc:
                if isinstance(exc, self._lib().TransportError):
                    raise self.failure(exc, sent=True) from None
                raise
            return response

    def _client_failure(self, exc: RuntimeError, moved: bool) -> HTTPFailure:
        """A `RuntimeError` from sending: the user's client is closed, bound to another loop, or broken."""
        text = str(exc)
        if "closed" in text and "client" in text.lower():
            return HTTPFailure(
                "client",
                "the http_client given to imp.lm(...) is closed: keep it open while the LM is in use "
                "(imp never closes a client it did not make), or leave http_client out",
                sent=False,
            )
        if _dead_loop(exc) or moved:
            return HTTPFailure(
                "connect",
                f"the http_client given to imp.lm(...) failed after moving to another event loop ({text}): "
                "an httpx.AsyncClient's connections belong to the loop that opened them; make the client "
                "inside the loop that uses it, or leave http_client out (imp then keeps a pool per loop)",
                sent=False,
            )
        return HTTPFailure("client", f"the http_client failed: RuntimeError: {text}", sent=False)

    async def aclose(self) -> None:
        """Close the pool (only when this transport made the client)."""
        if self._client is not None and self._owns_client:
            client, self._client = self._client, None
            await client.aclose()  # type: ignore[attr-defined]


def _dead_loop(exc: RuntimeError) -> bool:
    return "event loop is closed" in str(exc).lower()
