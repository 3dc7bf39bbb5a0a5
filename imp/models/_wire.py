"""Small wire-format helpers every provider module uses: tool-call arguments and finish reasons."""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from imp._json import loads
from imp.records import UnreadArguments

__all__ = [
    "JSONObject",
    "count_of",
    "finish_reason",
    "forces_tool",
    "list_of",
    "mapping_of",
    "parse_arguments",
    "tool_choice_mode",
    "tool_choice_name",
    "wire_arguments",
]

_TOOL_CHOICE_WORDS = frozenset({"auto", "none", "required", "any"})
"""`any` is Anthropic's and Mistral's word for `required`."""

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


JSONObject = Mapping[str, object]
"""A JSON object as a server sent it: every value is read with a type check (`mapping_of`, ...)."""


def mapping_of(value: object) -> JSONObject:
    """`value` when it is a JSON object, else an empty one (a field of the wrong shape reads as absent)."""
    return value if isinstance(value, Mapping) else {}


def list_of(value: object) -> list[object]:
    """`value` when it is a JSON array, else an empty one."""
    return value if isinstance(value, list) else []


def count_of(value: object) -> int:
    """A token count: an integer (or a whole float) >= 0, else 0."""
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        return 0
    return max(int(value), 0)


def finish_reason(raw: object, *, has_calls: bool) -> str:
    """The normalised finish reason (`stop`, `length`, `tool_calls`, `content_filter`, `error`, `other`)."""
    if raw is None:
        return "tool_calls" if has_calls else "stop"
    return _FINISH.get(str(raw), "other")


def parse_arguments(raw: object) -> dict[str, Any]:
    """Tool-call arguments as a dict, read by `imp._json.loads` (repaired when a model wrote them badly),
    `UnreadArguments` (no arguments, the text kept) when nothing is readable, `{"value": ...}` for JSON
    that is not an object."""
    if raw is None or raw == "":
        return {}
    if isinstance(raw, Mapping):
        return dict(raw)
    if not isinstance(raw, str):
        return {"value": raw}
    try:
        value = loads(raw)
    except ValueError:
        return UnreadArguments(raw)  # the tool runner quotes the text back to the model
    if isinstance(value, Mapping):
        return dict(value)
    if value in (None, "", []):
        return {}
    return {"value": value}


def wire_arguments(arguments: object) -> str:
    """Arguments as the JSON string OpenAI-style messages carry.

    Unread arguments go back as `{}`: servers that render a chat template (llama.cpp's, vLLM) may parse the
    history's tool-call arguments as JSON, and refuse the request when they cannot.
    """
    if isinstance(arguments, str):
        return arguments
    return json.dumps(dict(arguments) if isinstance(arguments, Mapping) else arguments, ensure_ascii=False)


def tool_choice_name(choice: object) -> str | None:
    """The forced tool's name for a named `tool_choice`, None for auto/none/required; raises if malformed."""
    if isinstance(choice, str):
        return None if choice in _TOOL_CHOICE_WORDS else choice
    if isinstance(choice, Mapping):
        fn = choice.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else choice.get("name")
        if isinstance(name, str) and name:
            return name
        kind = choice.get("type")
        if kind in ("auto", "none"):
            return None
        if kind in ("any", "required"):
            return None
    raise ValueError(f"tool_choice must be 'auto', 'none', 'required', a tool name or {{'name': ...}}, got {choice!r}")


def tool_choice_mode(choice: object) -> str:
    """`auto`, `none`, `required` or `named` for any accepted `tool_choice` form."""
    if tool_choice_name(choice) is not None:
        return "named"
    if isinstance(choice, str):
        return "required" if choice == "any" else choice
    kind = choice.get("type") if isinstance(choice, Mapping) else None
    return "required" if kind in ("any", "required") else str(kind)


def forces_tool(body: Mapping[str, object]) -> bool:
    """Whether a request body forces a tool call (`required`, `any`, or a named tool)."""
    choice = body.get("tool_choice")
    if choice is None:
        return False
    if isinstance(choice, str):
        return choice in ("required", "any")
    return isinstance(choice, Mapping) and choice.get("type") in ("function", "tool", "any")
