"""The OpenAI Chat Completions client, for OpenAI, OpenRouter and every compatible server.

Every quirk of the OpenAI-compatible world lives here: `content: ""` beside tool calls, names kept on
messages, reasoning under three spellings, tool calls without ids, servers that repeat the tool name
in every streamed delta, errors inside a 200 stream, usage in a final `choices: []` chunk.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Unpack

from imp.errors import InvalidResponse, LMError, StreamBroken
from imp.models._counting import TokenizerKind, count_local_server
from imp.models._http import HTTPLM, StreamState
from imp.models._openai_content import ChatContent
from imp.models._options import Options
from imp.models._sse import SSEEvent
from imp.models._tokens import TokenCount, estimate
from imp.models._wire import (
    JSONObject,
    finish_reason,
    list_of,
    mapping_of,
    parse_arguments,
    tool_choice_mode,
    tool_choice_name,
    wire_arguments,
)
from imp.models.base import LMCapabilities, LMResponse, StreamEvent
from imp.models.errors import error_from_payload
from imp.records import Message, ToolCall, Usage, message_tool_calls

__all__ = ["OpenAILM", "OpenRouterLM"]

# OpenAI's reasoning models take `max_completion_tokens` and refuse `max_tokens`.
_REASONING_MODEL = re.compile(r"^(gpt-5|o[134])([-_:.].*)?$")
# What a provider needs back verbatim to continue a turn: `reasoning_content` (DeepSeek, z.ai),
# `reasoning` (Groq, OpenRouter, Ollama), `reasoning_details` (OpenRouter, an array),
# `thought_signature` / `extra_content` (Gemini's OpenAI-compatible endpoint).
_REASONING_KEYS = ("reasoning_content", "reasoning", "reasoning_details", "thought_signature", "extra_content")


class OpenAILM(HTTPLM):
    """A client for OpenAI's Chat Completions API and the servers that speak it (through `base_url`)."""

    provider = "openai"
    default_base_url = "https://api.openai.com/v1"
    api_key_env = "OPENAI_API_KEY"
    capabilities = LMCapabilities(tool_calling=True, named_tool_choice=True, response_format="json_schema")
    # Local and hosted OpenAI-compatible servers refuse different subsets of these.
    step_down_options = frozenset({"response_format", "tool_choice", "parallel_tool_calls", "stream_options"})
    tokenizer_kind: TokenizerKind | None = None
    """Which tokenizer endpoint the server showed it has (None: not asked yet; see `count_tokens`)."""

    @property
    def url(self) -> str:
        return f"{self.base_url}/chat/completions"

    @property
    def counts_exactly(self) -> bool:  # type: ignore[override]  # a property over the protocol's flag
        """A local server may tokenize (llama.cpp's does, exactly); OpenAI's own service has no counting endpoint."""
        return not self.own_service and self.tokenizer_kind in (None, "llama.cpp")

    async def count_tokens(self, messages: Sequence[Message], **options: Unpack[Options]) -> TokenCount:
        """The server's tokenizer on a local server (llama.cpp's `/tokenize`, exact; llama-cpp-python's
        `/extras/tokenize/count`, the template estimated); an estimate for OpenAI's own service."""
        if self.own_service or self.tokenizer_kind == "none":
            return estimate(messages, options)
        counted, self.tokenizer_kind = await count_local_server(
            self, messages, self._merged(options), self.tokenizer_kind
        )
        return counted

    def auth_headers(self, api_key: str | None) -> dict[str, str]:
        return {"authorization": f"Bearer {api_key}"} if api_key else {}

    def build_body(self, messages: Sequence[Message], options: Options, *, stream: bool) -> dict[str, object]:
        body: dict[str, object] = {"model": self.model, "messages": _wire_messages(self, messages)}
        for key in (
            "temperature",
            "top_p",
            "stop",
            "seed",
            "parallel_tool_calls",
            "response_format",
            "reasoning_effort",
        ):
            if key in options:
                body[key] = options[key]
        if "max_tokens" in options:
            # Only OpenAI itself renamed the field; compatible servers still read `max_tokens`.
            official = self.provider == "openai" and self.base_url == self.default_base_url
            limit_key = "max_completion_tokens" if official and _REASONING_MODEL.match(self.model) else "max_tokens"
            body[limit_key] = options["max_tokens"]
        if "tools" in options:
            body["tools"] = [_wire_tool(t) for t in options["tools"]]
        if "tool_choice" in options:
            body["tool_choice"] = _wire_tool_choice(options["tool_choice"])
        if stream:
            body["stream"] = True
            if "stream_options" not in self._stepped.dropped:  # usage in a final chunk; older servers refuse it
                body["stream_options"] = {"include_usage": True}
        body.update(options.get("extra_body") or {})
        return body

    def parse_response(self, body: Any, headers: Mapping[str, str], *, step: int) -> LMResponse:
        if isinstance(body, Mapping) and body.get("error") is not None and not body.get("choices"):
            raise _relayed_error(self, body, headers)  # OpenRouter relays an upstream failure inside a 200
        choices = body.get("choices") if isinstance(body, Mapping) else None
        if not isinstance(choices, list) or not choices or not isinstance(choices[0], Mapping):
            raise InvalidResponse(
                "the response is not a chat completion (no choices)",
                status=200,
                provider=self.provider,
                body=_short(body),
            )
        choice = choices[0]
        message = choice.get("message") or {}
        calls = tuple(_tool_call(raw, step, index) for index, raw in enumerate(message.get("tool_calls") or ()) if raw)
        reasoning, reasoning_data = _reasoning(message)
        return LMResponse(
            text=_content_text(message.get("content")),
            tool_calls=calls,
            reasoning=reasoning,
            reasoning_data=reasoning_data,
            usage=_usage(body.get("usage")),
            finish_reason=finish_reason(choice.get("finish_reason"), has_calls=bool(calls)),
            model=body.get("model") or self.model,
            request_id=headers.get("x-request-id") or body.get("id"),
            raw=body,
        )

    def stream_state(self, *, step: int, headers: Mapping[str, str]) -> StreamState:
        return _OpenAIStream(self, step, headers.get("x-request-id"))


