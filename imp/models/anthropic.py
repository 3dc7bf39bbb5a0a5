"""The Anthropic Messages client.

Anthropic's quirks live here: the system prompt is a top-level field, tool calls are `tool_use`
blocks and results go back as `tool_result` blocks in a user message, `tool_choice` is
`{"type": "auto" | "any" | "none" | "tool"}`, `max_tokens` is required, messages carry no `name`,
thinking blocks are replayed verbatim, a stream without `message_stop` is a failed request, and
prompt-cache breakpoints are marked unless `prompt_cache="off"` (see `imp.models._anthropic_cache`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Unpack

from imp.errors import InvalidResponse, StreamBroken
from imp.models._anthropic_cache import EXTENDED_TTL_BETA, check_prompt_cache, mark_breakpoints
from imp.models._anthropic_content import AnthropicContent
from imp.models._counting import count_anthropic
from imp.models._http import HTTPLM, StreamState
from imp.models._options import AnthropicOptions, Options
from imp.models._sse import SSEEvent
from imp.models._tokens import TokenCount
from imp.models._wire import JSONObject, finish_reason, parse_arguments, tool_choice_mode, tool_choice_name
from imp.models.base import LMCapabilities, LMResponse, StreamEvent
from imp.models.errors import error_from_payload
from imp.records import Message, ToolCall, Usage, content_text, message_tool_calls

__all__ = ["DEFAULT_MAX_TOKENS", "AnthropicLM"]

DEFAULT_MAX_TOKENS = 4096
"""Anthropic requires `max_tokens`; this is sent when a call does not say."""

API_VERSION = "2023-06-01"
STRUCTURED_OUTPUTS_BETA = "structured-outputs-2025-11-13"
_THINKING_BLOCKS = ("thinking", "redacted_thinking")


class AnthropicLM(HTTPLM):
    """A client for Anthropic's Messages API."""

    provider = "anthropic"
    default_base_url = "https://api.anthropic.com/v1"
    api_key_env = "ANTHROPIC_API_KEY"
    options_type = AnthropicOptions
    unsupported_options = frozenset({"seed"})
    capabilities = LMCapabilities(tool_calling=True, named_tool_choice=True, response_format="none")
    default_max_tokens = DEFAULT_MAX_TOKENS
    counts_exactly = True

    async def count_tokens(self, messages: Sequence[Message], **options: Unpack[Options]) -> TokenCount:
        """Anthropic's counting endpoint (`POST /v1/messages/count_tokens`): the system prompt, tools and
        media counted as the request would be; an estimate when it does not answer."""
        return await count_anthropic(self, messages, self._merged(options))

    @property
    def url(self) -> str:
        return f"{self.base_url}/messages"

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        headers = {"anthropic-version": API_VERSION}
        if api_key:
            headers["x-api-key"] = api_key
        return headers

    def request_headers(self, options: Options) -> dict[str, str]:
        betas = []
        if _schema_format(options.get("response_format")) is not None:
            betas.append(STRUCTURED_OUTPUTS_BETA)
        if check_prompt_cache(options.get("prompt_cache")) == "1h":
            betas.append(EXTENDED_TTL_BETA)
        return {"anthropic-beta": ",".join(betas)} if betas else {}

    def check_options(self, options: Mapping[str, object]) -> None:
        check_prompt_cache(options.get("prompt_cache"))
        super().check_options(options)
        fmt = options.get("response_format")
        if fmt is not None and _schema_format(fmt) is None:
            raise ValueError("anthropic takes response_format only as {'type': 'json_schema', ...}")

    def build_body(self, messages: Sequence[Message], options: Options, *, stream: bool) -> dict[str, object]:
        system, wire = _wire_messages(messages, AnthropicContent(self))
        body: dict[str, object] = {"model": self.model, "max_tokens": options.get("max_tokens", DEFAULT_MAX_TOKENS)}
        if system:
            body["system"] = system
        body["messages"] = wire
        for key in ("temperature", "top_p"):
            if key in options:
                body[key] = options[key]
        if "stop" in options:
            stop = options["stop"]
            body["stop_sequences"] = [stop] if isinstance(stop, str) else list(stop)
        if "reasoning_effort" in options:
            body["output_config"] = {"effort": options["reasoning_effort"]}
        if "tools" in options:
            body["tools"] = [_wire_tool(t) for t in options["tools"]]
        choice = _wire_tool_choice(options.get("tool_choice"), options.get("parallel_tool_calls"))
        if choice is not None:
            body["tool_choice"] = choice
        schema = _schema_format(options.get("response_format"))
        if schema is not None:
            body["output_format"] = {"type": "json_schema", "schema": schema}
        if stream:
            body["stream"] = True
        body.update(options.get("extra_body") or {})
        mark_breakpoints(body, check_prompt_cache(options.get("prompt_cache")))
        return body

    def parse_response(self, body: object, headers: Mapping[str, str], *, step: int) -> LMResponse:
        if isinstance(body, Mapping) and body.get("type") == "error":
            raise error_from_payload(
                status=None, body=body, provider=self.provider, headers=headers, secrets=self.secrets, in_stream=True
            )
        if not isinstance(body, Mapping) or not isinstance(body.get("content"), list):
            raise InvalidResponse(
                "the response is not an Anthropic message (no content)",
                status=200,
                provider=self.provider,
                body=body if isinstance(body, Mapping) else str(body)[:2000],
            )
        texts: list[str] = []
        thoughts: list[str] = []
        blocks: list[dict[str, object]] = []
        calls: list[ToolCall] = []
        for block in body["content"]:
            kind = block.get("type")
            if kind == "text":
                texts.append(str(block.get("text", "")))
            elif kind in _THINKING_BLOCKS:
                blocks.append(dict(block))
                if kind == "thinking":
                    thoughts.append(str(block.get("thinking", "")))
            elif kind == "tool_use":
                calls.append(
                    ToolCall(
                        id=str(block.get("id") or f"call_{step}_{len(calls)}"),
                        name=str(block.get("name", "")),
                        arguments=parse_arguments(block.get("input")),
                    )
                )
        return LMResponse(
            text="".join(texts),
            tool_calls=tuple(calls),
            reasoning="".join(thoughts) or None,
            reasoning_data=blocks or None,
            usage=_usage(body.get("usage")),
            finish_reason=finish_reason(body.get("stop_reason"), has_calls=bool(calls)),
            model=body.get("model") or self.model,
            request_id=headers.get("request-id") or body.get("id"),
            raw=body,
        )

    def stream_state(self, *, step: int, headers: Mapping[str, str]) -> StreamState:
        return _AnthropicStream(self, step, headers.get("request-id"))


