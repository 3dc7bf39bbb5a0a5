"""Classification of provider errors: overflow shapes, throttles that look like overflow, quotas, hints."""

from __future__ import annotations

import email.utils
import json
import time
from typing import Any

import pytest

from imp.models.errors import classify_error, error_from_payload, parse_retry_after


def _classify(status: int, body: Any, headers: dict[str, str] | None = None, **kwargs: Any) -> Any:
    content = body.encode() if isinstance(body, str) else json.dumps(body).encode()
    return classify_error(status, content, headers or {}, provider="p", **kwargs)


OVERFLOWS = [
    {
        "error": {
            "code": "context_length_exceeded",
            "type": "invalid_request_error",
            "message": "This model's maximum context length is 4097 tokens. However, your messages resulted in 4294 tokens.",
        }
    },
    {"error": {"message": "Your input exceeds the context window of this model.", "type": "invalid_request_error"}},
    {"error": {"message": "Input tokens exceed the configured limit of 272000 tokens.", "code": None}},
    {
        "error": {
            "code": "invalid_request_error",
            "message": "This model's maximum context length is 65536 tokens. However, you requested 70000 tokens",
        }
    },
    {
        "error": {
            "code": 400,
            "message": "This endpoint's maximum context length is 8192 tokens. However, you requested about 9000 tokens",
        }
    },
    {"error": {"code": 400, "message": "Bad request", "metadata": {"error_type": "context_length_exceeded"}}},
    {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "prompt is too long: 208310 tokens > 200000 maximum"},
    },
    {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "input length and `max_tokens` exceed context limit: 189136 + 20000 > 204648, decrease input length or `max_tokens` and try again",
        },
    },
    [
        {
            "error": {
                "code": 400,
                "status": "INVALID_ARGUMENT",
                "message": "The input token count (1091639) exceeds the maximum number of tokens allowed (1048576).",
            }
        }
    ],
    {
        "error": {
            "code": 400,
            "message": "Unable to submit request because the input token count is 300000 but model only supports up to 128000",
        }
    },
    {
        "object": "error",
        "message": "Prompt contains 40005 tokens and 0 draft tokens, too large for model with 32768 maximum context length",
        "type": "invalid_request_error",
    },
    {
        "object": "error",
        "message": "This model's maximum context length is 32768 tokens. However, your request has 40000 input tokens.",
        "code": 400,
    },
    {
        "error": {
            "code": 400,
            "type": "exceed_context_size_error",
            "message": "the request exceeds the available context size, try increasing it",
        }
    },
    {"error": {"message": "prompt too long; exceeded max context length by 120 tokens"}},
    {"error": {"message": "This model's maximum prompt length is 131072 but the request contains 140000 tokens."}},
    {"error": {"message": "Current length is 9000 while limit is 8192"}},
    {"error": {"message": "The input (9000 tokens) is longer than the model's context length (8192 tokens)."}},
]


@pytest.mark.parametrize("body", OVERFLOWS)
def test_every_overflow_shape_is_recognised(body: Any) -> None:
    error = _classify(400, body)
    assert error.context_window_exceeded and not error.retryable
    assert error.status == 400 and error.message


def test_old_llama_cpp_overflow_500() -> None:
    error = _classify(500, {"error": {"message": "Context size has been exceeded.", "code": 500}})
    assert error.context_window_exceeded and not error.retryable


def test_anthropic_request_too_large_413() -> None:
    error = _classify(
        413,
        {
            "type": "error",
            "error": {"type": "request_too_large", "message": "Request exceeds the maximum allowed number of bytes."},
        },
    )
    assert error.context_window_exceeded


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (
            429,
            {
                "error": {
                    "message": "Request too large for gpt-4o: Limit 30000, Requested 45000 tokens per min (TPM). This model's maximum context length is 128000 tokens.",
                    "code": "rate_limit_exceeded",
                }
            },
        ),
        (
            413,
            {
                "error": {
                    "message": "Request too large for model: tokens per minute (TPM): Limit 6000, Requested 9000",
                    "type": "tokens",
                    "code": "rate_limit_exceeded",
                }
            },
        ),
        (429, {"error": {"code": "context_length_exceeded", "message": "too many tokens in flight"}}),
        (
            400,
            {
                "error": {
                    "message": "Too many tokens in the prompt, please shorten your question about context windows."
                }
            },
        ),
    ],
)
def test_throttles_and_prose_are_not_overflow(status: int, body: Any) -> None:
    assert not _classify(status, body).context_window_exceeded