class OpenRouterLM(OpenAILM):
    """OpenRouter: the OpenAI format, with errors relayed inside 200 bodies and cost in usage."""

    provider = "openrouter"
    default_base_url = "https://openrouter.ai/api/v1"
    api_key_env = "OPENROUTER_API_KEY"


def _relayed_error(lm: OpenAILM, body: JSONObject, headers: Mapping[str, str]) -> LMError:
    error = body.get("error")
    code = error.get("code") if isinstance(error, Mapping) else None
    status = code if isinstance(code, int) and not isinstance(code, bool) else None
    return error_from_payload(
        status=status, body=body, provider=lm.provider, headers=headers, secrets=lm.secrets, in_stream=status is None
    )


def _short(body: object) -> Any:
    text = json.dumps(body, default=str)
    return body if len(text) <= 2000 else text[:2000]


def _wire_messages(lm: OpenAILM, messages: Sequence[Message]) -> list[dict[str, object]]:
    """The messages in this API's shape; a run of tool messages whose results hold media is followed by
    one user message carrying those media (a tool message takes text only)."""
    content = ChatContent(lm)
    out = [_wire_message(m, content) for m in messages]
    return content.placed(out) if content.carried else out


def _wire_message(message: Message, writer: ChatContent) -> dict[str, object]:
    out: dict[str, object] = {"role": message["role"]}
    if "content" in message:
        content = message["content"]
        if type(content) is not list:
            out["content"] = content
        elif message["role"] == "tool":
            out["content"], carried = writer.tool_content(content, str(message.get("tool_call_id") or ""))
            if carried:
                writer.carried[id(out)] = carried
        else:
            out["content"] = writer.content(message["role"], content)
    if "tool_call_id" in message:
        out["tool_call_id"] = message["tool_call_id"]
    name = message.get("name")
    if isinstance(name, str) and name:
        out["name"] = name
    calls = message_tool_calls(message)
    if calls:
        out["tool_calls"] = [_wire_tool_call(call) for call in calls]
        if out.get("content") is None:
            out["content"] = ""  # llama-cpp-python's server refuses `content: null` beside tool calls
    elif "tool_calls" in message and message.get("role") == "assistant" and out.get("content") is None:
        out["content"] = ""
    data = message.get("reasoning_data")
    if isinstance(data, Mapping):
        for key, value in data.items():
            out.setdefault(key, value)
    return out


