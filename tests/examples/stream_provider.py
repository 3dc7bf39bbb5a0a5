"""A slow streaming OpenAI-compatible server on 127.0.0.1: each reply is written a piece at a time."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def sse_chunks(text: str, size: int) -> list[bytes]:
    """A chat-completions stream of `text` in `size`-character deltas, then the finish and usage."""
    out = []
    for i in range(0, len(text), size):
        delta = {"choices": [{"index": 0, "delta": {"content": text[i : i + size]}, "finish_reason": None}]}
        out.append(f"data: {json.dumps(delta)}\n\n".encode())
    end = {
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30},
    }
    out.append(f"data: {json.dumps(end)}\n\n".encode())
    out.append(b"data: [DONE]\n\n")
    return out


class StreamingProvider:
    """Streams `text` in pieces `delay` seconds apart; says when a reply was finished or abandoned."""

    def __init__(self, text: str, *, size: int = 4, delay: float = 0.02) -> None:
        self.text, self.size, self.delay = text, size, delay
        self.finished = threading.Event()
        self.aborted = threading.Event()
        self.first_piece_at: float | None = None
        self.finished_at: float | None = None
        self.bodies: list[Any] = []
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                raw = self.rfile.read(int(self.headers.get("content-length") or 0))
                provider.bodies.append(json.loads(raw))
                self.send_response(200)
                self.send_header("content-type", "text/event-stream")
                self.send_header("connection", "close")
                self.end_headers()
                try:
                    for piece in sse_chunks(provider.text, provider.size):
                        self.wfile.write(piece)
                        self.wfile.flush()
                        if provider.first_piece_at is None:
                            provider.first_piece_at = time.monotonic()
                        time.sleep(provider.delay)
                except OSError:
                    provider.aborted.set()
                else:
                    provider.finished_at = time.monotonic()
                    provider.finished.set()
                self.close_connection = True

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def start(self) -> StreamingProvider:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
