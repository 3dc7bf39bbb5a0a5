"""The Responses API's reply side: a `response` object read into an `LMResponse`.

Output items are read in order: `message` items give the text (a `refusal` part is a content
filter's answer), `function_call` items the tool calls (their `call_id` is the call's id),
`reasoning` items the reasoning summary and, verbatim, what the next request must send back.
`status` says how the response ended: `incomplete` for `max_output_tokens` is a cut answer
(`length`), for `content_filter` a refusal; `failed` carries an error.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from imp.models._wire import JSONObject, count_of, list_of, mapping_of, parse_arguments
from imp.models.base import LMResponse
from imp.records import ToolCall, Usage

__all__ = ["Output", "read_output", "read_usage", "status_finish", "to_response"]

_INCOMPLETE = {"max_output_tokens": "length", "content_filter": "content_filter"}


class Output:
    """What a response's output items say: text, refusal, calls, reasoning and the replay list."""

    __slots__ = ("calls", "reasoning", "refusal", "replay", "text")

    def __init__(self) -> None:
        self.text: list[str] = []
        self.refusal: list[str] = []
        self.reasoning: list[str] = []
        self.calls: list[ToolCall] = []
        self.replay: list[JSONObject] = []


def read_output(items: Sequence[object], step: int) -> Output:
    """Read output items in order (items of other types, a hosted tool's, are skipped)."""
    out = Output()
    for item in items:
        if not isinstance(item, Mapping):
            continue
        kind = item.get("type")
        if kind == "message":
            _message(item, out)
        elif kind == "function_call":
            call = ToolCall(
                id=str(item.get("call_id") or item.get("id") or f"call_{step}_{len(out.calls)}"),
                name=str(item.get("name") or ""),
                arguments=parse_arguments(item.get("arguments")),
            )
            out.calls.append(call)
            ref: dict[str, object] = {"type": "function_call", "call_id": call.id}
            if isinstance(item.get("id"), str):
                ref["id"] = item["id"]
            out.replay.append(ref)
        elif kind == "reasoning":
            out.replay.append(dict(item))
            out.reasoning.extend(_reasoning_texts(item))
    return out


def _message(item: JSONObject, out: Output) -> None:
    for part in list_of(item.get("content")):
        if not isinstance(part, Mapping):
            continue
        if part.get("type") == "output_text":
            out.text.append(str(part.get("text") or ""))
        elif part.get("type") == "refusal":
            out.refusal.append(str(part.get("refusal") or ""))
    if isinstance(item.get("id"), str):
        out.replay.append({"type": "message", "id": item["id"]})


def _reasoning_texts(item: JSONObject) -> list[str]:
    """The summary texts (OpenAI), else the raw reasoning `content` (open-weight models' servers)."""
    texts = [str(p.get("text") or "") for p in list_of(item.get("summary")) if isinstance(p, Mapping)]
    if not any(texts):
        texts = [str(p.get("text") or "") for p in list_of(item.get("content")) if isinstance(p, Mapping)]
    return [t for t in texts if t]


def read_usage(raw: object) -> Usage:
    """Input and output tokens, cached input (`input_tokens_details`) and reasoning tokens."""
    if not isinstance(raw, Mapping):
        return Usage(requests=1)
    return Usage(
        input_tokens=count_of(raw.get("input_tokens")),
        output_tokens=count_of(raw.get("output_tokens")),
        cached_tokens=count_of(mapping_of(raw.get("input_tokens_details")).get("cached_tokens")),
        reasoning_tokens=count_of(mapping_of(raw.get("output_tokens_details")).get("reasoning_tokens")),
        requests=1,
    )


def status_finish(body: JSONObject, *, has_calls: bool, refused: bool) -> str:
    """The normalised finish reason of a finished response."""
    if body.get("status") == "incomplete":
        details = body.get("incomplete_details")
        reason = details.get("reason") if isinstance(details, Mapping) else None
        return _INCOMPLETE.get(str(reason), "other")
    if refused:
        return "content_filter"
    return "tool_calls" if has_calls else "stop"


def to_response(body: JSONObject, output: Output, *, model: str, request_id: str | None) -> LMResponse:
    """The `LMResponse` of a finished response body and its read output."""
    refused = bool(output.refusal) and not output.text
    calls = tuple(output.calls)
    has_reasoning = any(item.get("type") == "reasoning" for item in output.replay)
    return LMResponse(
        text="".join(output.refusal) if refused else "".join(output.text),
        tool_calls=calls,
        reasoning="\n\n".join(output.reasoning) or None,
        reasoning_data=output.replay if has_reasoning else None,
        usage=read_usage(body.get("usage")),
        finish_reason=status_finish(body, has_calls=bool(calls), refused=refused),
        model=str(body.get("model") or model),
        request_id=request_id,
        raw=body,
    )
