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


# -- OpenAI's Responses API (`POST /v1/responses`) ---------------------------------------------------
# Builders for the replies a Responses API server sends: a whole `response` object, or the same
# response as the semantic SSE events a real server streams (created, item added, deltas, item
# done, completed), so programs run end to end on the fake provider under `openai-responses:`.


def message_item(text: str, *, item_id: str = "msg_1") -> dict[str, Any]:
    """An assistant `message` output item with one `output_text` part."""
    part = {"type": "output_text", "text": text, "annotations": []}
    return {"type": "message", "id": item_id, "status": "completed", "role": "assistant", "content": [part]}


def function_call_item(name: str, arguments: Any, *, call_id: str, item_id: str | None = None) -> dict[str, Any]:
    """A `function_call` output item (`arguments` is sent as its JSON string)."""
    args = arguments if isinstance(arguments, str) else json.dumps(arguments)
    return {
        "type": "function_call",
        "id": item_id or f"fc_{call_id}",
        "call_id": call_id,
        "name": name,
        "arguments": args,
        "status": "completed",
    }


def reasoning_item(summary: str, *, item_id: str, encrypted: str | None = None) -> dict[str, Any]:
    """A `reasoning` output item: its summary and (with `include`) its encrypted content."""
    item: dict[str, Any] = {"type": "reasoning", "id": item_id, "summary": []}
    if summary:
        item["summary"] = [{"type": "summary_text", "text": summary}]
    if encrypted is not None:
        item["encrypted_content"] = encrypted
    return item


def responses_body(
    *items: dict[str, Any],
    usage: dict[str, Any] | None = None,
    status: str = "completed",
    incomplete: str | None = None,
    model: str = "gpt-5.4-mini-2026-03-17",
    response_id: str = "resp_1",
) -> dict[str, Any]:
    """A finished `response` object holding `items` (usage defaults to small counts)."""
    return {
        "id": response_id,
        "object": "response",
        "created_at": 1767225600,
        "status": status,
        "error": None,
        "incomplete_details": {"reason": incomplete} if incomplete else None,
        "model": model,
        "output": list(items),
        "usage": usage
        or {
            "input_tokens": 20,
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": 5,
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": 25,
        },
        "store": False,
    }


def responses_events(body: dict[str, Any], *, piece: int = 4) -> list[dict[str, Any]]:
    """The semantic events a server streams for `body`, deltas cut into `piece`-character parts."""
    shell = {**body, "status": "in_progress", "output": [], "usage": None}
    events: list[dict[str, Any]] = [
        {"type": "response.created", "response": shell},
        {"type": "response.in_progress", "response": shell},
    ]

    def cut(text: str) -> list[str]:
        return [text[i : i + piece] for i in range(0, len(text), piece)]

    for index, item in enumerate(body["output"]):
        base = {"output_index": index, "item_id": item.get("id")}
        kind = item["type"]
        if kind == "function_call":
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": {**item, "arguments": ""}}
            )
            events += [
                {"type": "response.function_call_arguments.delta", **base, "delta": d} for d in cut(item["arguments"])
            ]
            events.append({"type": "response.function_call_arguments.done", **base, "arguments": item["arguments"]})
        elif kind == "reasoning":
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": {**item, "summary": []}}
            )
            for number, part in enumerate(item.get("summary") or ()):
                events.append({"type": "response.reasoning_summary_part.added", **base, "summary_index": number})
                events += [
                    {"type": "response.reasoning_summary_text.delta", **base, "summary_index": number, "delta": d}
                    for d in cut(part["text"])
                ]
                events.append({"type": "response.reasoning_summary_text.done", **base, "text": part["text"]})
                events.append({"type": "response.reasoning_summary_part.done", **base, "part": part})
        else:
            events.append(
                {"type": "response.output_item.added", "output_index": index, "item": {**item, "content": []}}
            )
            for number, part in enumerate(item.get("content") or ()):
                empty = {**part, "text": ""} if part["type"] == "output_text" else {**part, "refusal": ""}
                events.append({"type": "response.content_part.added", **base, "content_index": number, "part": empty})
                if part["type"] == "output_text":
                    events += [
                        {"type": "response.output_text.delta", **base, "content_index": number, "delta": d}
                        for d in cut(part["text"])
                    ]
                    events.append({"type": "response.output_text.done", **base, "text": part["text"]})
                elif part["type"] == "refusal":
                    events.append({"type": "response.refusal.delta", **base, "delta": part["refusal"]})
                events.append({"type": "response.content_part.done", **base, "content_index": number, "part": part})
        events.append({"type": "response.output_item.done", "output_index": index, "item": item})
    terminal = "response.incomplete" if body["status"] == "incomplete" else "response.completed"
    events.append({"type": terminal, "response": body})
    for number, event in enumerate(events):
        event["sequence_number"] = number
    return events


def sse_text(events: list[dict[str, Any]]) -> str:
    """Events as an SSE body (`event:` named after each event's type, as OpenAI sends them)."""
    return "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)


def responses_reply(body: dict[str, Any], *, stream: bool = False, chunk_size: int = 29) -> Reply:
    """A reply holding `body` whole, or streamed as its semantic events in small chunks."""
    headers = {"x-request-id": f"req_{body['id']}"}
    if not stream:
        return Reply(json=body, headers={**headers, "content-type": "application/json"})
    headers["content-type"] = "text/event-stream"
    return Reply(body=sse_text(responses_events(body)), headers=headers, chunk_size=chunk_size)
