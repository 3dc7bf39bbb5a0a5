"""What every HTTP provider client shares: options, one pooled client, retries, time caps, cache, usage.

A provider module subclasses `HTTPLM` and supplies the wire format: the URL, headers, the request
body, how to read a whole response and how to read a stream (`StreamState`).

One send chain serves `request` and `stream`, as httpx's `AsyncClient.send(stream=...)` serves
both: `_send` steps down from what the server refused, `_exchange` builds the body and retries,
`_attempt` opens the response at its headers and classifies a refusal; a plain request is that
response read whole, a stream is it read as it arrives (`imp.models._stream`).
"""

from __future__ import annotations

import abc
import dataclasses
import os
from collections.abc import AsyncGenerator, AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, aclosing
from dataclasses import dataclass
from typing import Any, ClassVar, Unpack, cast

from imp._redact import redact, redact_text
from imp.errors import (
    AuthenticationError,
    ContentFiltered,
    DeadlineExceeded,
    LMError,
    RateLimited,
    StreamBroken,
    UnsupportedOption,
)
from imp.models._catalog import card_for
from imp.models._credentials import Credentials
from imp.models._gate import RequestGate, request_gate
from imp.models._guard import prepare, settle_failure, settle_response
from imp.models._log import log_retry, log_step_down
from imp.models._media_wire import encode_body
from imp.models._options import ChatOptions, Defaults, Options, check_client_settings, check_options
from imp.models._prices import Prices, as_prices, priced
from imp.models._response import as_deltas
from imp.models._stepdown import StepDowns
from imp.models._stream import (
    EmptyStream,
    StreamReader,
    StreamState,
    answered_whole,
    empty_stream_error,
    malformed,
    read_json,
    too_large_error,
)
from imp.models._transport import (
    Body,
    BodyTooLarge,
    HTTPFailure,
    Response,
    Transport,
    backend_name,
    check_http_client,
    checked_backend,
)
from imp.models._wire import forces_tool
from imp.models.base import LM, LMCapabilities, LMResponse, Message, StreamEvent
from imp.models.cache import ResponseCache, cache_key, resolve_cache
from imp.models.errors import at_deadline, classify_error, error_from_payload, transport_error
from imp.models.retry import RetryPolicy, call_with_retries, with_max_retries
from imp.runtime.budget import open_budgets
from imp.runtime.deadline import time_left
from imp.runtime.usage import record_usage

__all__ = ["DEFAULT_MAX_RESPONSE_BYTES", "HTTPLM", "StreamState"]

DEFAULT_MAX_RESPONSE_BYTES = 8 * 1024 * 1024
"""8 MiB: a reply over it is refused (`imp.ResponseTooLarge`). The longest replies models write
(128k output tokens, about 0.5 MB of text) fit sixteen times over; a hostile server's 100 MB does not."""


@dataclass(frozen=True, slots=True)
class _Sent:
    """What one send returned: the whole response, or a stream opened at its first item."""

    response: LMResponse | None = None
    first: StreamEvent | None = None
    rest: AsyncIterator[StreamEvent] | None = None
    reader: StreamReader | None = None


