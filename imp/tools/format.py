"""The text a model reads for a tool result: the value, or "Error: <sentence>"."""

from __future__ import annotations

import json
from typing import Any

import pydantic_core

from imp.history import ToolResult

__all__ = ["format_tool_result", "format_tool_value"]


def format_tool_result(result: ToolResult) -> str:
    """What the model reads for one tool call on its next step.

    A success is the value (strings as they are, anything else compact JSON in DSPy's
    `json.dumps` style); a failure is "Error: " and its sentence.
    """
    if result.error is not None:
        return f"Error: {result.error}"
    return format_tool_value(result.result)


def format_tool_value(value: Any) -> str:
    """A tool's return value as text: a string as is, other values as JSON with ", " and ": "."""
    if isinstance(value, str):
        return value
    try:
        plain = pydantic_core.to_jsonable_python(value, fallback=str)
    except (TypeError, ValueError, pydantic_core.PydanticSerializationError):
        return str(value)
    return json.dumps(plain, ensure_ascii=False, separators=(", ", ": "))
