"""The one place imp touches its HTTP library: a pooled client per LM value, errors made plain.

imp is written against the httpx API and runs on httpx2 (the maintained successor, same API) when
that is installed, else on httpx. `IMP_HTTP_BACKEND=httpx|httpx2`, `http_backend=` or passing an
`AsyncClient` of either library as `http_client` chooses explicitly.

Every request is sent as httpx's `AsyncClient.send(request, stream=True)` does it: the response
opens at its headers, and the caller reads the body whole (`Response.read`, bounded) or as it
arrives (`Response.chunks`), then closes it. `importlib` loads the HTTP library on first use, not at import: the
library is chosen at run time, and `import imp` stays light.
"""

from __future__ import annotations

import asyncio
import functools
import importlib
import importlib.util
import inspect
import logging
import os
from collections.abc import AsyncIterator, Callable, Mapping
from types import ModuleType
from typing import Literal, Protocol

import anyio.lowlevel

from imp.models._media_wire import StreamedBody
from imp.models.errors import safe_url

__all__ = [
    "Body",
    "BodyTooLarge",
    "HTTPFailure",
    "Response",
    "Transport",
    "backend_name",
    "check_http_client",
    "checked_backend",
]

Body = bytes | StreamedBody
"""A request body: bytes, or a body that streams its media's base64 as it is sent."""

FailureKind = Literal["connect", "timeout", "read", "protocol", "client"]
"""`client`: the `http_client` a user gave cannot send (closed, or failing in a way of its own)."""


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
    async def aread(self) -> bytes: ...
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
        declared, encoded = _length_and_encoding(self._response)
        if limit is not None and declared is not None:
            if declared > limit:
                raise BodyTooLarge(limit, declared)
            if not encoded:  # no more than declared arrives (a compressed body may grow)
                try:
                    return await self._response.aread()
                except Exception as exc:
                    raise self._transport.failure(exc, sent=True) from None
        parts: list[bytes] = []
        size = 0
        async for chunk in self.chunks():
            size += len(chunk)
            if limit is not None and size > limit:
                raise BodyTooLarge(limit)
            parts.append(chunk)
        return parts[0] if len(parts) == 1 else b"".join(parts)

    async def read_start(self, limit: int) -> bytes:
        """The body's first `limit` bytes (an error body: its message comes first); the rest is not read."""
        parts: list[bytes] = []
        size = 0
        async for chunk in self.chunks():
            parts.append(chunk)
            size += len(chunk)
            if size >= limit:
                break
        return b"".join(parts)[:limit]

    async def aclose(self) -> None:
        """Close the response (and give its connection back to the pool)."""
        await self._response.aclose()

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


def _length_and_encoding(response: _LibResponse) -> tuple[int | None, bool]:
    """The declared `content-length` and whether a `content-encoding` is set, in one pass over the
    raw headers (each lookup by name in httpx's `Headers` decodes them all)."""
    declared: int | None = None
    encoded = False
    raw: list[tuple[bytes, bytes]] = getattr(response.headers, "raw", None) or []
    for name, value in raw:
        lowered = name.lower()
        if lowered == b"content-length" and value.isdigit():
            declared = int(value)
        elif lowered == b"content-encoding" and value.strip().lower() != b"identity":
            encoded = True
    return declared, encoded


def backend_name(client: object = None) -> str:
    """Which HTTP library to use: the given client's, else `IMP_HTTP_BACKEND`, else httpx2 when it is
    installed (about twice the requests per second of httpx 0.28 at high concurrency), else httpx."""
    if client is not None:
        return type(client).__module__.split(".")[0]
    chosen = os.environ.get("IMP_HTTP_BACKEND")
    return checked_backend(chosen, "IMP_HTTP_BACKEND") if chosen else _installed_default()


_BACKENDS = ("httpx", "httpx2")


def checked_backend(name: str, given_as: str) -> str:
    """A chosen HTTP library's name, refused when the LM is built if it is none imp speaks or is not
    installed (rather than an import error at the first request)."""
    if name not in _BACKENDS:
        raise ValueError(f"{given_as} is 'httpx' or 'httpx2', got {name!r}")
    if importlib.util.find_spec(name) is None:
        raise ModuleNotFoundError(f"{given_as}={name!r}, but {name} is not installed: pip install {name}", name=name)
    return name


@functools.cache
def _installed_default() -> str:
    return "httpx2" if importlib.util.find_spec("httpx2") is not None else "httpx"


def _is_client(client: object) -> bool:
    return (
        not isinstance(client, type)
        and callable(getattr(client, "build_request", None))
        and inspect.iscoroutinefunction(getattr(client, "send", None))
    )


def check_http_client(client: object, *, factory: bool = True) -> None:
    """Refuse, when the LM is built, an `http_client` that is not an async httpx-style client (or,
    with `factory`, a function that makes one: what it makes is checked when it is first called)."""
    if client is None or _is_client(client):
        return
    if factory and callable(client) and (isinstance(client, type) or not hasattr(client, "send")):
        return  # a function or a class that makes the client (`httpx.AsyncClient` itself)
    send = getattr(client, "send", None)
    kind = type(client).__module__.split(".")[0] + "." + type(client).__qualname__
    hint = " (a sync client: use httpx.AsyncClient)" if callable(send) else ""
    raise TypeError(
        f"http_client is an httpx.AsyncClient or an httpx2.AsyncClient, or a function that makes one, got {kind}{hint}"
    )