class HTTPLM(LM):
    """An LM spoken to over HTTP with one shared connection pool per value."""

    default_base_url: str = ""
    api_key_env: str | None = None
    """The environment variable the key is read from, for the provider's own service only."""
    options_type: ClassVar[type] = ChatOptions
    """The `TypedDict` of the options this provider takes (`imp.models._options`)."""
    unsupported_options: frozenset[str] = frozenset()
    """Options of `options_type` this provider refuses (its API has no such field)."""
    step_down_options: frozenset[str] = frozenset()
    """Refused options this client steps down from instead of failing (see `imp.models._stepdown`)."""
    default_max_tokens: int | None = None
    """The `max_tokens` the provider is sent when a request gives none (Anthropic requires one)."""
    defaults: Options

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        provider: str | None = None,
        timeout: float = 120.0,
        connect_timeout: float = 10.0,
        max_retries: int = 2,
        retry_policy: RetryPolicy | None = None,
        cache: ResponseCache | bool | None = None,
        capabilities: LMCapabilities | None = None,
        http_client: object = None,
        max_connections: int | None = 100,
        max_keepalive_connections: int | None = 100,
        http_backend: str | None = None,
        headers: Mapping[str, str] | None = None,
        prices: Prices | Mapping[str, float] | None = None,
        max_response_bytes: int | None = DEFAULT_MAX_RESPONSE_BYTES,
        context_window: int | None = None,
        **defaults: Unpack[Defaults],
    ) -> None:
        if provider is not None:
            self.provider = provider
        self.model = model
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        check_client_settings(
            self.base_url, timeout=timeout, connect_timeout=connect_timeout, max_response_bytes=max_response_bytes
        )
        check_http_client(http_client)
        if api_key is None and self.api_key_env and self.own_service:
            # The environment's key goes only to the service it is named for (`_credentials`).
            api_key = os.environ.get(self.api_key_env) or None
        if capabilities is not None:
            self.capabilities = capabilities
        self._declared = self.capabilities
        self._stepped = StepDowns()
        self._retry = retry_policy or RetryPolicy()
        if max_retries is not None:
            self._retry = with_max_retries(self._retry, max_retries)
        self._cache = cache
        self.prices = as_prices(prices)
        if context_window is not None and (not isinstance(context_window, int) or context_window <= 0):
            raise ValueError(
                f"context_window is the model's window in tokens (a whole number > 0), got {context_window!r}"
            )
        card = card_for(self.provider, model) if self.own_service else None
        self.context_window = context_window or (card.context_window if card is not None else None)
        self._extra_headers = dict(headers or {})
        self._timeout = timeout
        self.max_response_bytes = max_response_bytes
        """The most a reply may hold (see `DEFAULT_MAX_RESPONSE_BYTES`); None: no limit."""
        self._transport = Transport(
            connect_timeout=connect_timeout,
            read_timeout=timeout,
            max_connections=max_connections,
            max_keepalive=max_keepalive_connections,
            http_client=http_client,
            backend=checked_backend(http_backend, "http_backend") if http_backend else backend_name(http_client),
        )
        self._step = 0
        self.check_options(defaults)
        self.defaults = cast(Options, defaults)
        self._credentials = Credentials(
            api_key,
            headers={**self._extra_headers, **(defaults.get("extra_headers") or {})},
            base_url=self.base_url,
            body=defaults.get("extra_body"),
        )

    # -- what a provider module supplies ------------------------------------------------------

    @property
    @abc.abstractmethod
    def url(self) -> str:
        """Where requests are POSTed."""

    @abc.abstractmethod
    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        """The provider's credential and version headers."""

    @abc.abstractmethod
    def build_body(self, messages: Sequence[Message], options: Options, *, stream: bool) -> dict[str, object]:
        """The JSON request body for these messages and (already checked) options."""

    @abc.abstractmethod
    def parse_response(self, body: Any, headers: Mapping[str, str], *, step: int) -> LMResponse:
        """Normalise one whole response body; raise `LMError` if it is not a completion."""

    @abc.abstractmethod
    def stream_state(self, *, step: int, headers: Mapping[str, str]) -> StreamState:
        """A fresh reader for one streamed response."""

    def request_headers(self, options: Options) -> dict[str, str]:
        """Headers a call's options need (a beta flag, say); none by default."""
        return {}

    # -- settings ------------------------------------------------------------------------------

    @property
    def model_key(self) -> str:
        """`"provider:model"`, the key usage is recorded under."""
        return f"{self.provider}:{self.model}"

    @property
    def own_service(self) -> bool:
        """Whether requests go to the provider's own service (its default `base_url`): only then does
        imp's table of prices and context windows apply."""
        return self.base_url == self.default_base_url.rstrip("/")

    @property
    def secrets(self) -> tuple[str, ...]:
        """Values that must never be shown: the API key, and every credential given in headers, the
        base URL (userinfo, `?key=`) or `extra_body`, at construction or in a call (longest first)."""
        return self._credentials.secrets

    def check_options(self, options: Mapping[str, object]) -> None:
        """Refuse, before anything is sent, an option this provider cannot take."""
        check_options(self.provider, options, self.options_type, refused=self.unsupported_options)

    def _merged(self, options: Mapping[str, object]) -> Options:
        merged = {**self.defaults, **options}
        self.check_options(merged)
        checked = cast(Options, {k: v for k, v in merged.items() if v is not None})
        self._credentials.remember(checked.get("extra_headers"), checked.get("extra_body"))
        return checked

    def _headers(self, options: Options) -> dict[str, str]:
        """The request's headers, each name once (lower-cased): the key's and the provider's, then the
        ones you give (`headers=`, then the call's `extra_headers`), which win over them."""
        headers = {"content-type": "application/json", **self.auth_headers(self._credentials.api_key)}
        for given in (self.request_headers(options), self._extra_headers, options.get("extra_headers")):
            headers.update({name.lower(): value for name, value in (given or {}).items()})
        self._check_credential(headers)
        return headers

    def _check_credential(self, headers: Mapping[str, str]) -> None:
        """Refuse, before sending, a request to the provider's own service that carries no key.

        A local or compatible server (another `base_url`) may need none, so only the default URL
        is checked; a key given through `headers=` counts.
        """
        if self._credentials.api_key or not self.api_key_env or not self.own_service:
            return
        if set(headers) & {"authorization", "x-api-key", "api-key"}:
            return
        raise AuthenticationError(
            f"no API key: set {self.api_key_env} in the environment or pass "
            f"imp.lm(..., api_key=...); a local server takes base_url= instead",
            provider=self.provider,
        )

    def _policy(self, options: Options) -> RetryPolicy:
        if "max_retries" in options:
            return with_max_retries(self._retry, int(options["max_retries"]))
        return self._retry

    def _cap(self, options: Options) -> float | None:
        """The read timeout for this call: the `timeout` option capped by the deadline's time left."""
        cap = options.get("timeout")
        left = time_left()
        if left is not None:
            if left <= 0:
                raise DeadlineExceeded("the deadline passed before the request was sent")
            cap = left if cap is None else min(float(cap), left)
        return None if cap is None else float(cap)

    def _streams(self, options: Options) -> bool:
        """Whether this request may be streamed: the server streams, and streams tools when it has them."""
        capabilities = self.capabilities
        return capabilities.streaming and (capabilities.stream_tool_calls or not options.get("tools"))

    def _next_step(self) -> int:
        self._step += 1
        return self._step

    def _log_retry(self, attempt: int, error: LMError, wait: float) -> None:
        log_retry(self.model_key, attempt, error, wait)

    def _step_down(self, error: UnsupportedOption, sent: Options) -> bool:
        """Remember a refused option and say so; whether the request is worth sending again."""
        if error.option not in self.step_down_options and error.option != "stream":
            return False
        step = self._stepped.step(error, sent)
        if step is False:
            return False
        if step is not True:
            self.capabilities = self._stepped.capabilities(self._declared)
            log_step_down(self.model_key, step.option, step.sent, step.now, error)
        return True

    # -- the send chain ------------------------------------------------------------------------

    async def request(self, messages: Sequence[Message], **options: Unpack[Options]) -> LMResponse:
        """Send one request (retrying what may succeed later, stepping down from a refused option)
        and return the normalised response."""
        merged, reservation = self._merged(options), None
        if open_budgets.get() or self.context_window is not None:
            merged, reservation = await prepare(self, messages, merged, default_output=self.default_max_tokens)
        try:
            sent = await self._send(messages, merged, cache=resolve_cache(merged.get("cache", self._cache)))
        except BaseException as error:
            settle_failure(reservation, error)
            raise
        assert sent.response is not None
        settle_response(reservation, sent.response)
        return sent.response

    async def stream(self, messages: Sequence[Message], **options: Unpack[Options]) -> AsyncIterator[StreamEvent]:
        """Yield text, reasoning and tool-call deltas, then one final event with the whole response.

        A stream that fails before its first delta is retried like `request` (and a refused option
        stepped down from): nothing reached the caller yet. One that fails after content arrived
        raises a retryable `StreamBroken` saying how much had arrived (never a silent restart), or
        `DeadlineExceeded` when the deadline has passed. Leaving the loop early closes the HTTP stream.
        A request the server cannot stream (see `LMCapabilities.stream_tool_calls`) is read whole and
        handed on as deltas. Streams are never cached.
        """
        merged, reservation = self._merged(options), None
        if open_budgets.get() or self.context_window is not None:
            merged, reservation = await prepare(self, messages, merged, default_output=self.default_max_tokens)
        try:
            async with aclosing(self._stream(messages, merged)) as events:
                async for event in events:
                    if event.kind == "final" and event.response is not None:
                        settle_response(reservation, event.response)
                    yield event
        except BaseException as error:  # a failure, a cancellation, or the caller leaving early
            settle_failure(reservation, error)
            raise

    async def _stream(self, messages: Sequence[Message], merged: Options) -> AsyncGenerator[StreamEvent]:
        async with AsyncExitStack() as stack:
            sent = await self._send(messages, merged, stack=stack)
            if sent.response is not None:
                for event in as_deltas(sent.response):
                    yield event
                return
            assert sent.first is not None and sent.rest is not None and sent.reader is not None
            if sent.first.kind == "final":  # the body ended (well) before any delta
                assert sent.first.response is not None
                yield StreamEvent(kind="final", response=self._finalise(sent.first.response))
                return
            yield sent.first
            arrived = sent.reader.arrived
            try:
                async for event in sent.rest:
                    if event.kind != "final":
                        yield event
                    else:
                        assert event.response is not None
                        final = self._finalise(event.response)
            except HTTPFailure as failure:
                if at_deadline(failure.kind):
                    raise DeadlineExceeded("the deadline passed while the stream was being read") from None
                raise StreamBroken(
                    redact_text(
                        f"the stream broke after {arrived} had arrived ({failure.kind}): {failure}", self.secrets
                    ),
                    provider=self.provider,
                    code="stream_broken",
                ) from None
            except StreamBroken as error:
                raise StreamBroken(
                    f"{error.message}, after {arrived} had arrived",
                    provider=error.provider,
                    code=error.code,
                    request_id=error.request_id,
                ) from None
        yield StreamEvent(kind="final", response=final)

    async def _send(
        self,
        messages: Sequence[Message],
        options: Options,
        *,
        stack: AsyncExitStack | None = None,
        cache: ResponseCache | None = None,
    ) -> _Sent:
        """Send until the server takes the request: each refused option is stepped down from once
        (remembered for this LM), and the request sent again as the server takes it. A stream
        (`stack` given: it closes the stream) the server cannot give is read whole."""
        while True:
            sent = self._stepped.apply(options)
            streamed = stack is not None and self._streams(sent)
            try:
                return await self._exchange(messages, sent, stack if streamed else None, cache)
            except UnsupportedOption as error:
                if not self._step_down(error, sent):
                    raise

    async def _exchange(
        self, messages: Sequence[Message], options: Options, stack: AsyncExitStack | None, cache: ResponseCache | None
    ) -> _Sent:
        """One request's body, sent with retries (or answered from the cache when read whole)."""
        body = self.build_body(messages, options, stream=stack is not None)
        content = encode_body(body)  # bytes, or a body that streams its media's base64 as it is sent
        headers = self._headers(options)
        if stack is not None:
            headers["accept"] = "text/event-stream"
        step = self._next_step()
        forced = forces_tool(body)

        async def attempt(number: int) -> _Sent:
            return await self._attempt(content, headers, options, step=step, forced=forced, stack=stack)

        async def fetch() -> LMResponse:
            sent = await call_with_retries(attempt, self._policy(options), on_retry=self._log_retry)
            assert sent.response is not None
            return sent.response

        if cache is not None and stack is None:
            key = cache_key(self.provider, self.base_url, body, options.get("rollout_id"), headers=headers)
            return _Sent(response=await cache.get_or_fetch(key, fetch))
        return await call_with_retries(attempt, self._policy(options), on_retry=self._log_retry)

    async def _attempt(
        self,
        content: Body,
        headers: Mapping[str, str],
        options: Options,
        *,
        step: int,
        forced: bool,
        stack: AsyncExitStack | None,
    ) -> _Sent:
        """One HTTP attempt: through the gate, opened at its headers, a refusal classified; then the body
        read whole, or read to its first delta (`stack` closes the stream when the caller is done)."""
        gate = request_gate.get()
        cap = self._cap(options)
        if gate is not None:  # a shared rate counts starts: a cold client's set-up must not delay a granted start
            try:
                self._transport.prepare()
            except HTTPFailure as failure:
                raise self._failure(failure) from None
        ticket = None if gate is None else await gate.enter()  # a stream holds its slot until it is closed
        response: Response | None = None
        deltas: AsyncGenerator[StreamEvent] | None = None
        try:
            response = await self._transport.send(self.url, content, headers, cap)
            if response.status >= 300:
                error = await self._refusal(response, forced)
                told = gate
                if stack is None:  # a request's slot is given back when its response is in
                    await response.aclose()
                    _leave(gate, ticket)
                    gate, response = None, None
                if told is not None and isinstance(error, RateLimited):
                    told.rate_limited(error.retry_after)
                raise error
            if stack is None:
                return _Sent(response=await self._read_whole(response, step))
            if answered_whole(response.headers):
                # A server that ignores `stream` answers with the whole completion: read as one, handed on as deltas.
                raw = await response.read(self.max_response_bytes)
                if not raw.strip():  # nothing at all: as an empty stream (with tools, the step down)
                    raise empty_stream_error(EmptyStream(0), options, self.provider)
                whole = self.parse_whole(raw, response.headers, status=response.status, step=step)
                return _Sent(response=self._finalise(whole))
            reader = StreamReader(
                self.stream_state(step=step, headers=response.headers),
                response.chunks(),
                provider=self.provider,
                limit=self.max_response_bytes,
                stall=cap if cap is not None else self._timeout,
                secrets=self.secrets,
            )
            deltas = reader.deltas()
            try:
                first = await anext(deltas)
            except EmptyStream as empty:
                raise empty_stream_error(empty, options, self.provider) from None
            if gate is not None:
                stack.callback(gate.leave, ticket)
            stack.push_async_callback(response.aclose)
            stack.push_async_callback(deltas.aclose)
            sent = _Sent(first=first, rest=deltas, reader=reader)
            response = deltas = gate = None  # the caller's stack closes them from here
            return sent
        except HTTPFailure as failure:
            raise self._failure(failure) from None
        except BodyTooLarge as too_large:
            raise too_large_error(too_large, self.provider) from None
        finally:
            if deltas is not None:
                await deltas.aclose()
            if response is not None:
                await response.aclose()
            _leave(gate, ticket)

    async def _refusal(self, response: Response, forced: bool) -> LMError:
        """The `LMError` for a non-2xx response, from its body (read up to `max_response_bytes`)."""
        # Bounded like a reply: a server's validation error may echo the request many times (llama-cpp-python
        # echoes a media request once per message type it tried), and a cut body is no JSON to classify.
        limit = self.max_response_bytes
        error_body = await (response.read_start(limit) if limit is not None else response.read(None))
        return classify_error(
            response.status,
            error_body,
            response.headers,
            provider=self.provider,
            secrets=self.secrets,
            forced_tool_choice=forced,
            url=self.url,
        )

    async def _read_whole(self, response: Response, step: int) -> LMResponse:
        raw = await response.read(self.max_response_bytes)
        return self._finalise(self.parse_whole(raw, response.headers, status=response.status, step=step))

    def parse_whole(self, raw: bytes, headers: Mapping[str, str], *, status: int, step: int) -> LMResponse:
        """A whole 2xx body read into a response; an `imp.InvalidResponse` for one that is not JSON, nests
        too deeply or is not the provider's shape, never a `KeyError` from deep inside the reader."""
        parsed = read_json(raw, provider=self.provider, status=status, secrets=self.secrets)
        try:
            return self.parse_response(parsed, headers, step=step)
        except LMError:
            raise
        except (ValueError, TypeError, AttributeError, KeyError, IndexError, RecursionError) as exc:
            text = raw[:300].decode("utf-8", errors="replace")
            raise malformed(exc, "a response body", text, provider=self.provider, secrets=self.secrets) from None

    def _failure(self, failure: HTTPFailure) -> LMError | DeadlineExceeded:
        return transport_error(failure.kind, str(failure), provider=self.provider, secrets=self.secrets, url=self.url)

    def _finalise(self, response: LMResponse) -> LMResponse:
        """Price and record usage, then refuse a content-filtered completion (it was billed all the same)."""
        if self.prices is not None and response.usage.cost is None:
            response = dataclasses.replace(response, usage=priced(response.usage, self.prices))
        record_usage(self.model_key, response.usage)
        if response.finish_reason == "content_filter":
            raise ContentFiltered(
                f"the provider's content filter stopped the completion: {response.text}".rstrip(": "),
                provider=self.provider,
                code="content_filter",
                request_id=response.request_id,
            )
        return response

    def stream_error(self, payload: object, *, status: int | None = None, request_id: str | None = None) -> LMError:
        """The `LMError` for an error event or error object inside a 200 stream (with the request's id,
        as the stream's 200 or its first event gave it)."""
        return error_from_payload(
            status=status,
            body=payload,
            provider=self.provider,
            secrets=self.secrets,
            in_stream=True,
            request_id=request_id,
        )

    async def aclose(self) -> None:
        """Close the connection pool (a client the user gave is left open)."""
        await self._transport.aclose()

    def dump(self) -> dict[str, object]:
        """A JSON-friendly description to rebuild this client with `imp.lm(**dump)`; never the key."""
        data: dict[str, object] = {"model": self.model_key}
        if not self.own_service:
            data["base_url"] = redact_text(self.base_url, self.secrets)
        if self.prices is not None:
            data["prices"] = self.prices.dump()
        data.update(redact(dict(self.defaults), self.secrets))
        return data

    def __repr__(self) -> str:
        where = "" if self.own_service else f", base_url={self.base_url!r}"
        return redact_text(f"{type(self).__name__}({self.provider}:{self.model}{where})", self.secrets)


def _leave(gate: RequestGate | None, ticket: object) -> None:
    """Give a request's slot back to the gate (when there is one)."""
    if gate is not None:
        gate.leave(ticket)
