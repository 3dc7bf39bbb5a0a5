"""What every HTTP provider client shares: options, one pooled client, retries, time caps, cache, usage.

A provider module subclasses `HTTPLM` and supplies the wire format: the URL, headers, the request
body, how to read a whole response and how to read a stream (`StreamState`).
"""

from __future__ import annotations

import abc
import json
import os
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING, Any

from imp._redact import redact_text
from imp.errors import (
    AuthenticationError,
    ConnectionFailed,
    ContentFiltered,
    DeadlineExceeded,
    InvalidResponse,
    LMError,
    RateLimited,
    StreamBroken,
    UnsupportedOption,
)
from imp.models._gate import request_gate
from imp.models._media_wire import encode_body
from imp.models._prices import Prices, as_prices, priced
from imp.models._stepdown import StepDowns
from imp.models._wire import forces_tool, tool_choice_name
from imp.models.base import LM, LMCapabilities, LMResponse, Message, StreamEvent
from imp.models.errors import classify_error, error_from_payload, safe_url
from imp.models.retry import RetryPolicy, call_with_retries
from imp.runtime.deadline import time_left
from imp.runtime.usage import record_usage

if TYPE_CHECKING:
    from imp.models._sse import SSEEvent
    from imp.models._stream import Opened
    from imp.models._transport import Transport
    from imp.models.cache import ResponseCache

__all__ = ["CONTROL_OPTIONS", "REQUEST_OPTIONS", "HTTPLM", "StreamState"]

REQUEST_OPTIONS = frozenset(
    {
        "temperature",
        "max_tokens",
        "top_p",
        "stop",
        "seed",
        "reasoning_effort",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "response_format",
        "extra_body",
        "extra_headers",
        "n",
    }
)
"""Options that shape the request body (`extra_body` is merged into it verbatim: the passthrough).
`n` is accepted only as 1 (one response per request) and never sent."""

CONTROL_OPTIONS = frozenset({"timeout", "max_retries", "cache", "rollout_id"})
"""Options that steer the client and are never sent (`rollout_id` only varies the cache key)."""


class StreamState(abc.ABC):
    """Reads one provider's SSE events into deltas and, at the end, the whole response."""

    @abc.abstractmethod
    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        """Take one SSE event; return the deltas it carries. Raise `LMError` for an error event."""

    @abc.abstractmethod
    def finish(self) -> LMResponse:
        """The whole response once the body ended; raise `LMError` if the terminal event never came."""


