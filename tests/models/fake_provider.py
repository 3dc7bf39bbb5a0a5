"""A fake model provider: a real HTTP server on 127.0.0.1 that replays recorded exchanges and faults."""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

FIXTURES = Path(__file__).parent / "fixtures" / "providers"

Fault = Literal["reset", "truncate", "reset_mid_stream"]

_HOP_HEADERS = {"content-length", "transfer-encoding", "connection", "content-encoding", "keep-alive"}


@dataclass
class Reply:
    """One scripted answer: a status, headers and a body, sent whole or in timed chunks, or a fault."""

    status: int = 200
    json: Any = None
    body: bytes | str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    chunk_size: int | None = None
    """Send the body in pieces of this many bytes (a stream), closing the connection at the end."""
    chunk_delay: float = 0.0
    delay: float = 0.0
    """Seconds to wait before answering (a slow provider)."""
    fault: Fault | None = None

    def payload(self) -> bytes:
        if self.json is not None:
            return json.dumps(self.json).encode()
        if isinstance(self.body, str):
            return self.body.encode()
        return self.body or b""


@dataclass
class Received:
    """One request the fake provider got."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    at: float = 0.0
    """When it arrived (`time.monotonic()`, read as the request came in)."""

    @property
    def json(self) -> Any:
        return json.loads(self.raw)


def load_fixture(relative: str) -> dict[str, Any]:
    """A fixture file as a dict (`.sse` files become one streamed interaction)."""
    path = FIXTURES / relative
    if path.suffix == ".sse":
        text = path.read_text()
        return {"interactions": [{"request": {}, "response": {"status": 200, "text": text, "headers": {}}}]}
    data: dict[str, Any] = json.loads(path.read_text())
    if "interactions" not in data:  # a bare recorded response body (llama_cpp/)
        return {"interactions": [{"request": {}, "response": {"status": 200, "json": data, "headers": {}}}]}
    return data


def fixture_replies(relative: str, *, chunk_size: int = 37) -> list[Reply]:
    """The responses of a fixture as replies; streams are cut into small pieces at odd offsets."""
    replies = []
    for interaction in load_fixture(relative)["interactions"]:
        response = interaction["response"]
        headers = {}
        for key, value in (response.get("headers") or {}).items():
            if key.lower() not in _HOP_HEADERS:
                headers[key] = value if isinstance(value, str) else ", ".join(value)
        if "text" in response:
            headers.setdefault("content-type", "text/event-stream")
            replies.append(Reply(response["status"], body=response["text"], headers=headers, chunk_size=chunk_size))
        else:
            headers.setdefault("content-type", "application/json")
            replies.append(Reply(response["status"], json=response["json"], headers=headers))
    return replies


class FakeProvider:
    """Serves scripted replies in order and records every request; unscripted requests get a 599."""

    def __init__(self) -> None:
        self._replies: deque[Reply] = deque()
        self.requests: list[Received] = []
        self.aborted = threading.Event()
        """Set when a client went away while a reply was being written (a cancelled stream)."""
        self._lock = threading.Lock()
        self.responder: Callable[[Received], Reply] | None = None
        """Answers every request that finds no scripted reply (the request in, its reply out)."""
        provider = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(length)
                received = Received("POST", self.path, dict(self.headers.items()), raw, time.monotonic())
                with provider._lock:
                    provider.requests.append(received)
                    reply = provider._replies.popleft() if provider._replies else None
                if reply is None and provider.responder is not None:
                    reply = provider.responder(received)
                if reply is None:
                    reply = Reply(599, json={"error": {"message": "the fake provider has no scripted reply"}})
                provider._answer(self, reply)

        self._server = _QuietServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False
        self._thread = threading.Thread(target=self._server.serve_forever, args=(0.02,), daemon=True)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}/v1"

    def add(self, *replies: Reply) -> FakeProvider:
        """Queue replies, answered in order."""
        with self._lock:
            self._replies.extend(replies)
        return self

    def add_fixture(self, relative: str, *, chunk_size: int = 37) -> list[dict[str, Any]]:
        """Queue every response of a fixture; return its interactions (to compare requests)."""
        self.add(*fixture_replies(relative, chunk_size=chunk_size))
        return list(load_fixture(relative)["interactions"])

    @property
    def pending(self) -> int:
        """Replies not yet used."""
        return len(self._replies)

    def start(self) -> FakeProvider:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def _answer(self, handler: BaseHTTPRequestHandler, reply: Reply) -> None:
        if reply.delay:
            time.sleep(reply.delay)
        sock = handler.connection
        if reply.fault == "reset":
            _reset(sock)
            handler.close_connection = True
            return
        payload = reply.payload()
        handler.send_response(reply.status)
        for key, value in reply.headers.items():
            handler.send_header(key, value)
        try:
            if reply.fault == "truncate":
                handler.send_header("content-length", str(len(payload) + 100))
                handler.end_headers()
                handler.wfile.write(payload[: len(payload) // 2])
                handler.wfile.flush()
                _reset(sock)
            elif reply.chunk_size:
                handler.send_header("connection", "close")
                handler.end_headers()
                pieces = [payload[i : i + reply.chunk_size] for i in range(0, len(payload), reply.chunk_size)]
                for number, piece in enumerate(pieces):
                    handler.wfile.write(piece)
                    handler.wfile.flush()
                    if reply.fault == "reset_mid_stream" and number == len(pieces) // 2:
                        _reset(sock)
                        break
                    if reply.chunk_delay:
                        time.sleep(reply.chunk_delay)
            else:
                handler.send_header("content-length", str(len(payload)))
                handler.end_headers()
                handler.wfile.write(payload)
                handler.wfile.flush()
                return
        except OSError:
            self.aborted.set()  # the client went away (a cancelled stream)
        handler.close_connection = True


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # faults close sockets on purpose


def _reset(sock: socket.socket) -> None:
    """Close with RST instead of FIN, as a crashed proxy would."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
    except OSError:
        pass
