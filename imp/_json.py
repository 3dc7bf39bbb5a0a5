"""Lenient JSON: the one reader of model-written JSON, on json-repair, for every layer.

Models write JSON with Python spellings, trailing commas, code fences and cut-off ends. Every
place imp reads such text (field values, tool arguments, wire payloads, adapter replies) goes
through `loads`, so all of them accept the same inputs and fail the same way: a `ValueError`
whose message starts with "not JSON".
"""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["loads", "loads_object", "unwrap_fence"]

_FENCE = re.compile(r"\A\s*```[A-Za-z0-9_-]*[ \t]*\n?(.*?)\n?```\s*\Z", re.DOTALL)


def unwrap_fence(text: str) -> str:
    """The body of a fenced ```json ... ``` block, or the text as it is."""
    match = _FENCE.match(text)
    return match.group(1) if match else text


def loads(text: str | bytes | bytearray) -> Any:
    """Decode JSON, repairing what can be repaired (Python-dict spelling, trailing commas, fences).

    Raises:
        ValueError: "not JSON: ..." when the text is blank or cannot be repaired into a value.
    """
    if isinstance(text, bytes | bytearray):
        text = bytes(text).decode("utf-8", errors="replace")
    body = unwrap_fence(text).strip()
    if not body:
        raise ValueError("not JSON: the text is blank")
    try:
        return json.loads(body)
    except ValueError:
        pass
    import json_repair  # imported on first repair: most JSON needs none

    try:
        value = json_repair.loads(body)
    except Exception as exc:  # json_repair raises assorted errors on hopeless input
        raise ValueError(f"not JSON: {exc}") from None
    if value == "" and body not in ('""', "''"):
        # json-repair answers "" for text it could not read at all.
        raise ValueError(f"not JSON: {body[:60]!r}")
    return value


def loads_object(text: str | bytes | bytearray) -> dict[str, Any]:
    """Decode a JSON object (repairing it).

    Raises:
        ValueError: "not JSON ..." as `loads` does, or "not a JSON object" for another value.
    """
    value = loads(text)
    if not isinstance(value, dict):
        raise ValueError("not a JSON object")
    return value
