"""The Responses API's request side: chat messages as `input` items, tools, tool_choice, `text.format`.

A turn's reasoning is kept as the `reasoning_data` of its assistant message: the list of the
response's output items in order, the `reasoning` items verbatim (id, summary, encrypted_content)
and a reference (`id`, `call_id`) for each function call and message. Replaying it puts every
reasoning item back before the item it preceded, with that item's own id: OpenAI refuses a
reasoning item "provided without its required following item" and pairs the two by id.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from imp.models._responses_content import ResponsesContent
from imp.models._wire import JSONObject, tool_choice_mode, tool_choice_name, wire_arguments
from imp.records import Message, ToolCall, content_text, message_tool_calls

__all__ = [
    "REPLAYED_ITEMS",
    "input_items",
    "text_format",
    "wire_tool",
    "wire_tool_choice",
]

REPLAYED_ITEMS = frozenset({"reasoning", "function_call", "message"})
"""The output item types a turn's `reasoning_data` lists (other providers' reasoning is left alone)."""


def input_items(
    messages: Sequence[Message], content_writer: ResponsesContent | None = None
) -> tuple[str, list[dict[str, object]]]:
    """The `instructions` (the leading system messages) and the `input` items of a conversation
    (`content_writer` writes media: the client's own, with its limits)."""
    writer = content_writer or ResponsesContent(None)
    instructions: list[str] = []
    items: list[dict[str, object]] = []
    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            if not items:
                instructions.append(_text_of(content))
            else:  # a later system message stays where it was said
                items.append({"role": "developer", "content": _text_of(content)})
        elif role == "tool":
            items.append(
                {
                    "type": "function_call_output",
                    "call_id": str(message.get("tool_call_id") or ""),
                    "output": writer.tool_output(content),
                }
            )
        elif role == "assistant":
            items.extend(_assistant_items(message))
        else:
            items.append({"role": "user", "content": writer.user(content)})
    return "\n\n".join(s for s in instructions if s), items


def _assistant_items(message: Message) -> list[dict[str, object]]:
    """An assistant message as items: its recorded output order when it has one, else text then calls."""
    text = _text_of(message.get("content"))
    calls = message_tool_calls(message)
    by_id = {call.id: call for call in calls}
    out: list[dict[str, object]] = []
    placed: set[str] = set()
    text_placed = False
    for item in _replayed(message.get("reasoning_data")):
        kind = item.get("type")
        if kind == "reasoning":
            out.append(dict(item))
        elif kind == "function_call":
            call = by_id.get(str(item.get("call_id")))
            if call is not None and call.id not in placed:
                placed.add(call.id)
                out.append(_function_call(call, item.get("id")))
        elif kind == "message" and text and not text_placed:
            text_placed = True
            out.append(_output_message(text, item.get("id")))
    if text and not text_placed:
        out.insert(_after_reasoning(out), _output_message(text, None))
    out.extend(_function_call(call, None) for call in calls if call.id not in placed)
    return _without_orphans(out)


def _after_reasoning(items: list[dict[str, object]]) -> int:
    """Where an unrecorded text goes: after the reasoning items at the front, before the calls."""
    index = 0
    while index < len(items) and items[index].get("type") == "reasoning":
        index += 1
    return index


def _without_orphans(items: list[dict[str, object]]) -> list[dict[str, object]]:
    """Drop reasoning items nothing follows (their message was left out): OpenAI refuses them."""
    out: list[dict[str, object]] = []
    for index, item in enumerate(items):
        if item.get("type") == "reasoning" and not any(i.get("type") != "reasoning" for i in items[index + 1 :]):
            continue
        out.append(item)
    return out


def _replayed(data: object) -> list[JSONObject]:
    if not isinstance(data, list):
        return []  # a chat-completions mapping or nothing: not this API's
    return [d for d in data if isinstance(d, Mapping) and d.get("type") in REPLAYED_ITEMS]


def _function_call(call: ToolCall, item_id: object) -> dict[str, object]:
    item: dict[str, object] = {"type": "function_call"}
    if isinstance(item_id, str) and item_id:
        item["id"] = item_id
    item.update(call_id=call.id, name=call.name, arguments=wire_arguments(call.arguments))
    return item


def _output_message(text: str, item_id: object) -> dict[str, object]:
    if not (isinstance(item_id, str) and item_id):
        return {"role": "assistant", "content": text}
    content = [{"type": "output_text", "text": text, "annotations": []}]
    return {"type": "message", "id": item_id, "role": "assistant", "status": "completed", "content": content}


def _text_of(content: object) -> str:
    return content_text(content)


def wire_tool(tool: object) -> dict[str, object]:
    """A function tool, flat (`{"type": "function", "name", "description", "parameters", "strict"}`)."""
    if not isinstance(tool, Mapping):
        raise TypeError(f"a tool is a JSON schema mapping, got {type(tool).__name__}")
    fn = tool.get("function")
    spec: JSONObject = fn if isinstance(fn, Mapping) else tool
    out: dict[str, object] = {"type": "function", "name": spec["name"]}
    if spec.get("description") is not None:
        out["description"] = spec["description"]
    out["parameters"] = spec.get("parameters") or spec.get("input_schema") or {"type": "object", "properties": {}}
    if "strict" in spec:
        out["strict"] = spec["strict"]
    return out


def wire_tool_choice(choice: object) -> Any:
    """`auto` / `none` / `required`, or `{"type": "function", "name": ...}` for a named tool."""
    mode = tool_choice_mode(choice)
    if mode == "named":
        return {"type": "function", "name": tool_choice_name(choice)}
    return mode


def text_format(response_format: object) -> dict[str, object] | None:
    """A chat-completions `response_format` as `text.format` (the schema's fields flat beside `type`)."""
    if not isinstance(response_format, Mapping):
        return None
    kind = response_format.get("type")
    if kind == "json_schema":
        inner = response_format.get("json_schema")
        spec: JSONObject = inner if isinstance(inner, Mapping) else response_format
        out: dict[str, object] = {"type": "json_schema", "name": str(spec.get("name") or "outputs")}
        for key in ("description", "schema", "strict"):
            if key in spec:
                out[key] = spec[key]
        return out
    if kind in ("json_object", "text"):
        return {"type": kind}
    return None
