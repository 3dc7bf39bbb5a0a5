"""A stand-in for llama-cpp-python's server under `--chat_format chatml-function-calling`, as it answers.

With tools and `tool_choice: "auto"`, the chat handler first asks the model (unstreamed) whether to
call a tool. When the model chooses a tool and the request is streamed, the handler raises
"Automatic streaming tool choice is not supported"; the server has already sent its 200 and the
SSE headers, so the client sees a stream that ends with no event at all. A named `tool_choice`
streams; a request read whole answers with the tool call. `tool_choice: "required"` gets an empty 500.

`choose` decides, from a request's messages, which tool the "model" calls (None: it answers text).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fake_provider import Received, Reply

SSE = {"content-type": "text/event-stream"}

Choose = Callable[[list[dict[str, Any]]], tuple[str, dict[str, Any]] | None]


def _completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    usage = {"prompt_tokens": 30, "completion_tokens": 9, "total_tokens": 39}
    return {
        "id": "chatcmpl-1",
        "model": "smollm2",
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": usage,
    }


def _chunks(deltas: list[dict[str, Any]], finish: str) -> str:
    events = [{"id": "chatcmpl-1", "model": "smollm2", "choices": [{"index": 0, "delta": {"role": "assistant"}}]}]
    events += [{"id": "chatcmpl-1", "model": "smollm2", "choices": [{"index": 0, "delta": d}]} for d in deltas]
    events.append(
        {"id": "chatcmpl-1", "model": "smollm2", "choices": [{"index": 0, "delta": {}, "finish_reason": finish}]}
    )
    return "".join(f"data: {json.dumps(e)}\n\n" for e in events) + "data: [DONE]\n\n"


class ChatmlFunctionCalling:
    """Answers every request as llama-cpp-python does; `sent` keeps every request body, in order."""

    def __init__(self, choose: Choose, *, answer: str = "[[ ## answer ## ]]\n5") -> None:
        self.choose = choose
        self.answer = answer
        self.sent: list[dict[str, Any]] = []

    def identical_requests(self) -> list[dict[str, Any]]:
        """Bodies sent more than once."""
        seen: list[str] = []
        repeated = []
        for body in self.sent:
            text = json.dumps(body, sort_keys=True)
            if text in seen:
                repeated.append(body)
            seen.append(text)
        return repeated

    def __call__(self, request: Received) -> Reply:
        body = request.json
        self.sent.append(body)
        stream = bool(body.get("stream"))
        choice = body.get("tool_choice")
        tools = body.get("tools") or []
        if tools and choice == "required":
            return Reply(500, json={"error": {"message": "", "type": "internal_server_error"}})
        chosen: tuple[str, dict[str, Any]] | None = None
        if tools and isinstance(choice, dict):
            name = choice["function"]["name"]
            chosen = (name, {"answer": 5} if name == "submit" else {})
        elif tools and choice in (None, "auto"):
            chosen = self.choose(body["messages"])
            if chosen is not None and stream:
                return Reply(200, body=b"", headers=SSE, chunk_size=64)  # the handler raised after the 200
        if chosen is not None:
            name, arguments = chosen
            call = {
                "id": f"call_{len(self.sent)}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(arguments)},
            }
            if stream:
                delta = {"tool_calls": [{"index": 0, **call}]}
                return Reply(200, body=_chunks([delta], "tool_calls"), headers=SSE, chunk_size=64)
            return Reply(
                200, json=_completion({"role": "assistant", "content": None, "tool_calls": [call]}, "tool_calls")
            )
        if stream:
            pieces = [{"content": self.answer[i : i + 4]} for i in range(0, len(self.answer), 4)]
            return Reply(200, body=_chunks(pieces, "stop"), headers=SSE, chunk_size=64)
        return Reply(200, json=_completion({"role": "assistant", "content": self.answer}, "stop"))


def add_first(messages: list[dict[str, Any]]) -> tuple[str, dict[str, Any]] | None:
    """The "model" of a `react` over an `add` tool: it calls `add`, then `submit`s 5 when the turn
    offers `submit` (a typed answer), else answers in text."""
    results = [m for m in messages if m.get("role") == "tool"]
    if not results:
        return ("add", {"a": 2, "b": 3})
    system = str(messages[0].get("content") or "")
    return ("submit", {"answer": 5}) if "submit" in system and len(results) == 1 else None
