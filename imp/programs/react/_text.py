"""Tool calls written as text: calls a model wrote as JSON, the written-tool layout, the extractor's trajectory."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from imp.adapters.base import Adapter
from imp.adapters.json import find_json_object
from imp.history import Step, ToolCall, ToolResult
from imp.programs.react._state import CALLS_FIELD
from imp.signature import Signature
from imp.tools import Tool
from imp.values import load_json, render_value, unwrap_fence

__all__ = [
    "MALFORMED_TOOL_CALL",
    "extract_written_calls",
    "trajectory_text",
    "written_calls",
    "written_observations",
    "written_step_text",
    "written_tool_listing",
]

MALFORMED_TOOL_CALL = "__imp_malformed_tool_call__"
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARG_KEYS = ("arguments", "args", "parameters", "input")


def _as_call(item: Any, step: int, index: int) -> ToolCall | None:
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


def _result_text(result: ToolResult) -> str:
    if not result.ok:
        return f"Error: {result.error}"
    return render_value(result.result)


def trajectory_text(steps: Sequence[Step], task: Signature) -> str:
    """A readable transcript of the turn for the extractor: inputs, thoughts, calls with results, notes."""
    lines: list[str] = []
    for number, step in enumerate(steps, start=1):
        lines.append(f"Step {number}:")
        for name in task.inputs:
            if step.fields.get(name) is not None:
                lines.append(f"  input {name}: {render_value(step.fields[name], task.inputs[name])}")
        if step.note:
            lines.append(f"  note: {step.note}")
        if step.thought:
            lines.append(f"  thought: {step.thought}")
        results = {r.id: r for r in step.result_list()}
        for call in step.calls:
            args = json.dumps(dict(call.arguments), ensure_ascii=False, default=str)
            result = results.get(call.id)
            outcome = _result_text(result) if result is not None else "(no result)"
            lines.append(f"  called {call.name}({args}) -> {outcome}")
        for name in task.outputs:
            if name in step.fields:
                lines.append(f"  output {name}: {render_value(step.fields[name], task.outputs[name])}")
    return "\n".join(lines)


def written_tool_listing(tools: Sequence[Tool]) -> str:
    """The tools as text, in DSPy's wording, for an LM without native tool calling."""
    lines = []
    for index, tool in enumerate(tools, start=1):
        schema: dict[str, Any] = dict(tool.parameters) if tool.parameters else {"type": "object", "properties": {}}
        args: dict[str, Any] = dict(schema.get("properties") or {})
        extra = {k: schema[k] for k in ("required", "$defs") if k in schema}
        described = json.dumps({**args, **extra}, ensure_ascii=False, default=str)
        lines.append(
            f"({index}) {tool.name}, whose description is <desc>{tool.description}</desc>. It takes arguments {described}."
        )
    return "\n".join(lines)


def written_calls(items: Sequence[Any], step: int) -> list[ToolCall]:
    """The calls an LM wrote in its `tool_calls` output."""
    calls = [_as_call(item, step, index) for index, item in enumerate(items)]
    return [c for c in calls if c is not None]


def written_step_text(
    adapter: Adapter, step_signature: Signature, text_field: str, thought: str | None, calls: Sequence[ToolCall]
) -> str:
    """A written-mode step as the model wrote it, in the adapter's reply layout: its text field, then its calls."""
    listed = [{"name": c.name, "arguments": dict(c.arguments)} for c in calls]
    return adapter.reply_text(step_signature, {text_field: thought or "", CALLS_FIELD: listed})


def written_observations(calls: Sequence[ToolCall], results: Sequence[ToolResult]) -> str:
    """The results of a written-mode step, as the user message that follows it."""
    by_id = {r.id: r for r in results}
    lines = ["Results of your tool calls:"]
    for call in calls:
        result = by_id.get(call.id)
        shown = _result_text(result) if result is not None else "(no result)"
        lines.append(f"- `{call.name}` ({call.id}): {shown}")
    return "\n".join(lines)