def _schema_format(fmt: object) -> Any:
    """The JSON schema inside an OpenAI-style or Anthropic-style json_schema response format."""
    if not isinstance(fmt, Mapping) or fmt.get("type") != "json_schema":
        return None
    inner = fmt.get("json_schema")
    if isinstance(inner, Mapping) and "schema" in inner:
        return inner["schema"]
    return fmt.get("schema")


def _blocks(content: object) -> list[dict[str, object]]:
    """An assistant message's content as blocks (a media value, which a reply cannot hold, as its description)."""
    if content is None or content == "":
        return []
    if isinstance(content, list):
        return [dict(p) if isinstance(p, Mapping) else {"type": "text", "text": str(p)} for p in content]
    return [{"type": "text", "text": str(content)}]


def _tool_use(call: ToolCall) -> dict[str, object]:
    """A call as Anthropic's `tool_use` block: its arguments as an object."""
    return {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)}


def _id_of(block: JSONObject) -> str | None:
    found = block.get("id")
    return found if isinstance(found, str) else None


def _wire_messages(messages: Sequence[Message], writer: AnthropicContent) -> tuple[str, list[dict[str, object]]]:
    """The top-level system text and the alternating user/assistant messages (names left out)."""
    system: list[str] = []
    turns: list[tuple[str, list[dict[str, object]]]] = []

    def add(role: str, blocks: list[dict[str, object]]) -> None:
        if not blocks:
            return
        if turns and turns[-1][0] == role:  # Anthropic wants roles to alternate: merge neighbours
            turns[-1][1].extend(blocks)
        else:
            turns.append((role, blocks))

    for message in messages:
        role = message.get("role")
        content = message.get("content")
        if role in ("system", "developer"):
            system.append(content_text(content))
        elif role == "tool":
            result: dict[str, object] = {
                "type": "tool_result",
                "tool_use_id": str(message.get("tool_call_id") or ""),
                "content": writer.tool_result(content),
            }
            if message.get("is_error"):
                result["is_error"] = True
            add("user", [result])
        elif role == "assistant":
            blocks: list[dict[str, object]] = []
            data = message.get("reasoning_data")
            if isinstance(data, list):
                blocks.extend(dict(b) for b in data if isinstance(b, Mapping) and b.get("type") in _THINKING_BLOCKS)
            blocks.extend(_blocks(content))
            blocks.extend(_tool_use(call) for call in message_tool_calls(message))
            add("assistant", blocks)
        else:
            add("user", writer.blocks(content))
    wire: list[dict[str, object]] = [{"role": role, "content": blocks} for role, blocks in turns]
    return "\n\n".join(s for s in system if s), wire


