"""The one classifier of provider failures: each failed response becomes the right `imp.LMError` subclass.

Kinds are read from the status first (a throttle that talks about tokens is a 429, not an overflow),
then from codes and the wordings providers use (listed beside each pattern with the servers that send
it). The LM clients call `error_from_payload` / `classify_error` once per failure; nothing above the
LM layer reads error text again: programs use `isinstance`.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from imp._json import loads
from imp._redact import is_secret_query_key, redact, redact_text
from imp.errors import (
    QUOTA_CODES,
    BadRequest,
    ConnectionFailed,
    ContextWindowExceeded,
    DeadlineExceeded,
    LMError,
    NotFound,
    ProviderUnavailable,
    QuotaExceeded,
    ToolChoiceUnsupported,
    UnsupportedOption,
    lm_error_kind,
)
from imp.media import shorten_base64
from imp.runtime.deadline import time_left

__all__ = [
    "at_deadline",
    "classify_error",
    "error_from_payload",
    "is_context_window_message",
    "is_tool_choice_refusal",
    "parse_retry_after",
    "rejected_option",
    "safe_url",
    "transport_error",
]

_QUOTA_CODES = QUOTA_CODES

_OVERFLOW_CODES = frozenset({"context_length_exceeded", "exceed_context_size_error", "context_window_exceeded"})

# Every overflow wording providers.md lists; prose that merely mentions tokens never counts.
_OVERFLOW_MESSAGE = re.compile(
    r"maximum context length is \d+"
    r"|your input exceeds the context window"
    r"|input tokens exceed the configured limit of \d+ tokens"
    r"|prompt is too long: \d+ tokens > \d+ maximum"
    r"|input length and `?max_tokens`? exceed context limit"
    r"|the input token count \(\d*\) exceeds the maximum number of tokens allowed"
    r"|unable to submit request because the input token count is \d+ but model only supports up to \d+"
    r"|prompt contains \d+ tokens.{0,40}too large for model with \d+ maximum context length"
    r"|the request exceeds the available context size"
    r"|context size has been exceeded"
    r"|prompt too long; exceeded max context length"
    r"|maximum prompt length is \d+ but the request contains \d+ tokens"
    r"|current length is \d+ while limit is \d+"
    r"|is longer than the model's context length",
    re.IGNORECASE,
)

_TOOL_CHOICE_REFUSAL = re.compile(
    r"only `?auto`? is supported for `?tool_choice"  # a Meta model behind a router
    r"|no endpoints found that support the provided 'tool_choice'"  # OpenRouter, a 404
    r"|tool choice requires --enable-auto-tool-choice"  # vLLM started without a tool parser
    r"|thinking may not be enabled when tool_choice forces tool use",  # Anthropic, extended thinking
    re.IGNORECASE,
)

# A request the server's validator refused: pydantic's wording (llama-cpp-python answers these with
# a 500), serde's (TGI: "unknown variant", "Failed to deserialize"), FastAPI's 422 detail.
_VALIDATION_MESSAGE = re.compile(
    r"validation errors? for \w+|input should be |\[type=[a-z_]+|unknown variant|failed to deserialize"
    r"|extra inputs are not permitted|unrecognized request argument",
    re.IGNORECASE,
)

# A refused `response_format`: llama.cpp's older server ('response_format type must be one of "text"
# or "json_object", but got: json_schema', a 500), llama-cpp-python's pydantic literal error ("Input
# should be 'text' or 'json_object'", a 500), LM Studio ("'response_format.type' must be
# 'json_schema' or 'text'"), TGI ("unknown variant `json_schema`"), vLLM and Ollama naming the field,
# llama.cpp's "JSON schema conversion failed" for a schema its grammar cannot express, and `text.format`
# (the Responses API's spelling of the same option, as servers that speak it name it).
_RESPONSE_FORMAT_REFUSAL = re.compile(
    r"response_format|text\.format|input should be 'text' or 'json_object'|unknown variant `?json_(?:schema|object)"
    r"|json schema conversion failed",
    re.IGNORECASE,
)

# A refused `stream`, alone or with what else the request asked for: OpenAI's first o1 models
# ("Unsupported value: 'stream' does not support true with this model"), and servers that cannot
# stream tool calls ("Automatic streaming tool choice is not supported", llama-cpp-python's wording,
# which its server logs after a 200; "streaming is not supported with tools", others).
_STREAM_REFUSAL = re.compile(
    r"'stream' does not support|unsupported value: 'stream'"
    r"|\bstream(?:ing)?\b[^.\n]{0,40}\b(?:not |un)supported"
    r"|does not support stream(?:ing)?\b",
    re.IGNORECASE,
)

_QUOTA_MESSAGE = re.compile(
    r"enforced_spend_limit_reached|insufficient_quota|spend limit|specified api usage limits"
    r"|credit balance is too low|insufficient balance|exceeded your current quota",
    re.IGNORECASE,
)

_TRY_AGAIN = re.compile(r"try again in (\d+(?:\.\d+)?)\s*(ms|s|sec|seconds)?\b", re.IGNORECASE)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s)?\s*$")


def parse_retry_after(headers: Mapping[str, str] | None, error: Mapping[str, object] | None = None) -> float | None:
    """The provider's wait hint in seconds: `retry-after-ms`, `retry-after` (seconds or an HTTP date),
    a body's `details[].retryDelay`, or OpenAI's "Please try again in 1.5s"."""
    if headers:
        ms = headers.get("retry-after-ms")
        if ms:
            try:
                return max(0.0, float(ms) / 1000.0)
            except ValueError:
                pass
        value = headers.get("retry-after")
        if value:
            try:
                return max(0.0, float(value))
            except ValueError:
                when = _http_date(value)
                if when is not None:
                    return max(0.0, when - time.time())
    if error:
        details = error.get("details")
        for detail in details if isinstance(details, list) else ():
            if isinstance(detail, Mapping) and isinstance(detail.get("retryDelay"), str):
                seconds = _duration(detail["retryDelay"])
                if seconds is not None:
                    return seconds
        message = error.get("message")
        if isinstance(message, str):
            match = _TRY_AGAIN.search(message)
            if match:
                amount = float(match.group(1))
                return amount / 1000.0 if (match.group(2) or "s").lower() == "ms" else amount
    return None


def _http_date(value: str) -> float | None:
    """An HTTP date as a Unix time, or None (email.utils is imported only when a date is seen)."""
    import email.utils

    try:
        return email.utils.parsedate_to_datetime(value).timestamp()
    except (TypeError, ValueError, IndexError):
        return None


def _duration(text: str) -> float | None:
    match = _DURATION.match(text)
    if not match:
        return None
    amount = float(match.group(1))
    return amount / 1000.0 if match.group(2) == "ms" else amount


def is_context_window_message(message: str) -> bool:
    """Whether an error message is one of the known context-window overflow wordings."""
    return bool(_OVERFLOW_MESSAGE.search(message))


def is_tool_choice_refusal(message: str) -> bool:
    """Whether an error message says the server cannot take the requested `tool_choice`.

    Beyond the exact wordings above: OpenAI-compatible servers that know only none/auto/required
    (or only auto) say so in a message naming `tool_choice` with "invalid"/"unsupported"/"only" and
    the forms they take.
    """
    if _TOOL_CHOICE_REFUSAL.search(message):
        return True
    lowered = message.lower()
    return (
        ("tool_choice" in lowered or "tool choice" in lowered)
        and any(word in lowered for word in ("invalid", "unsupported", "not supported", "only"))
        and any(word in lowered for word in ("required", "supported string", "auto"))
    )


def _error_object(body: object) -> Mapping[str, object]:
    """The error mapping inside a provider's envelope (OpenAI, Anthropic, Gemini, flat vLLM)."""
    if isinstance(body, list) and body and isinstance(body[0], Mapping):
        body = body[0]  # Gemini sometimes answers with a JSON array
    if not isinstance(body, Mapping):
        return {}
    inner = body.get("error")
    if isinstance(inner, Mapping):
        return inner
    if isinstance(inner, str):
        return {"message": inner}
    if body.get("object") == "error" or ("message" in body and "choices" not in body):
        return body
    return {}


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


