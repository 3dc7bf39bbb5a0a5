"""The options one request takes, typed: what shapes the body, what steers the client, per provider.

A client checks a call's options against its provider's `TypedDict` (its keys are the options it
knows) before anything is sent; a `None` value means "not set" and is dropped.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict

from imp.models._wire import tool_choice_name

if TYPE_CHECKING:
    from imp.models.cache import ResponseCache

__all__ = [
    "AnthropicOptions",
    "CallSettings",
    "ChatOptions",
    "Defaults",
    "Options",
    "ReasoningSummary",
    "RequestOptions",
    "ResponsesOptions",
    "ToolChoice",
    "ToolSpec",
    "check_client_settings",
    "check_options",
    "known_options",
]

ToolSpec = Mapping[str, object]
"""A tool as JSON schema: OpenAI's `{"type": "function", "function": {...}}` or a flat
`{"name", "description", "parameters"}` (each client writes its own wire shape from either)."""

ToolChoice = str | Mapping[str, object]
"""`"auto"`, `"none"`, `"required"` (or `"any"`), a tool's name, `{"name": ...}` or OpenAI's
`{"type": "function", "function": {"name": ...}}`."""

ReasoningSummary = Literal["auto", "concise", "detailed"]
"""How much of its reasoning a model summarises in the `reasoning` items (`reasoning_summary=`)."""


class RequestOptions(TypedDict, total=False):
    """Options that shape the request body, for every provider (each writes them its own way)."""

    temperature: float
    max_tokens: int
    top_p: float
    stop: str | Sequence[str]
    seed: int
    reasoning_effort: str
    tools: Sequence[ToolSpec]
    tool_choice: ToolChoice
    parallel_tool_calls: bool
    response_format: Mapping[str, object]
    extra_body: Mapping[str, object]
    """Merged into the body verbatim: the passthrough for provider fields (`top_k`, `thinking`, ...)."""
    extra_headers: Mapping[str, str]
    n: int
    """Accepted only as 1 (one response per request) and never sent."""


class CallSettings(TypedDict, total=False):
    """Options that steer the client for one call and are never sent."""

    timeout: float
    """The read timeout for this call (capped by the deadline's time left)."""
    max_retries: int
    cache: ResponseCache | bool | str | Path | None
    """`True` (the process-wide memory LRU), `False` (off), a path (a SQLite file), a cache, or None
    (the context's default)."""
    rollout_id: object
    """Only varies the cache key: a different id is a different entry."""


class Options(RequestOptions, CallSettings, total=False):
    """Every option a `request` / `stream` call takes (a provider refuses those it cannot take)."""

    prompt_cache: Literal["5m", "1h", "off"] | bool
    """Anthropic only: prompt-cache breakpoints (see `imp.models._anthropic_cache`)."""
    reasoning_summary: ReasoningSummary
    """OpenAI's Responses API only: the reasoning summary asked for."""


class AnthropicOptions(RequestOptions, CallSettings, total=False):
    """What `AnthropicLM` takes: the common options and `prompt_cache`."""

    prompt_cache: Literal["5m", "1h", "off"] | bool


class ResponsesOptions(RequestOptions, CallSettings, total=False):
    """What `OpenAIResponsesLM` takes: the common options and `reasoning_summary`."""

    reasoning_summary: ReasoningSummary


class Defaults(RequestOptions, total=False):
    """What `imp.lm(...)` takes as default request options (beside its client settings)."""

    rollout_id: object
    prompt_cache: Literal["5m", "1h", "off"] | bool
    reasoning_summary: ReasoningSummary


class ChatOptions(RequestOptions, CallSettings, total=False):
    """What the Chat Completions clients (`OpenAILM`, `OpenRouterLM`) take: the common options."""


@functools.cache
def known_options(options_type: type) -> frozenset[str]:
    """The option names a provider's options `TypedDict` declares."""
    optional: frozenset[str] = getattr(options_type, "__optional_keys__", frozenset())
    required: frozenset[str] = getattr(options_type, "__required_keys__", frozenset())
    return optional | required


def check_options(provider: str, options: Mapping[str, object], options_type: type, *, refused: frozenset[str]) -> None:
    """Refuse, before anything is sent, an option `options_type` does not declare (a `TypeError`), one
    the provider refuses or a value no request can carry (a `ValueError`)."""
    known = known_options(options_type)
    unknown = sorted(k for k in options if k not in known)
    if unknown:
        names = ", ".join(unknown)
        raise TypeError(f"{provider} got unknown request option(s): {names} (use extra_body= for others)")
    given = sorted(k for k in options if k in refused and options[k] is not None)
    if given:
        raise ValueError(f"{provider} does not take the option(s): {', '.join(given)}")
    choice = options.get("tool_choice")
    if choice is not None:
        tool_choice_name(choice)  # raises on a malformed value
        if choice not in ("auto", "none") and not options.get("tools") and "tools" in options:
            raise ValueError("tool_choice forces a tool but no tools were given")
    _check_values(provider, options)
    if options.get("n") not in (None, 1):
        raise ValueError(f"{provider}: imp asks for one completion per request (n=1), got n={options['n']!r}")
    for name in ("extra_body", "extra_headers"):
        extra = options.get(name)
        if extra is not None and not isinstance(extra, Mapping):
            raise TypeError(f"{name} must be a mapping of fields to add to the request")


_NUMBERS = frozenset({"temperature", "top_p", "timeout"})
_COUNTS = frozenset({"max_tokens", "seed", "n", "max_retries"})


def _check_values(provider: str, options: Mapping[str, object]) -> None:
    """Refuse a number option that is no number (`temperature="0.2"`), as a program's `config` is refused:
    a wrong type is a `TypeError` before anything is sent, never the provider's 400 after a round trip."""
    for name, value in options.items():
        if value is None:
            continue
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if name in _NUMBERS and not number:
            raise TypeError(f"{provider}: {name} must be a number, got {value!r}")
        if name in _COUNTS and (not isinstance(value, int) or isinstance(value, bool)):
            raise TypeError(f"{provider}: {name} must be a whole number, got {value!r}")
        if name in ("max_retries", "max_tokens") and value < 0:  # type: ignore[operator]
            raise ValueError(f"{provider}: {name} must be >= 0, got {value!r}")
        if name == "timeout" and value <= 0:  # type: ignore[operator]
            raise ValueError(f"{provider}: timeout is a positive number of seconds, got {value!r}")


def check_client_settings(base_url: str, *, max_response_bytes: int | None, **timeouts: float) -> None:
    """Refuse, when the client is built, a base URL httpx cannot send to, a timeout that is no time and
    a reply limit that is no size."""
    if base_url and not base_url.lower().startswith(("http://", "https://")):
        raise ValueError(f"base_url starts with http:// or https://, as in 'http://{base_url}', got {base_url!r}")
    for name, value in timeouts.items():
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ValueError(f"{name} is a positive number of seconds, got {value!r}")
    limit = max_response_bytes
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"max_response_bytes is a positive number of bytes (or None for no limit), got {limit!r}")
