"""A deterministic OpenAI-compatible provider on 127.0.0.1 for the crash tests: it answers each request
from the request's own content (so a resumed run gets the answers an uncrashed one got) and counts
the requests it received (`GET /count`)."""

from __future__ import annotations

import hashlib
import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

ROUNDS = 3
"""Steps of tool calls a `react` model makes before it answers."""
CALLS = 3
"""Tool calls in each of those steps (they run concurrently)."""
APPROVAL_ROUNDS = 2
"""Steps of the `approve` model, each pausing on a refund that needs approval."""


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def answer(body: dict[str, Any]) -> dict[str, Any]:
    """The reply to one chat-completions request, a function of the request alone."""
    model = str(body.get("model", ""))
    message: dict[str, Any]
    messages = body.get("messages", [])
    first_user = next((str(m.get("content")) for m in messages if m.get("role") == "user"), "")
    if model == "approve":  # two steps of two lookups and a refund that waits for approval, then the answer
        rounds = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        if rounds < APPROVAL_ROUNDS:
            seed = digest(first_user)
            calls = [
                {
                    "id": f"call_{rounds}_{i}",
                    "type": "function",
                    "function": {
                        "name": "refund" if i == 2 else "lookup",
                        "arguments": json.dumps(
                            {"order": f"{seed}-{rounds}", "amount": 40 + rounds}
                            if i == 2
                            else {"order": f"{seed}-{rounds}-{i}"}
                        ),
                    },
                }
                for i in range(3)
            ]
            message = {"role": "assistant", "content": None, "tool_calls": calls}
            reason = "tool_calls"
        else:
            results = [str(m.get("content")) for m in messages if m.get("role") == "tool"]
            message = {"role": "assistant", "content": "done " + digest("|".join(results))}
            reason = "stop"
    elif model == "react":
        rounds = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        if rounds < ROUNDS:
            seed = digest(first_user)
            calls = [
                {
                    "id": f"call_{rounds}_{i}",
                    "type": "function",
                    "function": {"name": "lookup", "arguments": json.dumps({"order": f"{seed}-{rounds}-{i}"})},
                }
                for i in range(CALLS)
            ]
            message = {"role": "assistant", "content": None, "tool_calls": calls}
            reason = "tool_calls"
        else:
            results = [str(m.get("content")) for m in messages if m.get("role") == "tool"]
            message = {"role": "assistant", "content": "done " + digest("|".join(results))}
            reason = "stop"
    else:  # "predict-<field>": one field in the Chat adapter's layout
        field = model.removeprefix("predict-") if model.startswith("predict-") else "answer"
        last_user = next((str(m.get("content")) for m in reversed(messages) if m.get("role") == "user"), "")
        message = {
            "role": "assistant",
            "content": f"[[ ## {field} ## ]]\n{field}-{digest(last_user)}\n\n[[ ## completed ## ]]",
        }
        reason = "stop"
    return {
        "id": "chatcmpl-crash",
        "object": "chat.completion",
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": reason}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
    }


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a killed client leaves a half-read request: expected here


class CrashProvider:
    """The server: `start()`, `base_url`, `count` (requests answered or being answered), `stop()`."""

    def __init__(self, delay: float = 0.004) -> None:
        self.count = 0
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_GET(self) -> None:
                self._send({"count": outer.count})

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length", 0)))
                body = json.loads(raw)
                if body.get("model") != "warmup":  # a child's warm-up request is not counted
                    with outer._lock:
                        outer.count += 1
                # A short wait, different per request, so a kill lands while requests are in flight.
                time.sleep(delay * (1 + int(digest(raw.decode())[:2], 16) % 4))
                self._send(answer(body))

            def _send(self, payload: dict[str, Any]) -> None:
                data = json.dumps(payload).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def start(self) -> CrashProvider:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
