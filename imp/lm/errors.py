"""Classification of provider failures into `imp.LMError`: status, retryability, wait hints, causes."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from typing import Any

from imp._redact import redact, redact_text
from imp.errors import LMError

__all__ = [
    "RETRYABLE_STATUSES",
    "classify_error",
    "error_from_payload",
    "is_context_window_message",
    "is_tool_choice_refusal",
    "parse_retry_after",
]

RETRYABLE_STATUSES = frozenset({408, 425, 429, 500, 502, 503, 504, 529})
"""Statuses worth trying again (providers.md): timeouts, throttles, overload and gateway errors."""

_QUOTA_CODES = frozenset(
    {"insufficient_quota", "enforced_spend_limit_reached", "billing_error", "billing_hard_limit_reached"}
)

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
    r"only `?auto`? is supported for `?tool_choice"
    r"|no endpoints found that support the provided 'tool_choice'"
    r"|tool choice requires --enable-auto-tool-choice"
    r"|thinking may not be enabled when tool_choice forces tool use",
    re.IGNORECASE,
)

_QUOTA_MESSAGE = re.compile(
    r"enforced_spend_limit_reached|insufficient_quota|spend limit|specified api usage limits"
    r"|credit balance is too low|insufficient balance|exceeded your current quota",
    re.IGNORECASE,
)

_TRY_AGAIN = re.compile(r"try again in (\d+(?:\.\d+)?)\s*(ms|s|sec|seconds)?\b", re.IGNORECASE)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|s)?\s*$")


def parse_retry_after(headers: Mapping[str, str] | None, error: Mapping[str, Any] | None = None) -> float | None:
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
        for detail in error.get("details") or ():
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
    """Whether an error message says the server cannot take the requested `tool_choice`."""
    if _TOOL_CHOICE_REFUSAL.search(message):
        return True
    lowered = message.lower()
    return (
        ("tool_choice" in lowered or "tool choice" in lowered)
        and ("invalid" in lowered or "unsupported" in lowered)
        and ("required" in lowered or "supported string" in lowered)
    )


def _error_object(body: Any) -> Mapping[str, Any]:
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


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def error_from_payload(
    *,
    status: int | None,
    body: Any,
    provider: str,
    headers: Mapping[str, str] | None = None,
    secrets: tuple[str, ...] = (),
    forced_tool_choice: bool = False,
    raw_text: str | None = None,
    in_stream: bool = False,
) -> LMError:
    """Build the `LMError` for one failed response (an HTTP error, or an error inside a 200)."""
    error = _error_object(body)
    message = _text(error.get("message"))
    found = error.get("metadata")
    metadata: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
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
    codes = {code or "", error_type, _text(metadata.get("error_type")), _text(error.get("error_type"))} - {""}

    # A throttle can talk about tokens too: rule it out by status before reading the words.
    too_large = status == 413 and error_type == "request_too_large"
    overflow = too_large or (
        status in (None, 400, 500) and (bool(codes & _OVERFLOW_CODES) or is_context_window_message(texts))
    )
    tool_choice = is_tool_choice_refusal(texts) or (forced_tool_choice and status == 500 and not message.strip())
    quota = bool(codes & _QUOTA_CODES) or status == 402 or bool(_QUOTA_MESSAGE.search(texts))

    retryable = status in RETRYABLE_STATUSES if status is not None else in_stream
    if overflow or tool_choice or quota:
        retryable = False

    if not message:
        snippet = " ".join((raw_text or "").split())[:300]
        if raw_text is not None and not error:
            message = f"non-JSON error body: {snippet}" if snippet else "empty error body"
        else:
            message = "(no message)"
    if raw_upstream and raw_upstream not in message:
        message = f"{message}: {raw_upstream}"
    request_id = None
    if headers:
        request_id = headers.get("x-request-id") or headers.get("request-id")
    if request_id is None and isinstance(body, Mapping) and isinstance(body.get("request_id"), str):
        request_id = body["request_id"]

    kept_body: Any = body if body is not None else raw_text
    return LMError(
        redact_text(message, secrets),
        status=status,
        provider=provider,
        code=code,
        body=redact(kept_body, secrets),
        retryable=retryable,
        retry_after=parse_retry_after(headers, error),
        context_window_exceeded=overflow,
        content_filtered=False,
        tool_choice_unsupported=tool_choice,
        request_id=request_id,
    )


def classify_error(
    status: int,
    content: bytes,
    headers: Mapping[str, str],
    *,
    provider: str,
    secrets: tuple[str, ...] = (),
    forced_tool_choice: bool = False,
) -> LMError:
    """Classify a non-2xx HTTP response; a non-JSON body (an HTML 502) becomes an error with its text."""
    text = content.decode("utf-8", errors="replace")
    try:
        body: Any = json.loads(text) if text.strip() else None
    except ValueError:
        body = None
    return error_from_payload(
        status=status,
        body=body,
        provider=provider,
        headers=headers,
        secrets=secrets,
        forced_tool_choice=forced_tool_choice,
        raw_text=None if body is not None else text,
    )
