"""`FaultyOpenAI`: an OpenAI-compatible `/v1/chat/completions` on 127.0.0.1 that answers each request
from what it asks (text for predict, an SSE stream when `stream` is set, a tool call then `submit`
for react) and injects a seeded share of faults of every kind the LM layer must survive.

Faults: 429 with Retry-After, 500, 529, a connection dropped with RST before any answer, a stall
(no answer until the client gives up), a malformed 200 body, a context-window overflow (400). A
streamed answer may also stall right after its first bytes. It records when each request arrived
(`time.monotonic()`, the clock `imp.deadline` uses) with the call it belongs to (the `call-<n>` tag
in the user message), the connections it holds, and every Authorization header it was sent.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import socket
import struct
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Literal

FaultKind = Literal["429", "500", "529", "drop", "stall", "malformed", "overflow", "stream_stall"]
FAULTS: tuple[FaultKind, ...] = ("429", "500", "529", "drop", "stall", "malformed", "overflow")
"""The faults any request may get; a streamed request may also get `stream_stall`."""
_CALL = re.compile(r"call-(\d+)")


@dataclass(frozen=True)
class Arrival:
    """One request the provider read: its call's number, when it arrived, and what it got."""

    call: int
    at: float
    outcome: str
    stream: bool


@dataclass
class Stats:
    """What the provider saw (read under `FaultyOpenAI.lock`)."""

    arrivals: list[Arrival] = field(default_factory=list)
    connections_open: int = 0
    connections_total: int = 0
    authorizations: set[str] = field(default_factory=set)
    errors: list[str] = field(default_factory=list)
    """Requests the provider could not read (a bug in the test or the client)."""

    def outcomes(self) -> Counter[str]:
        return Counter(a.outcome for a in self.arrivals)


class FaultyOpenAI:
    """The provider, on its own asyncio loop in a daemon thread; `start()` it, `stop()` it."""

    def __init__(self, *, fault_rate: float = 0.25, seed: int = 0, stall: float = 8.0) -> None:
        self.fault_rate = fault_rate
        self.stall = stall
        self.lock = threading.Lock()
        self.stats = Stats()
        self._random = random.Random(seed)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="faulty-openai", daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FaultyOpenAI:
        self._thread.start()

        async def start() -> None:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=2048)
            self.port = self._server.sockets[0].getsockname()[1]

        asyncio.run_coroutine_threadsafe(start(), self._loop).result(10)
        return self

    def stop(self) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    def connections_open(self) -> int:
        with self.lock:
            return self.stats.connections_open

    def _draw(self, stream: bool) -> str:
        with self.lock:
            if self._random.random() >= self.fault_rate:
                return "ok"
            # a streamed request stalls after its first bytes in 3 of 10 of its faults
            kinds: tuple[str, ...] = (*FAULTS, *["stream_stall"] * 3) if stream else FAULTS
            return self._random.choice(kinds)

    # --- one connection -------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        with self.lock:
            self.stats.connections_open += 1
            self.stats.connections_total += 1
        try:
            while await self._one_request(reader, writer):
                pass
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client went away, or the server is stopping
        except Exception as exc:
            with self.lock:
                self.stats.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            with self.lock:
                self.stats.connections_open -= 1
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            self._tasks.discard(task)

    async def _one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection is to be closed."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        at = time.monotonic()
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        body = json.loads(await reader.readexactly(int(headers.get("content-length", "0"))))
        stream = bool(body.get("stream"))
        outcome = self._draw(stream)
        with self.lock:
            self.stats.arrivals.append(Arrival(_call_of(body), at, outcome, stream))
            self.stats.authorizations.add(headers.get("authorization", ""))
        if outcome == "drop":
            _reset(writer)
            return False
        if outcome == "stall":
            await _closed_within(reader, self.stall)
            return False
        if outcome in ("429", "500", "529", "overflow", "malformed"):
            await _send(writer, *_fault_reply(outcome))
            return True
        if stream:
            await _stream(writer, body, stall=self.stall if outcome == "stream_stall" else 0.0, reader=reader)
            return False
        await _send(writer, 200, {"content-type": "application/json"}, json.dumps(_completion(body)).encode())
        return True