def safe_url(url: str) -> str:
    """A URL fit for an error message or a log line: no userinfo, no secret-looking query values."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "(an unparsable URL)"
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{host}:{parts.port}" if parts.port else host
    query = parts.query
    if query:
        pairs = [
            (k, "[REDACTED]" if is_secret_query_key(k) else v) for k, v in parse_qsl(query, keep_blank_values=True)
        ]
        query = urlencode(pairs, safe="[]")
    return urlunsplit((parts.scheme, netloc, parts.path, query, ""))


def rejected_option(message: str) -> str | None:
    """The request option an error message says the server refuses (`response_format`,
    `parallel_tool_calls`, `stream_options`, `stream`, `tool_choice`), or None."""
    lowered = message.lower()
    if "stream_options" not in lowered and _STREAM_REFUSAL.search(message):
        return "stream"  # before tool_choice: "streaming tool choice is not supported" is about the stream
    if is_tool_choice_refusal(message):
        return "tool_choice"
    if "parallel_tool_calls" in lowered:  # servers without parallel calls (several vLLM/TGI builds)
        return "parallel_tool_calls"
    if "stream_options" in lowered:  # older OpenAI-compatible servers that know only `stream`
        return "stream_options"
    if _RESPONSE_FORMAT_REFUSAL.search(message):
        return "response_format"
    return None


def _kind(
    *, status: int | None, codes: set[str], texts: str, message: str, forced_tool_choice: bool, in_stream: bool
) -> type[LMError]:
    """Which `LMError` subclass one failure is: status first, then codes, then the provider's words."""
    refusal = status is not None and (400 <= status < 500 or status == 500)
    if status == 413 and "request_too_large" in codes:
        return ContextWindowExceeded  # Anthropic: a body over 32 MB
    if status in (None, 400, 500) and (bool(codes & _OVERFLOW_CODES) or is_context_window_message(texts)):
        return ContextWindowExceeded
    option = rejected_option(texts) if refusal and status != 429 else None
    if option == "stream":
        return UnsupportedOption
    if is_tool_choice_refusal(texts) or (forced_tool_choice and status == 500 and not message.strip()):
        return ToolChoiceUnsupported  # the empty 500 is llama-cpp-python's answer to a forced choice
    if bool(codes & _QUOTA_CODES) or status == 402 or bool(_QUOTA_MESSAGE.search(texts)):
        return QuotaExceeded
    validation = bool(_VALIDATION_MESSAGE.search(texts))
    if refusal and status != 429:
        if option is not None and (status != 500 or validation or _RESPONSE_FORMAT_REFUSAL.search(texts)):
            return UnsupportedOption
        if status == 500 and validation:
            return BadRequest  # a validation failure the server reports as a 500: resending cannot help
    if status is None:
        if "overloaded_error" in codes:
            return ProviderUnavailable  # Anthropic's 529, sent as an `error` event inside a 200 stream
        # An error relayed inside a 200 (an SSE `error` event, OpenRouter's error body): the provider
        # failed while answering, which a new request may not.
        return ProviderUnavailable if in_stream else LMError
    return lm_error_kind(status)