@pytest.mark.parametrize(
    ("status", "body"),
    [
        (
            429,
            {
                "error": {
                    "message": "You exceeded your current quota",
                    "type": "insufficient_quota",
                    "code": "insufficient_quota",
                }
            },
        ),
        (
            429,
            {
                "type": "error",
                "error": {
                    "type": "rate_limit_error",
                    "message": "You have reached your specified API usage limits (enforced_spend_limit_reached).",
                },
            },
        ),
        (400, {"type": "error", "error": {"type": "invalid_request_error", "message": "Your spend limit was reached"}}),
        (402, {"error": {"message": "Insufficient Balance"}}),
    ],
)
def test_quota_and_billing_are_not_retryable(status: int, body: Any) -> None:
    assert not _classify(status, body).retryable


@pytest.mark.parametrize("status", [408, 425, 429, 500, 502, 503, 504, 529])
def test_retryable_statuses(status: int) -> None:
    assert _classify(status, {"error": {"message": "later"}}).retryable


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422, 501])
def test_refusals_are_not_retryable(status: int) -> None:
    assert not _classify(status, {"error": {"message": "no"}}).retryable


@pytest.mark.parametrize(
    ("status", "message"),
    [
        (400, "Invalid value for 'tool_choice': 'required' is not a supported string"),
        (400, "tool_choice: unsupported value required"),
        (400, "only `auto` is supported for `tool_choice`"),
        (404, "No endpoints found that support the provided 'tool_choice' value."),
        (400, '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'),
        (400, "Thinking may not be enabled when tool_choice forces tool use."),
    ],
)
def test_tool_choice_refusals(status: int, message: str) -> None:
    error = _classify(status, {"error": {"message": message}})
    assert error.tool_choice_unsupported and not error.retryable


def test_llama_cpp_python_empty_500_on_forced_tool_choice() -> None:
    body = {"error": {"message": "", "type": "internal_server_error"}}
    assert _classify(500, body, forced_tool_choice=True).tool_choice_unsupported
    unforced = _classify(500, body)
    assert not unforced.tool_choice_unsupported and unforced.retryable


def test_non_json_body() -> None:
    error = _classify(502, "<html><body>502 Bad Gateway</body></html>")
    assert error.status == 502 and error.retryable and "502 Bad Gateway" in error.message
    empty = _classify(503, "")
    assert empty.message == "empty error body" and empty.retryable


def test_retry_after_forms() -> None:
    assert parse_retry_after({"retry-after": "7"}) == 7.0
    assert parse_retry_after({"retry-after-ms": "1500", "retry-after": "9"}) == 1.5
    future = email.utils.formatdate(time.time() + 20, usegmt=True)
    hinted = parse_retry_after({"retry-after": future})
    assert hinted is not None and 18.0 <= hinted <= 20.5
    assert parse_retry_after({}, {"message": "x", "details": [{"@type": "RetryInfo", "retryDelay": "47s"}]}) == 47.0
    assert parse_retry_after({}, {"message": "Rate limit reached. Please try again in 1.574s. Visit ..."}) == 1.574
    assert parse_retry_after({}, {"message": "Please try again in 20ms."}) == 0.02
    assert parse_retry_after({"retry-after": "soon"}) is None


def test_in_stream_errors() -> None:
    overloaded = error_from_payload(
        status=None,
        body={"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}},
        provider="anthropic",
        in_stream=True,
    )
    assert overloaded.retryable and overloaded.status is None and overloaded.code == "overloaded_error"
    groq = error_from_payload(
        status=None,
        body={"error": {"message": "bad", "code": "tool_use_failed", "status_code": 400}},
        provider="groq",
        in_stream=True,
    )
    assert groq.status == 400 and not groq.retryable


def test_body_is_redacted() -> None:
    secret = "sk-live-0123456789abcdefghij"
    error = _classify(401, {"error": {"message": f"Incorrect API key provided: {secret}"}}, secrets=(secret,))
    assert secret not in error.message and secret not in json.dumps(error.body)
