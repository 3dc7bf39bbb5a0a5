"""`imp.lm("provider:model", ...)`: build a provider client from a model string."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from imp.models._http import HTTPLM

__all__ = ["PROVIDERS", "lm"]

PROVIDERS = ("openai", "openai-responses", "openrouter", "anthropic")
"""Provider prefixes `imp.lm` knows; any OpenAI-compatible server is `openai` with a `base_url`
(`openai-responses` is OpenAI's Responses API, for reasoning models that keep their reasoning)."""


def lm(model: str, *, api_key: str | None = None, base_url: str | None = None, **defaults: Any) -> HTTPLM:
    """A client for `"provider:model"` (`openai:gpt-5.4-mini`, `openai-responses:gpt-5.4-mini`, `anthropic:claude-sonnet-4-6`, ...).

    `api_key` defaults to the provider's environment variable; keyword arguments are client
    settings (`timeout`, `connect_timeout`, `max_retries`, `cache`, `capabilities`, `http_client`,
    `headers`, `retry_policy`, `max_connections`) or default request options (`temperature`, ...).
    """
    provider, sep, name = model.partition(":")
    if not sep or not provider or not name:
        raise ValueError(f"a model is written 'provider:model', got {model!r}")
    provider = provider.lower()
    if provider == "openai":
        from imp.models.openai import OpenAILM

        return OpenAILM(name, api_key=api_key, base_url=base_url, **defaults)
    if provider == "openai-responses":
        from imp.models.openai_responses import OpenAIResponsesLM

        return OpenAIResponsesLM(name, api_key=api_key, base_url=base_url, **defaults)
    if provider == "openrouter":
        from imp.models.openai import OpenRouterLM

        return OpenRouterLM(name, api_key=api_key, base_url=base_url, **defaults)
    if provider == "anthropic":
        from imp.models.anthropic import AnthropicLM

        return AnthropicLM(name, api_key=api_key, base_url=base_url, **defaults)
    raise ValueError(
        f"unknown provider {provider!r} in {model!r}: use one of {', '.join(PROVIDERS)} "
        "(an OpenAI-compatible server is 'openai:<model>' with base_url=...)"
    )
