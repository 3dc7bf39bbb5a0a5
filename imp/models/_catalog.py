"""What imp knows of the providers' models without asking: prices, context windows, longest replies.

Read on `READ_ON` from the pages each entry names. Prices change: a client's own `prices=` (and
`context_window=`) win over this table, which applies only to requests sent to the provider's own
service (a compatible server under another `base_url` may serve anything under the same name).
Where the provider's own page was not at hand, the entry names the page that quoted it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from imp.models._prices import Prices

__all__ = ["READ_ON", "ModelCard", "card_for"]

READ_ON = "2026-12-05"
"""When the figures below were read from their sources."""

_ANTHROPIC = "https://docs.anthropic.com/en/docs/about-claude/pricing"
_ANTHROPIC_NEWER = "https://docs.rs/synaps (its table of platform.claude.com's pricing page, verified 2026-10-10)"
_ANTHROPIC_WINDOWS = "https://deploybase.ai/articles/claude-api-pricing (context and longest reply, 2026-03-21)"
_OPENAI = "https://deploybase.ai/articles/openai-pricing (OpenAI's pricing page, March 2026)"
_OPENAI_CACHED = "https://docs.rs/adk-model (OpenAI's cached-input rates, March 2026)"


@dataclass(frozen=True, slots=True)
class ModelCard:
    """One model's prices (dollars per million tokens), context window and longest reply, and where they come from."""

    prices: Prices
    context_window: int | None
    max_output: int | None
    source: str


def _claude(inp: float, out: float, read: float, write: float, window: int, longest: int, source: str) -> ModelCard:
    return ModelCard(Prices(inp, out, cache_read=read, cache_write=write), window, longest, source)


def _gpt(inp: float, out: float, cached: float | None, window: int, longest: int, source: str = _OPENAI) -> ModelCard:
    # OpenAI bills no cache writes: a cached prefix is written at the input price.
    return ModelCard(Prices(inp, out, cache_read=cached, cache_write=inp), window, longest, source)


CARDS: dict[str, ModelCard] = {
    # Anthropic: base input, output, cache hits, 5-minute cache writes.
    "anthropic:claude-opus-4-1": _claude(15, 75, 1.5, 18.75, 200_000, 32_000, _ANTHROPIC),
    "anthropic:claude-opus-4": _claude(15, 75, 1.5, 18.75, 200_000, 32_000, _ANTHROPIC),
    "anthropic:claude-sonnet-4": _claude(3, 15, 0.3, 3.75, 200_000, 64_000, _ANTHROPIC),
    "anthropic:claude-3-7-sonnet": _claude(3, 15, 0.3, 3.75, 200_000, 64_000, _ANTHROPIC),
    "anthropic:claude-3-5-sonnet": _claude(3, 15, 0.3, 3.75, 200_000, 8_192, _ANTHROPIC),
    "anthropic:claude-3-5-haiku": _claude(0.8, 4, 0.08, 1, 200_000, 8_192, _ANTHROPIC),
    "anthropic:claude-3-haiku": _claude(0.25, 1.25, 0.03, 0.3, 200_000, 4_096, _ANTHROPIC),
    "anthropic:claude-sonnet-4-5": _claude(3, 15, 0.3, 3.75, 200_000, 64_000, _ANTHROPIC_NEWER),
    "anthropic:claude-sonnet-4-6": _claude(3, 15, 0.3, 3.75, 1_000_000, 64_000, _ANTHROPIC_NEWER),
    "anthropic:claude-haiku-4-5": _claude(1, 5, 0.1, 1.25, 200_000, 64_000, _ANTHROPIC_NEWER),
    "anthropic:claude-opus-4-5": _claude(5, 25, 0.5, 6.25, 200_000, 64_000, _ANTHROPIC_NEWER),
    "anthropic:claude-opus-4-6": _claude(5, 25, 0.5, 6.25, 1_000_000, 128_000, _ANTHROPIC_WINDOWS),
    # OpenAI: input, output, cached input; the window and the longest reply.
    "openai:gpt-4o": _gpt(2.5, 10, 1.25, 128_000, 16_384),
    "openai:gpt-4o-mini": _gpt(0.15, 0.6, 0.075, 128_000, 16_384),
    "openai:gpt-4.1": _gpt(2, 8, 0.5, 1_047_576, 32_768, _OPENAI_CACHED),
    "openai:gpt-4.1-mini": _gpt(0.4, 1.6, 0.1, 1_047_576, 32_768, _OPENAI_CACHED),
    "openai:gpt-4.1-nano": _gpt(0.1, 0.4, 0.025, 1_047_576, 32_768, _OPENAI_CACHED),
    "openai:gpt-5": _gpt(1.25, 10, None, 400_000, 128_000),
    "openai:gpt-5-mini": _gpt(0.25, 2, None, 400_000, 128_000),
    "openai:gpt-5-nano": _gpt(0.05, 0.4, None, 400_000, 128_000),
    "openai:gpt-5.4": _gpt(2.5, 15, 0.25, 272_000, 128_000, _OPENAI_CACHED),
    "openai:gpt-5.4-mini": _gpt(0.75, 4.5, 0.075, 272_000, 128_000, _OPENAI_CACHED),
    "openai:o3": _gpt(2, 8, None, 200_000, 100_000),
    "openai:o4-mini": _gpt(1.1, 4.4, None, 200_000, 100_000),
}
"""Keyed `provider:model` without a snapshot's date; `openai-responses` reads the `openai` entries."""

_SNAPSHOT = re.compile(r"-(?:\d{4}-\d{2}-\d{2}|\d{8}|latest)$")
_SAME_MODELS = {"openai-responses": "openai"}


def card_for(provider: str, model: str) -> ModelCard | None:
    """The card of `model` at `provider` (a dated snapshot reads its model's card), or None."""
    provider = _SAME_MODELS.get(provider, provider)
    key = f"{provider}:{model}"
    card = CARDS.get(key)
    if card is None:
        card = CARDS.get(_SNAPSHOT.sub("", key))
    return card
