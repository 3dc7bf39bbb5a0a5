"""Small wire-format helpers every provider module uses: tool-call arguments and finish reasons."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["finish_reason", "parse_arguments", "wire_arguments"]

_FINISH = {
    "stop": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "eos": "stop",
    "length": "length",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "tool_calls": "tool_calls",
    "tool_use": "tool_calls",
    "function_call": "tool_calls",
    "content_filter": "content_filter",
    "refusal": "content_filter",
    "error": "error",
}


def finish_reason(raw: Any, *, has_calls: bool) -> str:
    """The normalised finish reason (`stop`, `length`, `tool_calls`, `content_filter`, `error`, `other`)."""
    if raw is None:
        return "tool_calls" if has_calls else "stop"
    return _FINISH.get(str(raw), "other")


def parse_arguments(raw: Any) -> dict[str, Any]:
    """Tool-call arguments as a dict: JSON, repaired JSON when a model wrote it badly, or `{}`."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    if not isinstance(raw, str):
        return {"value": raw}
    try:
        value = json.loads(raw)
    except ValueError:
        from json_repair import repair_json

        value = repair_json(raw, return_objects=True)
    if isinstance(value, Mapping):
        return dict(value)
    if value in (None, "", []):
        return {}
    return {"value": value}


def wire_arguments(arguments: Any) -> str:
    """Arguments as the JSON string OpenAI-style messages carry."""
    if isinstance(arguments, str):
        return arguments
    return json.dumps(dict(arguments) if isinstance(arguments, Mapping) else arguments, ensure_ascii=False)