def _wire_tool(tool: object) -> dict[str, object]:
    if not isinstance(tool, Mapping):
        raise TypeError(f"a tool is a JSON schema mapping, got {type(tool).__name__}")
    fn = tool.get("function") if tool.get("type") == "function" else None
    spec: JSONObject = fn if isinstance(fn, Mapping) else tool
    out: dict[str, object] = {"name": spec["name"]}
    if spec.get("description") is not None:
        out["description"] = spec["description"]
    out["input_schema"] = spec.get("parameters") or spec.get("input_schema") or {"type": "object", "properties": {}}
    return out


def _wire_tool_choice(choice: object, parallel: object) -> dict[str, object] | None:
    """Anthropic's `tool_choice` object; `parallel_tool_calls=False` rides on it as
    `disable_parallel_tool_use` (Anthropic has no top-level field for it)."""
    if choice is None and parallel is None:
        return None
    wire: dict[str, object]
    mode = "auto" if choice is None else tool_choice_mode(choice)
    if mode == "named":
        wire = {"type": "tool", "name": tool_choice_name(choice)}
    elif mode == "required":
        wire = {"type": "any"}
    else:
        wire = {"type": mode}
    if parallel is False and mode != "none":
        wire["disable_parallel_tool_use"] = True
    return wire


def _usage(raw: object) -> Usage:
    if not isinstance(raw, Mapping):
        return Usage(requests=1)
    # Anthropic counts cache reads and writes apart from `input_tokens`: all three were input.
    cached = int(raw.get("cache_read_input_tokens") or 0)
    written = int(raw.get("cache_creation_input_tokens") or 0)
    return Usage(
        input_tokens=int(raw.get("input_tokens") or 0) + cached + written,
        output_tokens=int(raw.get("output_tokens") or 0),
        cached_tokens=cached,
        cache_write_tokens=written,
        requests=1,
    )


class _Block:
    __slots__ = ("data", "kind", "parts", "tool_index")

    def __init__(self, start: JSONObject, tool_index: int | None) -> None:
        self.kind = str(start.get("type", ""))
        self.data = dict(start)
        self.parts: list[str] = []
        self.tool_index = tool_index