def _decode_body(text: str) -> object:
    """An error body as JSON (leniently: some servers send Python-ish dicts), or None for text or HTML."""
    stripped = text.strip()
    if not stripped.startswith(("{", "[")):
        return None
    try:
        value = loads(stripped)
    except ValueError:
        return None
    return value if isinstance(value, Mapping | list) else None


def error_from_payload(
    *,
    status: int | None,
    body: object,
    provider: str,
    headers: Mapping[str, str] | None = None,
    secrets: tuple[str, ...] = (),
    forced_tool_choice: bool = False,
    raw_text: str | None = None,
    in_stream: bool = False,
    url: str | None = None,
    request_id: str | None = None,
) -> LMError:
    """Build the `LMError` subclass for one failed response (an HTTP error, or an error inside a 200).

    `request_id` is the provider's id of the request when `headers` are not at hand (a stream's
    error event: its 200 said it, or its first event did)."""
    error = _error_object(body)
    message = _text(error.get("message"))
    found = error.get("metadata")
    metadata: Mapping[str, object] = found if isinstance(found, Mapping) else {}
    raw_upstream = _text(metadata.get("raw"))
    code_value = error.get("code")
    error_type = _text(error.get("type")) or _text(error.get("status"))
    code = str(code_value) if isinstance(code_value, str) else (error_type or None)
    if code is None and isinstance(code_value, int):
        code = str(code_value)
    if in_stream:
        inner = error.get("status_code", code_value)
        status = inner if isinstance(inner, int) and not isinstance(inner, bool) else None

    texts = " ".join(t for t in (message, raw_upstream) if t)
    if not texts and isinstance(body, Mapping) and isinstance(body.get("detail"), list | str):
        texts = str(body["detail"])  # FastAPI's 422: {"detail": [{"loc": ..., "msg": ...}]}
        message = texts
    codes = {code or "", error_type, _text(metadata.get("error_type")), _text(error.get("error_type"))} - {""}
    kind = _kind(
        status=status,
        codes=codes,
        texts=texts,
        message=message,
        forced_tool_choice=forced_tool_choice,
        in_stream=in_stream,
    )

    if not message:
        snippet = " ".join((raw_text or "").split())[:300]
        if raw_text is not None and not error:
            message = f"non-JSON error body: {snippet}" if snippet else "empty error body"
        else:
            message = "(no message)"
    if raw_upstream and raw_upstream not in message:
        message = f"{message}: {raw_upstream}"
    where = safe_url(url) if url is not None and kind is NotFound else None
    if where is not None:
        message = f"{message} (POST {where})"
    if headers:
        request_id = headers.get("x-request-id") or headers.get("request-id") or request_id
    if request_id is None and isinstance(body, Mapping) and isinstance(body.get("request_id"), str):
        request_id = body["request_id"]

    kept_body: object = body if body is not None else raw_text
    details: dict[str, Any] = {}
    if kind is UnsupportedOption:
        details["option"] = rejected_option(texts) or ""
    return kind(
        shorten_base64(redact_text(message, secrets)),
        status=status,
        provider=provider,
        code=code,
        body=shorten_base64(redact(kept_body, secrets)),
        retry_after=parse_retry_after(headers, error),
        request_id=request_id,
        url=redact_text(where, secrets) if where is not None else None,
        **details,
    )


