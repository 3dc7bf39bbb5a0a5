"""How a step's reply is read: its tool calls (native, or written as JSON text), its text (a thought or
the answer), or the parse error."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from imp.adapters.json import find_json_object
from imp.errors import AdapterParseError
from imp.history import ToolCall
from imp.models.base import LMResponse
from imp.programs.react._spec import TurnSpec
from imp.programs.react._state import CALLS_FIELD, TurnState
from imp.values import load_json, unwrap_fence

__all__ = ["MALFORMED_TOOL_CALL", "Reading", "extract_written_calls", "read_reply", "written_calls"]


@dataclass(frozen=True, slots=True)
class Reading:
    """A step's reply as the loop reads it: its calls, its text (a thought or the answer), or a parse error."""

    response: LMResponse
    calls: list[ToolCall]
    text: str | None = None
    error: AdapterParseError | None = None


def read_reply(spec: TurnSpec, state: TurnState, response: LMResponse) -> Reading:
    """The step's tool calls and its text (thought or answer), or the parse error."""
    calls = [
        c if c.id else ToolCall(f"call_{state.step}_{i}", c.name, c.arguments)
        for i, c in enumerate(response.tool_calls)
    ]
    text = response.text or ""
    text_field = spec.rule.text_field
    if not text.strip() and response.fields and not calls:
        value = response.fields.get(text_field)
        text = value if isinstance(value, str) else ""
    if not text.strip():
        return Reading(response, calls)
    parsed: Mapping[str, object] | None = None
    error: AdapterParseError | None = None
    if calls or spec.written:
        try:
            parsed = spec.adapter.parse_text(spec.step_signature, text)
        except AdapterParseError as exc:
            if calls:
                return Reading(response, calls, text.strip())
            error = exc
    if parsed is None:
        # Calls written as JSON text: a model with native tools that wrote them instead (read before
        # the adapter, so they are not taken for a thought), or, in the written layout, a reply the
        # adapter could not read (its own reading comes first, so a thought and every call survive).
        written = extract_written_calls(text, state.step)
        if written:
            return Reading(response, written)
        if error is not None:
            return Reading(response, [], None, error)
        try:
            parsed = spec.adapter.parse_text(spec.step_signature, text)
        except AdapterParseError as exc:
            return Reading(response, [], None, exc)
    if spec.written and not calls:
        items = parsed.get(CALLS_FIELD)
        calls = [
            call if call.id else ToolCall(f"call_{state.step}_{i}", call.name, call.arguments)
            for i, call in enumerate(written_calls(items if isinstance(items, list | tuple) else [], state.step))
        ]
    value = parsed.get(text_field)
    return Reading(response, calls, value if isinstance(value, str) and value.strip() else None)


# --- calls written as text ---------------------------------------------------------------------

MALFORMED_TOOL_CALL = "__imp_malformed_tool_call__"
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARG_KEYS = ("arguments", "args", "parameters", "input")


def _as_call(item: object, step: int, index: int) -> ToolCall | None:
    if not isinstance(item, Mapping):
        return None
    fn = item.get("function")
    source: Mapping[str, Any] = fn if isinstance(fn, Mapping) else item
    name = next((source[k] for k in _NAME_KEYS if isinstance(source.get(k), str)), None)
    args = next((source[k] for k in _ARG_KEYS if k in source), None)
    if isinstance(args, str):
        try:
            args = load_json(args)
        except ValueError:
            args = None
    call_id = str(item.get("id") or f"call_{step}_{index}")
    if name is None or not isinstance(args, Mapping | type(None)):
        return ToolCall(call_id, MALFORMED_TOOL_CALL, {"received": json.dumps(item, default=str)[:2000]})
    return ToolCall(call_id, name, dict(args or {}))


def extract_written_calls(text: str, step: int) -> list[ToolCall]:
    """Tool calls a model wrote as JSON text instead of making them (`{"tool": ..., "args": ...}` and kin)."""
    body = unwrap_fence(text.strip()).strip()
    if not body.startswith(("{", "[")):
        block = find_json_object(body)
        if block is None or len(block) < len(body) * 0.6:
            return []
        body = block
    try:
        value = load_json(body)
    except ValueError:
        return []
    items: list[Any]
    if isinstance(value, Mapping) and isinstance(value.get("tool_calls"), list):
        items = list(value["tool_calls"])
    elif isinstance(value, Mapping) and any(k in value for k in _NAME_KEYS) and any(k in value for k in _ARG_KEYS):
        items = [value]
    elif (
        isinstance(value, list)
        and value
        and all(isinstance(v, Mapping) and any(k in v for k in _NAME_KEYS) for v in value)
    ):
        items = list(value)
    else:
        return []
    calls = [_as_call(item, step, i) for i, item in enumerate(items)]
    return [c for c in calls if c is not None]


def written_calls(items: Sequence[object], step: int) -> list[ToolCall]:
    """The calls an LM wrote in its `tool_calls` output."""
    calls = [_as_call(item, step, index) for index, item in enumerate(items)]
    return [c for c in calls if c is not None]