class _AnthropicStream(StreamState):
    """Reads Messages stream events; `message_stop` is the only good ending."""

    def __init__(self, lm: AnthropicLM, step: int, request_id: str | None) -> None:
        self._lm = lm
        self._step = step
        self._request_id = request_id
        self._blocks: dict[int, _Block] = {}
        self._tools = 0
        self._usage: dict[str, object] = {}
        self._stop_reason: str | None = None
        self._model: str | None = None
        self._done = False

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        try:
            payload = json.loads(event.data)
        except ValueError:
            if event.event == "error":
                raise self._lm.stream_error({"error": {"message": event.data}}, request_id=self._request_id) from None
            return []
        kind = payload.get("type") if isinstance(payload, Mapping) else None
        if event.event == "error" or kind == "error":
            raise self._lm.stream_error(payload, request_id=self._request_id)
        if kind == "message_start":
            message = payload.get("message") or {}
            self._model = message.get("model")
            self._request_id = self._request_id or message.get("id")
            self._usage.update(message.get("usage") or {})
        elif kind == "content_block_start":
            return self._start(int(payload.get("index", len(self._blocks))), payload.get("content_block") or {})
        elif kind == "content_block_delta":
            return self._delta(int(payload.get("index", 0)), payload.get("delta") or {})
        elif kind == "message_delta":
            self._stop_reason = (payload.get("delta") or {}).get("stop_reason") or self._stop_reason
            self._usage.update({k: v for k, v in (payload.get("usage") or {}).items() if v is not None})
        elif kind == "message_stop":
            self._done = True
        return []

    def _start(self, index: int, start: JSONObject) -> list[StreamEvent]:
        tool_index = None
        if start.get("type") == "tool_use":
            tool_index = self._tools
            self._tools += 1
        block = self._blocks[index] = _Block(start, tool_index)
        if block.kind == "tool_use":
            return [
                StreamEvent(
                    kind="tool_call",
                    index=tool_index,
                    tool_name=str(start.get("name", "")),
                    tool_call_id=_id_of(start),
                )
            ]
        if block.kind == "text" and start.get("text"):
            block.parts.append(str(start["text"]))
            return [StreamEvent(kind="text", delta=str(start["text"]))]
        return []

    def _delta(self, index: int, delta: JSONObject) -> list[StreamEvent]:
        block = self._blocks.get(index)
        if block is None:
            block = self._blocks[index] = _Block({"type": "text"}, None)
        kind = delta.get("type")
        if kind == "text_delta":
            text = str(delta.get("text", ""))
            block.parts.append(text)
            return [StreamEvent(kind="text", delta=text)] if text else []
        if kind == "thinking_delta":
            text = str(delta.get("thinking", ""))
            block.parts.append(text)
            return [StreamEvent(kind="reasoning", delta=text)] if text else []
        if kind == "signature_delta":
            block.data["signature"] = str(block.data.get("signature") or "") + str(delta.get("signature", ""))
        elif kind == "input_json_delta":
            piece = str(delta.get("partial_json", ""))
            block.parts.append(piece)
            return [StreamEvent(kind="tool_call", delta=piece, index=block.tool_index, tool_call_id=_id_of(block.data))]
        return []

    def finish(self) -> LMResponse:
        if not self._done:
            raise StreamBroken(
                "the stream ended without message_stop",
                provider=self._lm.provider,
                code="stream_truncated",
                request_id=self._request_id,
            )
        texts: list[str] = []
        thoughts: list[str] = []
        reasoning_blocks: list[dict[str, object]] = []
        calls: list[ToolCall] = []
        for _, block in sorted(self._blocks.items()):
            joined = "".join(block.parts)
            if block.kind == "text":
                texts.append(joined)
            elif block.kind == "thinking":
                thoughts.append(joined)
                reasoning_blocks.append({**block.data, "thinking": joined})
            elif block.kind == "redacted_thinking":
                reasoning_blocks.append(block.data)
            elif block.kind == "tool_use":
                calls.append(
                    ToolCall(
                        id=str(block.data.get("id") or f"call_{self._step}_{len(calls)}"),
                        name=str(block.data.get("name", "")),
                        arguments=parse_arguments(joined) if joined else parse_arguments(block.data.get("input")),
                    )
                )
        return LMResponse(
            text="".join(texts),
            tool_calls=tuple(calls),
            reasoning="".join(thoughts) or None,
            reasoning_data=reasoning_blocks or None,
            usage=_usage(self._usage),
            finish_reason=finish_reason(self._stop_reason, has_calls=bool(calls)),
            model=self._model or self._lm.model,
            request_id=self._request_id,
        )