def classify_error(
    status: int,
    content: bytes,
    headers: Mapping[str, str],
    *,
    provider: str,
    secrets: tuple[str, ...] = (),
    forced_tool_choice: bool = False,
    url: str | None = None,
) -> LMError:
    """Classify a non-2xx HTTP response; a non-JSON body (an HTML 502) becomes an error with its text."""
    text = content.decode("utf-8", errors="replace")
    body = _decode_body(text)
    return error_from_payload(
        status=status,
        body=body,
        provider=provider,
        headers=headers,
        secrets=secrets,
        forced_tool_choice=forced_tool_choice,
        raw_text=None if body is not None else text,
        url=url,
    )


def at_deadline(kind: str) -> bool:
    """Whether a transport failure came at the deadline: then it is the deadline's, never a retry.

    The read timeout is capped by the time left, so a timeout within 50 ms of the deadline is it.
    """
    left = time_left()
    return left is not None and (left <= 0.0 or (kind == "timeout" and left <= 0.05))


def transport_error(
    kind: str, detail: str, *, provider: str, secrets: tuple[str, ...], url: str
) -> LMError | DeadlineExceeded:
    """The error for a request that got no (whole) response (`_transport.HTTPFailure`): the deadline's,
    the HTTP client's own (`http_client`), or `ConnectionFailed` naming the kind (retryable)."""
    if at_deadline(kind):
        return DeadlineExceeded("the deadline passed while waiting for the provider")
    if kind == "client":
        return LMError(redact_text(detail, secrets), provider=provider, code="http_client")
    message = redact_text(f"request failed ({kind}): {detail} (POST {safe_url(url)})", secrets)
    return ConnectionFailed(message, provider=provider, code=f"{kind}_error", url=redact_text(safe_url(url), secrets))