def _wire_tool_call(call: ToolCall) -> dict[str, object]:
    """A call in OpenAI's chat shape: its arguments as JSON text."""
    return {
        "id": call.id,
        "type": "function",
        "function": {"name": call.name, "arguments": wire_arguments(call.arguments)},
    }


def _wire_tool(tool: object) -> dict[str, object]:
    if not isinstance(tool, Mapping):
        raise TypeError(f"a tool is a JSON schema mapping, got {type(tool).__name__}")
    if isinstance(tool.get("function"), Mapping):
        return {**tool, "type": "function"}
    spec: dict[str, object] = {"name": tool["name"]}
    if tool.get("description") is not None:
        spec["description"] = tool["description"]
    spec["parameters"] = tool.get("parameters") or tool.get("input_schema") or {"type": "object", "properties": {}}
    if "strict" in tool:
        spec["strict"] = tool["strict"]
    return {"type": "function", "function": spec}


def _wire_tool_choice(choice: object) -> Any:
    mode = tool_choice_mode(choice)
    if mode == "named":
        return {"type": "function", "function": {"name": tool_choice_name(choice)}}
    return mode


def _content_text(content: object) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts (some compatible servers answer in parts)
        return "".join(
            str(p.get("text", "")) for p in content if isinstance(p, Mapping) and p.get("type") in (None, "text")
        )
    return str(content)


def _tool_call(raw: JSONObject, step: int, index: int) -> ToolCall:
    fn = mapping_of(raw.get("function"))
    return ToolCall(
        id=str(raw.get("id") or f"call_{step}_{index}"),  # Gemini's OpenAI-compatible endpoint sends no ids
        name=str(fn.get("name") or ""),
        arguments=parse_arguments(fn.get("arguments")),
    )


def _reasoning(message: JSONObject) -> tuple[str | None, dict[str, object] | None]:
    data = {k: message[k] for k in _REASONING_KEYS if message.get(k) not in (None, "", [])}
    text = message.get("reasoning_content") or message.get("reasoning")
    if not isinstance(text, str) or not text:
        details = list_of(message.get("reasoning_details"))
        parts = [d.get("text") or d.get("summary") for d in details if isinstance(d, Mapping)]
        text = "".join(p for p in parts if isinstance(p, str)) or None
    return text, (data or None)


def _usage(raw: object) -> Usage:
    if not isinstance(raw, Mapping):
        return Usage(requests=1)
    prompt = raw.get("prompt_tokens_details") or {}
    completion = raw.get("completion_tokens_details") or {}
    # `cached_tokens` (OpenAI), `prompt_cache_hit_tokens` (DeepSeek), `num_cached_tokens` (vLLM);
    # `cost` is OpenRouter's, in dollars.
    cached = prompt.get("cached_tokens") or raw.get("prompt_cache_hit_tokens") or raw.get("num_cached_tokens") or 0
    cost = raw.get("cost")
    return Usage(
        input_tokens=int(raw.get("prompt_tokens") or 0),
        output_tokens=int(raw.get("completion_tokens") or 0),
        cached_tokens=int(cached),
        reasoning_tokens=int(completion.get("reasoning_tokens") or 0),
        cost=float(cost) if isinstance(cost, int | float) and not isinstance(cost, bool) and cost >= 0 else None,
        requests=1,
    )


class _PendingCall:
    __slots__ = ("arguments", "id", "name")

    def __init__(self) -> None:
        self.id = ""
        self.name = ""
        self.arguments: list[str] = []