def _call_of(body: dict[str, Any]) -> int:
    for message in body.get("messages", []):
        if message.get("role") == "user":
            found = _CALL.search(str(message.get("content") or ""))
            if found:
                return int(found.group(1))
    return -1


def _fault_reply(kind: str) -> tuple[int, dict[str, str], bytes]:
    as_json = {"content-type": "application/json"}
    if kind == "429":
        error = {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}
        return 429, {**as_json, "retry-after": "0.05"}, json.dumps({"error": error}).encode()
    if kind == "500":
        return 500, as_json, json.dumps({"error": {"message": "The server had an error"}}).encode()
    if kind == "529":
        return 529, as_json, json.dumps({"error": {"type": "overloaded_error", "message": "Overloaded"}}).encode()
    if kind == "overflow":
        error = {
            "message": "This model's maximum context length is 8192 tokens. However, your messages resulted "
            "in 9000 tokens. Please reduce the length of the messages.",
            "type": "invalid_request_error",
            "code": "context_length_exceeded",
        }
        return 400, as_json, json.dumps({"error": error}).encode()
    return 200, as_json, b'{"id": "chatcmpl-cut", "choices": [{"message": {"role": "assist'  # malformed


def _completion(body: dict[str, Any]) -> dict[str, Any]:
    """Predict: the Chat adapter's answer. React: look the team up, then `submit` what it returned."""
    call = _call_of(body)
    message: dict[str, Any] = {"role": "assistant", "content": None}
    finish = "stop"
    if body.get("tools"):
        results = [m for m in body["messages"] if m.get("role") == "tool"]
        names = {t["function"]["name"] for t in body["tools"]}
        if not results and "lookup" in names:
            fn = {"name": "lookup", "arguments": json.dumps({"team": f"team-{call}"})}
        else:
            answer = str(results[-1].get("content")) if results else f"no lookup for call-{call}"
            fn = {"name": "submit", "arguments": json.dumps({"answer": answer})}
        message["tool_calls"] = [{"id": f"call_{call}_{len(results)}", "type": "function", "function": fn}]
        finish = "tool_calls"
    else:
        message["content"] = f"[[ ## answer ## ]]\nanswer to call-{call}\n\n[[ ## completed ## ]]"
    return {
        "id": f"chatcmpl-{call}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "fake"),
        "choices": [{"index": 0, "message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    }


async def _send(writer: asyncio.StreamWriter, status: int, headers: dict[str, str], payload: bytes) -> None:
    head = f"HTTP/1.1 {status} X\r\n" + "".join(f"{k}: {v}\r\n" for k, v in headers.items())
    writer.write(f"{head}content-length: {len(payload)}\r\n\r\n".encode() + payload)
    await writer.drain()


async def _stream(writer: asyncio.StreamWriter, body: dict[str, Any], *, stall: float, reader: Any) -> None:
    """An SSE answer in three pieces, closing the connection at the end; a stall waits after the first."""
    call = _call_of(body)
    writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n")
    pieces = ["answer to ", f"call-{call}", ""]
    for number, text in enumerate(pieces):
        delta: dict[str, Any] = {"content": text} if text else {}
        chunk = {
            "id": f"chatcmpl-{call}",
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": delta, "finish_reason": None if text else "stop"}],
        }
        writer.write(f"data: {json.dumps(chunk)}\n\n".encode())
        await writer.drain()
        if number == 0 and stall:
            await _closed_within(reader, stall)
            return
    writer.write(b"data: [DONE]\n\n")
    await writer.drain()


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    """Wait `seconds`, watching the connection; True as soon as the client closes it."""
    try:
        async with asyncio.timeout(seconds):
            return await reader.read(1) == b""
    except TimeoutError:
        return False


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST instead of FIN, as a crashed proxy would."""
    sock = writer.get_extra_info("socket")
    with contextlib.suppress(OSError):
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()
