"""The text a model reads for a tool result: the value, or "Error: <sentence>"."""

from __future__ import annotations

import json
from typing import Any

import pydantic_core

from imp.history import format_tool_result

__all__ = ["format_tool_result", "format_tool_value"]


def format_tool_value(value: Any) -> str:
    """A tool's return value as text: a string as is, other values as JSON with ", " and ": "."""
    if isinstance(value, str):
        return value
    try:
        plain = pydantic_core.to_jsonable_python(value, fallback=str)
    except (TypeError, ValueError, pydantic_core.PydanticSerializationError):
        return str(value)
    return json.dumps(plain, ensure_ascii=False, separators=(", ", ": "))