class _OpenAIStream(StreamState):
    """Accumulates chat completion chunks: text, reasoning, tool calls by index, usage, finish."""

    def __init__(self, lm: OpenAILM, step: int, request_id: str | None) -> None:
        self._lm = lm
        self._step = step
        self._request_id = request_id
        self._text: list[str] = []
        self._reasoning: list[str] = []
        self._details: list[Any] = []
        self._reasoning_key = "reasoning_content"
        self._calls: dict[int, _PendingCall] = {}
        self._usage: Usage | None = None
        self._finish: str | None = None
        self._model: str | None = None
        self._done = False

    def feed(self, event: SSEEvent) -> list[StreamEvent]:
        data = event.data
        if data == "[DONE]":
            self._done = True
            return []
        try:
            chunk = json.loads(data)
        except ValueError:
            if event.event == "error":
                raise self._lm.stream_error({"error": {"message": data}}, request_id=self._request_id) from None
            return []
        # Groq sends an `event: error` line, OpenRouter a chunk with an `error` object, inside a 200.
        if event.event == "error" or (isinstance(chunk, Mapping) and chunk.get("error")):
            raise self._lm.stream_error(chunk, request_id=self._request_id)
        if not isinstance(chunk, Mapping):
            return []
        self._model = chunk.get("model") or self._model
        self._request_id = self._request_id or chunk.get("id")
        usage = chunk.get("usage")  # OpenAI sends it in a last `choices: []` chunk (`stream_options`)
        if isinstance(usage, Mapping):
            self._usage = _usage(usage)
        out: list[StreamEvent] = []
        for choice in chunk.get("choices") or ():
            if not isinstance(choice, Mapping) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            key = "reasoning_content" if delta.get("reasoning_content") else "reasoning"
            reasoning = delta.get(key)
            if isinstance(reasoning, str) and reasoning:
                self._reasoning_key = key
                self._reasoning.append(reasoning)
                out.append(StreamEvent(kind="reasoning", delta=reasoning))
            elif delta.get("reasoning_details"):
                for detail in delta["reasoning_details"]:
                    text = detail.get("text") if isinstance(detail, Mapping) else None
                    if isinstance(text, str) and text:
                        self._reasoning.append(text)
                        out.append(StreamEvent(kind="reasoning", delta=text))
            if delta.get("reasoning_details"):
                self._details.extend(delta["reasoning_details"])
            content = delta.get("content")
            if isinstance(content, str) and content:
                self._text.append(content)
                out.append(StreamEvent(kind="text", delta=content))
            for raw in delta.get("tool_calls") or ():
                out.append(self._tool_delta(raw))
            if choice.get("finish_reason"):
                self._finish = choice["finish_reason"]
        return out

    def _tool_delta(self, raw: JSONObject) -> StreamEvent:
        given = raw.get("index")
        index = given if isinstance(given, int) and not isinstance(given, bool) else len(self._calls)
        call = self._calls.get(index)
        if call is None:
            call = self._calls[index] = _PendingCall()
        fn = mapping_of(raw.get("function"))
        new_name = None
        if raw.get("id") and not call.id:
            call.id = str(raw["id"])
        if fn.get("name") and not call.name:  # llama-cpp-python repeats id, type and name in every delta
            call.name = new_name = str(fn["name"])
        arguments = fn.get("arguments")
        piece = arguments if isinstance(arguments, str) else ""
        if piece:
            call.arguments.append(piece)
        return StreamEvent(kind="tool_call", delta=piece, index=index, tool_name=new_name, tool_call_id=call.id or None)

    def finish(self) -> LMResponse:
        if not self._done and self._finish is None:
            raise StreamBroken(
                "the stream ended before the completion finished",
                provider=self._lm.provider,
                code="stream_truncated",
            )
        calls = tuple(
            ToolCall(
                id=call.id or f"call_{self._step}_{position}",
                name=call.name,
                arguments=parse_arguments("".join(call.arguments)),
            )
            for position, (_, call) in enumerate(sorted(self._calls.items()))
        )
        reasoning = "".join(self._reasoning) or None
        data: dict[str, object] = {}
        if self._details:
            data["reasoning_details"] = self._details
        elif reasoning:
            data[self._reasoning_key] = reasoning
        return LMResponse(
            text="".join(self._text),
            tool_calls=calls,
            reasoning=reasoning,
            reasoning_data=data or None,
            usage=self._usage or Usage(requests=1),
            finish_reason=finish_reason(self._finish, has_calls=bool(calls)),
            model=self._model or self._lm.model,
            request_id=self._request_id,
        )