class HTTPLM(LM):
    """An LM spoken to over HTTP with one shared connection pool per value."""

    default_base_url: str = ""
    api_key_env: str | None = None
    unsupported_options: frozenset[str] = frozenset()
    step_down_options: frozenset[str] = frozenset()
    """Refused options this client steps down from instead of failing (see `imp.models._stepdown`)."""

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
        http_client: Any = None,
        max_connections: int | None = 100,
        max_keepalive_connections: int | None = 100,
        http_backend: str | None = None,
        headers: Mapping[str, str] | None = None,
        prices: Prices | Mapping[str, Any] | None = None,
        **defaults: Any,
    ) -> None:
        if provider is not None:
            self.provider = provider
        self.model = model
        if api_key is None and self.api_key_env:
            api_key = os.environ.get(self.api_key_env) or None
        self.__api_key = api_key
        self.base_url = (base_url or self.default_base_url).rstrip("/")
        _check_client_options(self.base_url, timeout=timeout, connect_timeout=connect_timeout)
        if capabilities is not None:
            self.capabilities = capabilities
        self._declared = self.capabilities
        self._stepped = StepDowns()
        self._retry = retry_policy or RetryPolicy()
        if max_retries is not None:
            self._retry = _with_max_retries(self._retry, max_retries)
        self._cache = cache
        self.prices = as_prices(prices)
        self._extra_headers = dict(headers or {})
        self._timeout = timeout
        self._connect_timeout = connect_timeout
        self._http_client = http_client
        from imp.models._transport import backend_name

        self._http_backend = http_backend or backend_name(http_client)
        self._max_connections = max_connections
        self._max_keepalive = max_keepalive_connections
        self._transport: Transport | None = None
        self._step = 0
        self.check_options(defaults)
        self.defaults: dict[str, Any] = dict(defaults)

    # -- what a provider module supplies ------------------------------------------------------

    @property
    @abc.abstractmethod
    def url(self) -> str:
        """Where requests are POSTed."""

    @abc.abstractmethod
    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        """The provider's credential and version headers."""

    @abc.abstractmethod
    def build_body(self, messages: Sequence[Message], options: Mapping[str, Any], *, stream: bool) -> dict[str, Any]:
        """The JSON request body for these messages and (already checked) options."""

    @abc.abstractmethod
    def parse_response(self, body: Any, headers: Mapping[str, str], *, step: int) -> LMResponse:
        """Normalise one whole response body; raise `LMError` if it is not a completion."""

    @abc.abstractmethod
    def stream_state(self, *, step: int, headers: Mapping[str, str]) -> StreamState:
        """A fresh reader for one streamed response."""

    def request_headers(self, options: Mapping[str, Any]) -> dict[str, str]:
        """Headers a call's options need (a beta flag, say); none by default."""
        return {}

    # -- shared machinery ----------------------------------------------------------------------

    @property
    def model_key(self) -> str:
        """`"provider:model"`, the key usage is recorded under."""
        return f"{self.provider}:{self.model}"

    @property
    def secrets(self) -> tuple[str, ...]:
        """Values that must never be shown (the API key)."""
        return (self.__api_key,) if self.__api_key else ()

    def check_options(self, options: Mapping[str, Any]) -> None:
        """Refuse, before anything is sent, an option this provider cannot take."""
        unknown = sorted(k for k in options if k not in REQUEST_OPTIONS and k not in CONTROL_OPTIONS)
        if unknown:
            names = ", ".join(unknown)
            raise TypeError(f"{self.provider} got unknown request option(s): {names} (use extra_body= for others)")
        refused = sorted(k for k in options if k in self.unsupported_options and options[k] is not None)
        if refused:
            raise ValueError(f"{self.provider} does not take the option(s): {', '.join(refused)}")
        choice = options.get("tool_choice")
        if choice is not None:
            tool_choice_name(choice)  # raises on a malformed value
            if choice not in ("auto", "none") and not options.get("tools") and "tools" in options:
                raise ValueError("tool_choice forces a tool but no tools were given")
        if options.get("n") not in (None, 1):
            raise ValueError(f"{self.provider}: imp asks for one completion per request (n=1), got n={options['n']!r}")
        extra = options.get("extra_body")
        if extra is not None and not isinstance(extra, Mapping):
            raise TypeError("extra_body must be a mapping of fields to add to the request body")

    def _merged(self, options: Mapping[str, Any]) -> dict[str, Any]:
        merged = {**self.defaults, **options}
        self.check_options(merged)
        return {k: v for k, v in merged.items() if v is not None}

    def _transport_for_call(self) -> Transport:
        if self._transport is None:
            from imp.models._transport import Transport

            self._transport = Transport(
                connect_timeout=self._connect_timeout,
                read_timeout=self._timeout,
                max_connections=self._max_connections,
                max_keepalive=self._max_keepalive,
                http_client=self._http_client,
                backend=self._http_backend,
            )
        return self._transport

    def _headers(self, options: Mapping[str, Any]) -> dict[str, str]:
        headers = {"content-type": "application/json", **self._extra_headers}
        headers.update(options.get("extra_headers") or {})
        headers.update(self.request_headers(options))
        headers.update(self.auth_headers(self.__api_key))
        self._check_credential(headers)
        return headers

    def _check_credential(self, headers: Mapping[str, str]) -> None:
        """Refuse, before sending, a request to the provider's own service that carries no key.

        A local or compatible server (another `base_url`) may need none, so only the default URL
        is checked; a key given through `headers=` counts.
        """
        if self.__api_key or not self.api_key_env or self.base_url != self.default_base_url.rstrip("/"):
            return
        if {k.lower() for k in headers} & {"authorization", "x-api-key", "api-key"}:
            return
        raise AuthenticationError(
            f"no API key: set {self.api_key_env} in the environment or pass "
            f"imp.lm(..., api_key=...); a local server takes base_url= instead",
            provider=self.provider,
        )

    def _policy(self, options: Mapping[str, Any]) -> RetryPolicy:
        if "max_retries" in options:
            return _with_max_retries(self._retry, int(options["max_retries"]))
        return self._retry

    def _cap(self, options: Mapping[str, Any]) -> float | None:
        """The read timeout for this call: the `timeout` option capped by the deadline's time left."""
        cap = options.get("timeout")
        left = time_left()
        if left is not None:
            if left <= 0:
                raise DeadlineExceeded("the deadline passed before the request was sent")
            cap = left if cap is None else min(float(cap), left)
        return None if cap is None else float(cap)

    def _resolve_cache(self, options: Mapping[str, Any]) -> ResponseCache | None:
        from imp.models.cache import resolve_cache

        return resolve_cache(options.get("cache", self._cache))

    def _next_step(self) -> int:
        self._step += 1
        return self._step

    def _log_retry(self, attempt: int, error: LMError, wait: float) -> None:
        from imp.models._log import log_retry

        log_retry(self.model_key, attempt, error, wait)

    def _step_down(self, error: UnsupportedOption, sent: Mapping[str, Any]) -> bool:
        """Remember a refused option and say so; whether the request is worth sending again."""
        if error.option not in self.step_down_options:
            return False
        step = self._stepped.step(error, sent)
        if step is False:
            return False
        if step is not True:
            from imp.models._log import log_step_down

            self.capabilities = self._stepped.capabilities(self._declared)
            log_step_down(self.model_key, step, error)
        return True

    def _failure(self, failure: Exception) -> LMError | DeadlineExceeded:
        from imp.models._transport import HTTPFailure

        assert isinstance(failure, HTTPFailure)
        if _deadline_passed(failure.kind):
            return DeadlineExceeded("the deadline passed while waiting for the provider")
        message = redact_text(f"request failed ({failure.kind}): {failure} (POST {safe_url(self.url)})", self.secrets)
        return ConnectionFailed(
            message,
            provider=self.provider,
            code=f"{failure.kind}_error",
            url=redact_text(safe_url(self.url), self.secrets),
        )

    async def request(self, messages: Sequence[Message], **options: Any) -> LMResponse:
        """Send one request (retrying what may succeed later, stepping down from a refused option)
        and return the normalised response."""
        merged = self._merged(options)
        cache = self._resolve_cache(merged)
        while True:
            sent = self._stepped.apply(merged)
            try:
                return await self._cached_fetch(messages, sent, cache)
            except UnsupportedOption as error:
                if not self._step_down(error, sent):
                    raise

    async def _cached_fetch(
        self, messages: Sequence[Message], options: Mapping[str, Any], cache: ResponseCache | None
    ) -> LMResponse:
        """One request's body, sent (with retries) or answered from the cache."""
        body = self.build_body(messages, options, stream=False)
        if cache is None:
            return await self._fetch(body, options)
        from imp.models.cache import cache_key

        key = cache_key(self.provider, self.base_url, body, options.get("rollout_id"))
        return await cache.get_or_fetch(key, lambda: self._fetch(body, options))

    async def _fetch(self, body: dict[str, Any], options: Mapping[str, Any]) -> LMResponse:
        content = encode_body(body)
        headers = self._headers(options)
        transport = self._transport_for_call()
        step = self._next_step()
        forced = forces_tool(body)

        async def attempt(number: int) -> LMResponse:
            from imp.models._transport import HTTPFailure

            gate = request_gate.get()
            ticket = None if gate is None else await gate.enter()
            try:
                raw = await transport.post(self.url, content, headers, self._cap(options))
            except HTTPFailure as failure:
                raise self._failure(failure) from None
            finally:
                if gate is not None:
                    gate.leave(ticket)
            if raw.status >= 300:
                error = classify_error(
                    raw.status,
                    raw.content,
                    raw.headers,
                    provider=self.provider,
                    secrets=self.secrets,
                    forced_tool_choice=forced,
                    url=self.url,
                )
                if gate is not None and isinstance(error, RateLimited):
                    gate.rate_limited(error.retry_after)
                raise error
            try:
                parsed = json.loads(raw.content)
            except ValueError:
                snippet = raw.content[:300].decode("utf-8", errors="replace")
                raise InvalidResponse(
                    f"the response body is not JSON: {snippet}",
                    status=raw.status,
                    provider=self.provider,
                    body=snippet,
                ) from None
            return self._finalise(self.parse_response(parsed, raw.headers, step=step))

        return await call_with_retries(attempt, self._policy(options), on_retry=self._log_retry)

    def _finalise(self, response: LMResponse) -> LMResponse:
        """Price and record usage, then refuse a content-filtered completion (it was billed all the same)."""
        if self.prices is not None and response.usage.cost is None:
            from dataclasses import replace

            response = replace(response, usage=priced(response.usage, self.prices))
        record_usage(self.model_key, response.usage)
        if response.finish_reason == "content_filter":
            raise ContentFiltered(
                f"the provider's content filter stopped the completion: {response.text}".rstrip(": "),
                provider=self.provider,
                code="content_filter",
                request_id=response.request_id,
            )
        return response

    async def stream(self, messages: Sequence[Message], **options: Any) -> AsyncIterator[StreamEvent]:
        """Yield text, reasoning and tool-call deltas, then one final event with the whole response.

        A stream that fails before its first delta is retried like `request` (and a refused option
        stepped down from): nothing reached the caller yet. One that fails after content arrived
        raises a retryable `StreamBroken` saying how much had arrived (never a silent restart), or
        `DeadlineExceeded` when the deadline has passed. Leaving the loop early closes the HTTP stream.
        """
        from imp.models._stream import Arrived
        from imp.models._transport import HTTPFailure

        merged = self._merged(options)
        headers = self._headers(merged)
        headers["accept"] = "text/event-stream"
        transport = self._transport_for_call()
        step = self._next_step()

        async with AsyncExitStack() as outer:
            while True:
                sent = self._stepped.apply(merged)
                try:
                    opened = await self._open_stream(transport, messages, sent, headers, outer, step)
                    break
                except UnsupportedOption as error:
                    if not self._step_down(error, sent):
                        raise
            arrived = Arrived()
            for delta in opened.first:
                yield arrived.count(delta)
            if opened.response is not None:
                final = self._finalise(opened.response)
            else:
                try:
                    for event in opened.pending:
                        for delta in opened.state.feed(event):
                            yield arrived.count(delta)
                    async for chunk in opened.chunks:
                        for event in opened.decoder.feed(chunk):
                            for delta in opened.state.feed(event):
                                yield arrived.count(delta)
                    response = opened.state.finish()
                except HTTPFailure as failure:
                    if _deadline_passed(failure.kind):
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
                final = self._finalise(response)
        yield StreamEvent(kind="final", response=final)

    async def _open_stream(
        self,
        transport: Transport,
        messages: Sequence[Message],
        options: Mapping[str, Any],
        headers: Mapping[str, str],
        outer: AsyncExitStack,
        step: int,
    ) -> Opened:
        """Send a streamed request and read it to its first delta, retrying what may succeed later
        (a failure before any content reached the caller is a failed request); `outer` closes it."""
        from imp.models._sse import SSEDecoder
        from imp.models._stream import Opened, read_first_content
        from imp.models._transport import HTTPFailure

        body = self.build_body(messages, options, stream=True)
        content = encode_body(body)
        forced = forces_tool(body)

        async def attempt(number: int) -> Opened:
            stack = AsyncExitStack()
            gate = request_gate.get()
            try:
                if gate is not None:  # the stream holds its slot until it is closed
                    stack.callback(gate.leave, await gate.enter())
                response = await stack.enter_async_context(
                    transport.stream(self.url, content, headers, self._cap(options))
                )
                if response.status >= 300:
                    error_body = await response.aread()
                    error = classify_error(
                        response.status,
                        error_body,
                        response.headers,
                        provider=self.provider,
                        secrets=self.secrets,
                        forced_tool_choice=forced,
                        url=self.url,
                    )
                    if gate is not None and isinstance(error, RateLimited):
                        gate.rate_limited(error.retry_after)
                    raise error
                chunks = response.aiter_bytes()
                stack.push_async_callback(chunks.aclose)  # type: ignore[attr-defined]
                opened = Opened(self.stream_state(step=step, headers=response.headers), SSEDecoder(), chunks)
                await read_first_content(opened)
                if opened.ended:  # a stream that ended badly before any content is retried
                    opened.response = opened.state.finish()
            except HTTPFailure as failure:
                await stack.aclose()
                raise self._failure(failure) from None
            except BaseException:
                await stack.aclose()
                raise
            outer.push_async_callback(stack.aclose)
            return opened

        return await call_with_retries(attempt, self._policy(options), on_retry=self._log_retry)

    def stream_error(self, payload: Any, *, status: int | None = None) -> LMError:
        """The `LMError` for an error event or error object inside a 200 stream."""
        return error_from_payload(
            status=status, body=payload, provider=self.provider, secrets=self.secrets, in_stream=True
        )

    async def aclose(self) -> None:
        """Close the connection pool."""
        if self._transport is not None:
            transport, self._transport = self._transport, None
            await transport.aclose()

    def dump(self) -> dict[str, Any]:
        """A JSON-friendly description to rebuild this client with `imp.lm(**dump)`; never the key."""
        from imp._redact import redact

        data: dict[str, Any] = {"model": self.model_key}
        if self.base_url != self.default_base_url:
            data["base_url"] = redact_text(self.base_url, self.secrets)
        if self.prices is not None:
            data["prices"] = self.prices.dump()
        data.update(redact(self.defaults, self.secrets))
        return data

    def __repr__(self) -> str:
        where = "" if self.base_url == self.default_base_url else f", base_url={self.base_url!r}"
        return redact_text(f"{type(self).__name__}({self.provider}:{self.model}{where})", self.secrets)


def _check_client_options(base_url: str, **timeouts: Any) -> None:
    """Refuse, when the client is built, a base URL httpx cannot send to and a timeout that is no time."""
    if base_url and not base_url.lower().startswith(("http://", "https://")):
        raise ValueError(f"base_url starts with http:// or https://, as in 'http://{base_url}', got {base_url!r}")
    for name, value in timeouts.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ValueError(f"{name} is a positive number of seconds, got {value!r}")


def _with_max_retries(policy: RetryPolicy, max_retries: int) -> RetryPolicy:
    from dataclasses import replace

    if max_retries < 0:
        raise ValueError("max_retries must be >= 0")
    return replace(policy, max_retries=max_retries)


def _deadline_passed(kind: str) -> bool:
    """Whether a transport failure came at the deadline: then it is the deadline's, never a retry.

    The read timeout is capped by the time left, so a timeout within 50 ms of the deadline is it.
    """
    left = time_left()
    return left is not None and (left <= 0.0 or (kind == "timeout" and left <= 0.05))
