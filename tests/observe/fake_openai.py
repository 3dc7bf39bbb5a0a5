"""A fake OpenAI-compatible server on 127.0.0.1 that answers scripted replies in order."""

from __future__ import annotations

import json
import threading
from collections import deque
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def completion(
    content: str = "", tool_calls: list[tuple[str, str, dict[str, Any]]] = (), **usage: int
) -> dict[str, Any]:
    """A chat completion body: text, tool calls `(id, name, arguments)`, and usage."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {"id": i, "type": "function", "function": {"name": n, "arguments": json.dumps(a)}} for i, n, a in tool_calls
        ]
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": "gpt-4o-2024-08-06",
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
        "usage": {
            "prompt_tokens": usage.get("prompt", 20),
            "completion_tokens": usage.get("completion", 5),
            "prompt_tokens_details": {"cached_tokens": usage.get("cached", 0)},
            "completion_tokens_details": {"reasoning_tokens": usage.get("reasoning", 0)},
        },
    }


class FakeOpenAI:
    """Serves `replies` (status, body) one per request; keeps the request bodies."""

    def __init__(self) -> None:
        self.replies: deque[tuple[int, dict[str, Any]]] = deque()
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", 0)))
                server.requests.append(json.loads(body))
                status, reply = server.replies.popleft() if server.replies else (500, {"error": {"message": "none"}})
                data = json.dumps(reply).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args: object) -> None:
                pass

        self._http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self._http.server_address[1]}/v1"
        self._thread = threading.Thread(target=self._http.serve_forever, daemon=True)

    def add(self, *replies: tuple[int, dict[str, Any]]) -> None:
        self.replies.extend(replies)

    def __enter__(self) -> FakeOpenAI:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._http.shutdown()
        self._http.server_close()
