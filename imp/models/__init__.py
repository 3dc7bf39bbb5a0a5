"""Model clients: the LM protocol, scripted LMs, and the OpenAI-compatible, OpenAI Responses and Anthropic clients.

Imports are at the top of each module but for a few kept lazy, for import time only: the provider
clients and caches (`__getattr__` below, `_factory.lm`: a module loads when its client is first
made), the HTTP library (`_transport`: chosen at run time, httpx2 or httpx), tenacity (`retry`:
entered only after a failure) and `email.utils` (`errors`: only for a `Retry-After` date).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from imp.models._factory import PROVIDERS, lm
from imp.models._prices import Prices
from imp.models.base import LM, LMCapabilities, LMResponse, Message, StreamEvent, Usage
from imp.models.retry import RetryPolicy
from imp.models.scripted import ScriptedLM, ScriptedRequest, StaticLM

if TYPE_CHECKING:
    from imp.models.anthropic import AnthropicLM
    from imp.models.cache import MemoryCache, ResponseCache, SQLiteCache
    from imp.models.openai import OpenAILM, OpenRouterLM
    from imp.models.openai_responses import OpenAIResponsesLM

__all__ = [
    "LM",
    "PROVIDERS",
    "AnthropicLM",
    "LMCapabilities",
    "LMResponse",
    "MemoryCache",
    "Message",
    "OpenAILM",
    "OpenAIResponsesLM",
    "OpenRouterLM",
    "Prices",
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
    "AnthropicLM": "imp.models.anthropic",
    "OpenAILM": "imp.models.openai",
    "OpenRouterLM": "imp.models.openai",
    "OpenAIResponsesLM": "imp.models.openai_responses",
    "MemoryCache": "imp.models.cache",
    "ResponseCache": "imp.models.cache",
    "SQLiteCache": "imp.models.cache",
}


def __getattr__(name: str) -> Any:
    """Import the provider clients and caches on first use, to keep `import imp` light."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'imp.models' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
