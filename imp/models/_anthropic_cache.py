"""Anthropic prompt-cache breakpoints: where a request marks the prefix the next step can reuse.

Anthropic caches a request's prefix (tools, then system, then messages) only up to a block marked
with `cache_control`, and allows at most four marks. A ReAct turn's next request is this one plus
the newest exchange, so imp marks the last tool, the system text, the newest message and the
message the previous request ended on: the next step then reads everything but its newest
exchange from the cache. Requests that already carry a `cache_control` mark are left as they are
(the caller places their own).
"""

from __future__ import annotations

from typing import Final, Literal, get_args

__all__ = ["EXTENDED_TTL_BETA", "MAX_BREAKPOINTS", "PromptCache", "check_prompt_cache", "mark_breakpoints"]

PromptCache = Literal["5m", "1h", "off"]
"""How long marked prefixes live: Anthropic's default five minutes, one hour, or no marks at all."""

MAX_BREAKPOINTS: Final = 4
"""Anthropic refuses a request with more `cache_control` marks than this."""

EXTENDED_TTL_BETA: Final = "extended-cache-ttl-2025-04-11"
"""The beta flag older Anthropic deployments want for the one-hour TTL (harmless where it is GA)."""

_UNMARKABLE = ("thinking", "redacted_thinking")


def check_prompt_cache(value: object) -> PromptCache:
    """The `prompt_cache` option, checked (a clear error naming the choices otherwise)."""
    if value is None or value is True:
        return "5m"
    if value is False:
        return "off"
    for choice in get_args(PromptCache):
        if value == choice:
            return choice  # type: ignore[no-any-return]
    raise ValueError(f"anthropic prompt_cache is one of '5m', '1h', 'off' (or True/False), got {value!r}")


def _control(ttl: PromptCache) -> dict[str, str]:
    return {"type": "ephemeral", "ttl": "1h"} if ttl == "1h" else {"type": "ephemeral"}


def _has_mark(value: object) -> bool:
    if isinstance(value, dict):
        return "cache_control" in value or any(_has_mark(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_mark(v) for v in value)
    return False


def _last_markable(blocks: object) -> dict[str, object] | None:
    for block in reversed(blocks if isinstance(blocks, list) else []):
        if isinstance(block, dict) and block.get("type") not in _UNMARKABLE:
            found: dict[str, object] = block
            return found
    return None


def mark_breakpoints(body: dict[str, object], ttl: PromptCache) -> None:
    """Put up to four `cache_control` marks on a built Messages body, in place."""
    if ttl == "off" or _has_mark(body):
        return
    control = _control(ttl)
    marks = 0
    tools = body.get("tools")
    if isinstance(tools, list) and tools:
        tools[-1] = {**tools[-1], "cache_control": control}
        marks += 1
    system = body.get("system")
    if isinstance(system, str) and system:
        body["system"] = [{"type": "text", "text": system, "cache_control": control}]
        marks += 1
    found = body.get("messages")
    messages: list[dict[str, object]] = found if isinstance(found, list) else []
    # The newest message, then the last user message before the newest assistant one: where the
    # previous request of the same turn ended, so its cache entry is read exactly.
    targets: list[int] = []
    if messages:
        targets.append(len(messages) - 1)
        for index in range(len(messages) - 2, -1, -1):
            if messages[index]["role"] == "user" and any(m["role"] == "assistant" for m in messages[index + 1 :]):
                targets.append(index)
                break
    for index in targets:
        if marks >= MAX_BREAKPOINTS:
            break
        block = _last_markable(messages[index]["content"])
        if block is not None:
            block["cache_control"] = control
            marks += 1
