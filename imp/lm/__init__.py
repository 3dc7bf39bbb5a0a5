"""Model clients: the LM protocol, scripted LMs, and the OpenAI-compatible and Anthropic clients."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from imp.lm._factory import PROVIDERS, lm
from imp.lm.base import LM, LMCapabilities, LMResponse, Message, StreamEvent, Usage
from imp.lm.retry import RetryPolicy
from imp.lm.scripted import ScriptedLM, ScriptedRequest, StaticLM

if TYPE_CHECKING:
    from imp.lm.anthropic import AnthropicLM
    from imp.lm.cache import MemoryCache, ResponseCache, SQLiteCache
    from imp.lm.openai import OpenAILM, OpenRouterLM

__all__ = [
    "LM",
    "PROVIDERS",
    "AnthropicLM",
    "LMCapabilities",
    "LMResponse",
    "MemoryCache",
    "Message",
    "OpenAILM",
    "OpenRouterLM",
    "ResponseCache",
    "RetryPolicy",
    "SQLiteCache",
    "ScriptedLM",
    "ScriptedRequest",
    "StaticLM",
    "StreamEvent",
    "Usage",
    "lm",
]

_LAZY = {
    "AnthropicLM": "imp.lm.anthropic",
    "OpenAILM": "imp.lm.openai",
    "OpenRouterLM": "imp.lm.openai",
    "MemoryCache": "imp.lm.cache",
    "ResponseCache": "imp.lm.cache",
    "SQLiteCache": "imp.lm.cache",
}


def __getattr__(name: str) -> Any:
    """Import the provider clients and caches on first use, to keep `import imp` light."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'imp.lm' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
