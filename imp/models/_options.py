"""The options one request takes, typed: what shapes the body, what steers the client, per provider.

A client checks a call's options against its provider's `TypedDict` (its keys are the options it
knows) before anything is sent; a `None` value means "not set" and is dropped.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Literal, TypedDict

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


def known_options(options_type: type) -> frozenset[str]:
    """The option names a provider's options `TypedDict` declares."""
    optional: frozenset[str] = getattr(options_type, "__optional_keys__", frozenset())
    required: frozenset[str] = getattr(options_type, "__required_keys__", frozenset())
    return optional | required