def _kept_alive(client: object) -> int:
    """How many connections a client's pools hold (0 when it has none, or no pool imp can see:
    a `MockTransport`, a custom transport)."""
    transports = [getattr(client, "_transport", None), *(getattr(client, "_mounts", None) or {}).values()]
    held = 0
    for transport in transports:
        connections = getattr(getattr(transport, "_pool", None), "connections", None)
        if isinstance(connections, list):
            held += len(connections)
    return held


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
        self._factory: Callable[[], object] | None = None
        if http_client is not None and not _is_client(http_client) and callable(http_client):
            self._factory = http_client
        """A function that makes the client: called once per event loop, like imp's own pool."""
        self._client: object = None if self._factory is not None else http_client
        self._owns_client = self._client is None
        self._given = http_client is not None
        """The user gave the client (or the function that makes it): its transport is theirs."""
        self._backend = backend or backend_name(self._client)
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
            _redact_library_log(self._backend)
        return self._module

    def _get_client(self) -> object:
        """The client to send with in this event loop.

        A pool's kept-alive connections belong to the event loop that opened them. Each `imp.call_sync`
        runs its own loop, so an LM made once and called twice meets a pool whose loop is closed: imp's
        own pool (or one its `http_client` function made) is left behind and a new one made. A client
        the user made cannot be remade: when it holds connections of another loop it is refused
        before anything is sent (sent on such a connection, a request reaches the server and its reply
        is lost: `RuntimeError: Event loop is closed`).
        """
        loop = _running_loop()
        moved = self._loop is not None and loop is not self._loop
        if moved and not self._owns_client and _kept_alive(self._client):
            raise HTTPFailure(
                "client",
                "the http_client given to imp.lm(...) holds connections of another event loop (each "
                "imp.call_sync runs its own), which this one cannot use: pass a function that makes the "
                "client (http_client=lambda: httpx.AsyncClient(...): imp makes one per event loop), "
                "make the client inside the async code that uses it, or leave http_client out",
                sent=False,
            )
        self._loop = loop
        if self._owns_client and moved:
            self._client = None
        if self._client is None:
            self._client = self._make_client()
        return self._client

    def _make_client(self) -> object:
        if self._factory is not None:
            client = self._factory()
            check_http_client(client, factory=False)
            self._backend, self._module = backend_name(client), None
            return client
        lib = self._lib()
        limits = lib.Limits(max_connections=self._max_connections, max_keepalive_connections=self._max_keepalive)
        self._default_timeout = self._timeout(None)
        return lib.AsyncClient(limits=limits, timeout=self._default_timeout, follow_redirects=False)

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

    def prepare(self) -> None:
        """Make this event loop's client now, before a request waits for a slot: building one loads the
        TLS certificates (a few hundred ms), which would otherwise delay a request already let through."""
        self._get_client()

    async def send(self, url: str, content: Body, headers: Mapping[str, str], cap: float | None) -> Response:
        """POST a body and open the response at its headers; the caller closes it (`Response.aclose`)."""
        client = self._get_client()
        if not isinstance(content, bytes):  # its exact length, or the library would send it chunked
            headers = {**headers, "content-length": str(len(content))}
        request = client.build_request(  # type: ignore[attr-defined]
            "POST", url, content=content, headers=headers, timeout=self._timeout(cap)
        )
        return Response(await self._send(client, request), self)

    async def _send(self, client: object, request: object) -> _LibResponse:
        """`client.send(request, stream=True)`, with the library's and a user's client's failures made plain."""
        try:
            response: _LibResponse = await client.send(request, stream=True)  # type: ignore[attr-defined]
        except RuntimeError as exc:
            raise _client_failure(exc) from None
        except Exception as exc:
            if isinstance(exc, self._lib().TransportError):
                raise self.failure(exc, sent=True) from None
            if self._given:  # the user's transport failing in a way of its own: not imp's bug to show raw
                raise HTTPFailure("client", f"the http_client failed: {type(exc).__name__}: {exc}", sent=True) from None
            raise
        return response

    async def aclose(self) -> None:
        """Close the pool (only when this transport made the client)."""
        if self._client is not None and self._owns_client:
            client, self._client = self._client, None
            await client.aclose()  # type: ignore[attr-defined]


def _client_failure(exc: RuntimeError) -> HTTPFailure:
    """A `RuntimeError` from sending: the user's client is closed, bound to another loop, or broken.
    Never retried: a request sent on a connection of a closed loop may have reached the server."""
    text = str(exc)
    if "closed" in text and "client" in text.lower():
        return HTTPFailure(
            "client",
            "the http_client given to imp.lm(...) is closed: keep it open while the LM is in use "
            "(imp never closes a client it did not make), or leave http_client out",
            sent=False,
        )
    return HTTPFailure("client", f"the http_client failed: RuntimeError: {text}", sent=True)


class _URLsWithoutCredentials(logging.Filter):
    """Takes credentials out of the URLs the HTTP library logs ("HTTP Request: POST <url> ...", at INFO):
    a base URL's userinfo and a `?key=` would otherwise reach every log that takes the library's lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.args, tuple):
            record.args = tuple(
                safe_url(str(arg)) if str(arg).startswith(("http://", "https://")) else arg for arg in record.args
            )
        return True


@functools.cache
def _redact_library_log(backend: str) -> None:
    logging.getLogger(backend).addFilter(_URLsWithoutCredentials())


def _running_loop() -> object:
    """The running event loop: asyncio's own (a cheap C call, on every request), else anyio's token's."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return anyio.lowlevel.current_token().native_token
