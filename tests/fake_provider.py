"""The one fake model provider of the tests: a real HTTP server on 127.0.0.1 (its own asyncio loop,
in a daemon thread) speaking whatever a test scripts: OpenAI chat completions, the Responses API,
Anthropic messages, a stream, a fault.

- Replies: `add(Reply(...), ...)` queues answers in order; a `responder(received) -> Reply` answers
  every request the queue does not (the request in, its reply out); anything else gets a 599.
- Delays: a reply may wait `delay` seconds, or until a `hold` event is set, before answering,
  watching the connection all the while: a client that goes away then is recorded as aborted.
  A stream is written a piece at a time (`chunk_size` or `pieces`, `chunk_delay` apart).
- Faults: a reply may reset the connection, truncate its body, reset or stall mid-stream, or stall
  before answering; `Faults(rate, seed)` injects a seeded share of every kind a provider shows
  (429 with Retry-After, 500, 529, a dropped connection, a stall, a malformed body, a context
  overflow, a stream that stalls after its first bytes) into the responder's answers.
- Records, read under `lock`: every request (`requests`, in arrival order, with when it arrived),
  its outcome under `Faults` (`arrivals`), what is being answered now (`in_flight`), what was
  answered whole (`answered`) or abandoned by its client (`aborted_requests`, and the `aborted`
  event), the connections held and opened, and anything the server could not read (`errors`).

Builders for the bodies real servers send are at the end: `chat_completion`, `sse_chunks`, and the
Responses API's items, bodies and semantic events.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import dataclasses
import http
import json
import random
import socket
import struct
import threading
import time
from collections import Counter, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

FIXTURES = Path(__file__).parent / "models" / "fixtures" / "providers"

Fault = Literal["reset", "truncate", "reset_mid_stream", "stall", "stall_mid_stream"]
"""What a reply can do to its connection: close it with RST before answering, send half the body it
announced then RST, RST halfway through a stream, hold the connection without answering, or hold
it after the first piece of a stream (each hold ends when the client closes, or after `stall` s)."""

FaultKind = Literal["429", "500", "529", "drop", "stall", "malformed", "overflow", "stream_stall"]
FAULT_KINDS: tuple[FaultKind, ...] = ("429", "500", "529", "drop", "stall", "malformed", "overflow", "stream_stall")
"""The faults `Faults` injects; `stream_stall` only into streamed answers."""

_HOP_HEADERS = {"content-length", "transfer-encoding", "connection", "content-encoding", "keep-alive"}


@dataclass
class Reply:
    """One scripted answer: a status, headers and a body, sent whole or a piece at a time, or a fault."""

    status: int = 200
    json: Any = None
    body: bytes | str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    chunk_size: int | None = None
    """Send the body in pieces of this many bytes (a stream), closing the connection at the end."""
    pieces: Sequence[bytes | str] | None = None
    """Send these pieces one at a time (a stream), closing the connection at the end."""
    chunk_delay: float = 0.0
    """Seconds between two pieces of a stream."""
    delay: float = 0.0
    """Seconds to wait before answering (a slow provider), watching the connection."""
    hold: threading.Event | None = None
    """Answer only once this is set (the test decides when), watching the connection meanwhile."""
    hold_after: int | None = None
    """With `hold`: write this many pieces of the stream first, then wait for `hold` (a stream that
    is under way and not finished until the test says so)."""
    fault: Fault | None = None
    stall: float = 30.0
    """How long a stall holds the connection at most."""

    def payload(self) -> bytes:
        if self.json is not None:
            return json.dumps(self.json).encode()
        if isinstance(self.body, str):
            return self.body.encode()
        return self.body or b""

    def chunks(self) -> list[bytes] | None:
        """The pieces of a streamed reply, or None for a whole one."""
        if self.pieces is not None:
            return [p.encode() if isinstance(p, str) else p for p in self.pieces]
        if self.chunk_size:
            payload = self.payload()
            return [payload[i : i + self.chunk_size] for i in range(0, len(payload), self.chunk_size)]
        return None


@dataclass(frozen=True)
class Received:
    """One request the fake provider read."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    at: float = 0.0
    """When it arrived (`time.monotonic()`, the clock `imp.deadline` uses, read as the request came in)."""
    number: int = 0
    """Its place among the requests, from 0."""

    @property
    def json(self) -> Any:
        return json.loads(self.raw)


@dataclass(frozen=True)
class Arrival:
    """A request and what `Faults` made of it (`ok`: the responder's answer as it was)."""

    received: Received
    outcome: str
    stream: bool


class Faults:
    """A seeded share of faults: in every run of `round(1 / rate)` requests exactly one is faulted, at
    a seeded place, so the share holds over a short run too; the kind is dealt from a shuffled deck
    of every kind, so each comes up once in every deck's worth of faults. `stream_stall` is dealt
    only to a streamed request. With `every_kind_first`, the first requests get one of each kind
    (those that fit them) before the share begins: a run that a loaded machine keeps short still
    sees every fault."""

    def __init__(
        self,
        *,
        rate: float = 0.25,
        seed: int = 0,
        kinds: Sequence[FaultKind] = FAULT_KINDS,
        stall: float = 8.0,
        every_kind_first: bool = False,
    ) -> None:
        self.rate = rate
        self.kinds = tuple(kinds)
        self.stall = stall
        self._random = random.Random(seed)
        self._deck: list[FaultKind] = []
        self._block = max(1, round(1 / rate)) if rate > 0 else 0
        self._left: list[bool] = []
        self._first: list[FaultKind] = list(self.kinds) if every_kind_first else []
        self._random.shuffle(self._first)

    def draw(self, stream: bool) -> str:
        """The outcome of the next request: `ok`, or a fault's kind."""
        for index, kind in enumerate(self._first):
            if stream or kind != "stream_stall":
                return self._first.pop(index)
        if not self._block:
            return "ok"
        if not self._left:
            self._left = [False] * self._block
            self._left[self._random.randrange(self._block)] = True
        if not self._left.pop():
            return "ok"
        for _ in range(2):
            for index, kind in enumerate(self._deck):
                if stream or kind != "stream_stall":
                    return self._deck.pop(index)
            fresh = list(self.kinds)
            self._random.shuffle(fresh)
            self._deck.extend(fresh)
        return "ok"  # only stream_stall is left to deal, and this request is not streamed

    def apply(self, kind: str, reply: Reply) -> Reply:
        """The reply a request gets under this fault (the responder's own reply for `ok`)."""
        as_json = {"content-type": "application/json"}
        if kind == "429":
            error = {"message": "Rate limit reached", "type": "requests", "code": "rate_limit_exceeded"}
            return Reply(429, json={"error": error}, headers={**as_json, "retry-after": "0.05"})
        if kind == "500":
            return Reply(500, json={"error": {"message": "The server had an error"}}, headers=as_json)
        if kind == "529":
            return Reply(529, json={"error": {"type": "overloaded_error", "message": "Overloaded"}}, headers=as_json)
        if kind == "overflow":
            error = {
                "message": "This model's maximum context length is 8192 tokens. However, your messages resulted "
                "in 9000 tokens. Please reduce the length of the messages.",
                "type": "invalid_request_error",
                "code": "context_length_exceeded",
            }
            return Reply(400, json={"error": error}, headers=as_json)
        if kind == "malformed":
            return Reply(200, body=b'{"id": "chatcmpl-cut", "choices": [{"message": {"role": "assist', headers=as_json)
        if kind == "drop":
            return Reply(fault="reset")
        if kind == "stall":
            return Reply(fault="stall", stall=self.stall)
        if kind == "stream_stall":
            return dataclasses.replace(reply, fault="stall_mid_stream", stall=self.stall)
        return reply


class FakeProvider:
    """The server: `start()` it (or use it as a context manager), point a client at `base_url`."""

    def __init__(self, *, responder: Callable[[Received], Reply] | None = None, faults: Faults | None = None) -> None:
        self._replies: deque[Reply] = deque()
        self.responder = responder
        """Answers every request that finds no scripted reply (the request in, its reply out)."""
        self.faults = faults
        self.lock = threading.Lock()
        self.requests: list[Received] = []
        self.arrivals: list[Arrival] = []
        self.in_flight: list[Received] = []
        self.answered: list[Received] = []
        self.aborted_requests: list[Received] = []
        self.aborted = threading.Event()
        """Set when a client went away while its reply was being waited for or written."""
        self.finished = threading.Event()
        """Set when a reply was written whole."""
        self.peak_in_flight = 0
        """The most requests it was answering at once."""
        self.connections_open = 0
        self.connections_total = 0
        self.errors: list[str] = []
        """Requests the server could not read (a bug in the test or the client)."""
        self._loop = asyncio.new_event_loop()
        self._pool = concurrent.futures.ThreadPoolExecutor(64, thread_name_prefix="fake-provider-responder")
        self._thread = threading.Thread(target=self._loop.run_forever, name="fake-provider", daemon=True)
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    # --- the server's life ----------------------------------------------------------------------

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeProvider:
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
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- what the test scripts ------------------------------------------------------------------

    def add(self, *replies: Reply) -> FakeProvider:
        """Queue replies, answered in order."""
        with self.lock:
            self._replies.extend(replies)
        return self

    def add_fixture(self, relative: str, *, chunk_size: int = 37) -> list[dict[str, Any]]:
        """Queue every response of a fixture; return its interactions (to compare requests)."""
        self.add(*fixture_replies(relative, chunk_size=chunk_size))
        return list(load_fixture(relative)["interactions"])

    @property
    def pending(self) -> int:
        """Replies not yet used."""
        with self.lock:
            return len(self._replies)

    def outcomes(self) -> Counter[str]:
        """How many requests each outcome under `faults` had."""
        with self.lock:
            return Counter(a.outcome for a in self.arrivals)

    # --- one connection -------------------------------------------------------------------------

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        with self.lock:
            self.connections_open += 1
            self.connections_total += 1
        try:
            while await self._one_request(reader, writer):
                pass
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass  # the client went away, or the server is stopping
        except Exception as exc:
            with self.lock:
                self.errors.append(f"{type(exc).__name__}: {exc}")
        finally:
            with self.lock:
                self.connections_open -= 1
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()
            self._tasks.discard(task)

    async def _read(self, reader: asyncio.StreamReader) -> Received | None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return None
        at = time.monotonic()
        lines = head.decode("latin-1").split("\r\n")
        method, path, _ = [*lines[0].split(" ", 2), "", ""][:3]
        headers = {k.strip(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        lower = {k.lower(): v for k, v in headers.items()}
        if lower.get("transfer-encoding", "").lower() == "chunked":
            raw = b""
            while (size := int((await reader.readuntil(b"\r\n")).strip() or b"0", 16)) > 0:
                raw += await reader.readexactly(size)
                await reader.readexactly(2)
            await reader.readuntil(b"\r\n")
        else:
            raw = await reader.readexactly(int(lower.get("content-length") or 0))
        with self.lock:
            received = Received(method, path, headers, raw, at, len(self.requests))
            self.requests.append(received)
        return received

    async def _reply_for(self, received: Received) -> Reply:
        with self.lock:
            reply = self._replies.popleft() if self._replies else None
        if reply is None and self.responder is not None:
            # in a thread: a responder may block (time.sleep) as a slow model does, and the server
            # must go on answering the other requests meanwhile
            reply = await self._loop.run_in_executor(self._pool, self.responder, received)
        if reply is None:
            return Reply(599, json={"error": {"message": "the fake provider has no scripted reply"}})
        if self.faults is not None:
            try:
                stream = bool(received.json.get("stream"))
            except (ValueError, AttributeError):
                stream = False
            with self.lock:
                outcome = self.faults.draw(stream)
                self.arrivals.append(Arrival(received, outcome, stream))
            reply = self.faults.apply(outcome, reply)
        return reply

    async def _one_request(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bool:
        """Answer one request; False when the connection is to be closed."""
        received = await self._read(reader)
        if received is None:
            return False
        reply = await self._reply_for(received)
        with self.lock:
            self.in_flight.append(received)
            self.peak_in_flight = max(self.peak_in_flight, len(self.in_flight))
        try:
            outcome = await self._answer(reply, reader, writer)
        finally:
            with self.lock:
                self.in_flight.remove(received)
        with self.lock:
            if outcome == "answered":
                self.answered.append(received)
            elif outcome == "aborted":
                self.aborted_requests.append(received)
        if outcome == "answered":
            self.finished.set()
        elif outcome == "aborted":
            self.aborted.set()
        return outcome == "answered" and reply.chunks() is None and reply.fault is None

    async def _answer(self, reply: Reply, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> str:
        """Write the reply: `answered`, `aborted` (the client went away first) or `faulted`."""
        if reply.delay > 0 and await _closed_within(reader, reply.delay):
            return "aborted"
        if (
            reply.hold is not None
            and reply.hold_after is None
            and await _closed_before(reader, reply.hold, reply.stall)
        ):
            return "aborted"
        if reply.fault == "reset":
            _reset(writer)
            return "faulted"
        if reply.fault == "stall":
            return "aborted" if await _closed_within(reader, reply.stall) else "faulted"
        reason = http.HTTPStatus(reply.status).phrase if reply.status in http.HTTPStatus._value2member_map_ else "X"
        head = f"HTTP/1.1 {reply.status} {reason}\r\n" + "".join(f"{k}: {v}\r\n" for k, v in reply.headers.items())
        chunks = reply.chunks()
        try:
            if reply.fault == "truncate":
                payload = reply.payload()
                writer.write(
                    f"{head}content-length: {len(payload) + 100}\r\n\r\n".encode() + payload[: len(payload) // 2]
                )
                await writer.drain()
                _reset(writer)
                return "faulted"
            if chunks is None:
                payload = reply.payload()
                writer.write(f"{head}content-length: {len(payload)}\r\n\r\n".encode() + payload)
                await writer.drain()
                return "answered"
            writer.write(f"{head}connection: close\r\n\r\n".encode())
            for number, piece in enumerate(chunks):
                held = number == reply.hold_after and reply.hold is not None
                if held and reply.hold is not None and await _closed_before(reader, reply.hold, reply.stall):
                    return "aborted"
                writer.write(piece)
                await writer.drain()
                if reply.fault == "reset_mid_stream" and number == len(chunks) // 2:
                    _reset(writer)
                    return "faulted"
                if reply.fault == "stall_mid_stream":
                    return "aborted" if await _closed_within(reader, reply.stall) else "faulted"
                last = number == len(chunks) - 1
                if reply.chunk_delay and not last and await _closed_within(reader, reply.chunk_delay):
                    return "aborted"
            return "answered"
        except (ConnectionError, OSError):
            return "aborted"


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    """Wait `seconds`, watching the connection; True as soon as the client closes it."""
    try:
        async with asyncio.timeout(seconds):
            return await reader.read(1) == b""  # a client sends nothing more on a connection until answered
    except TimeoutError:
        return False
    except ConnectionError:
        return True


async def _closed_before(reader: asyncio.StreamReader, event: threading.Event, most: float) -> bool:
    """Wait until `event` is set (at most `most` s), watching the connection; True if the client closed it first."""
    end = time.monotonic() + most
    while not event.is_set() and time.monotonic() < end:
        if await _closed_within(reader, 0.01):
            return True
    return False


def _reset(writer: asyncio.StreamWriter) -> None:
    """Close with RST instead of FIN, as a crashed proxy would."""
    sock = writer.get_extra_info("socket")
    with contextlib.suppress(OSError):
        if sock is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


# --- recorded fixtures ----------------------------------------------------------------------------


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


# --- OpenAI chat completions ----------------------------------------------------------------------


def chat_completion(
    content: str | None = "",
    tool_calls: Sequence[tuple[str, str, Any]] = (),
    *,
    model: str = "gpt-4o-2024-08-06",
    completion_id: str = "chatcmpl-1",
    **usage: int,
) -> dict[str, Any]:
    """A chat completion body: text, tool calls `(id, name, arguments)`, and usage (`prompt`,
    `completion`, `cached`, `reasoning` tokens)."""
    message: dict[str, Any] = {"role": "assistant", "content": content}
    if tool_calls:
        message["tool_calls"] = [
            {
                "id": i,
                "type": "function",
                "function": {"name": n, "arguments": a if isinstance(a, str) else json.dumps(a)},
            }
            for i, n, a in tool_calls
        ]
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": 0,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_calls else "stop"}],
        "usage": {
            "prompt_tokens": usage.get("prompt", 20),
            "completion_tokens": usage.get("completion", 5),
            "total_tokens": usage.get("prompt", 20) + usage.get("completion", 5),
            "prompt_tokens_details": {"cached_tokens": usage.get("cached", 0)},
            "completion_tokens_details": {"reasoning_tokens": usage.get("reasoning", 0)},
        },
    }


def sse_chunks(text: str, size: int, *, completion_id: str = "chatcmpl-1") -> list[bytes]:
    """A chat-completions stream of `text` in `size`-character deltas, then the finish, usage and [DONE]."""
    out = []
    for i in range(0, len(text), size):
        delta = {
            "id": completion_id,
            "object": "chat.completion.chunk",
            "choices": [{"index": 0, "delta": {"content": text[i : i + size]}, "finish_reason": None}],
        }
        out.append(f"data: {json.dumps(delta)}\n\n".encode())
    end = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30},
    }
    out.append(f"data: {json.dumps(end)}\n\n".encode())
    out.append(b"data: [DONE]\n\n")
    return out


def stream_reply(
    text: str,
    *,
    size: int = 4,
    delay: float = 0.0,
    hold: threading.Event | None = None,
    hold_after: int | None = None,
    completion_id: str = "chatcmpl-1",
) -> Reply:
    """A streamed chat completion of `text`, `size` characters a piece, `delay` seconds apart (with
    `hold` and `hold_after`: the rest waits for the event after that many pieces)."""
    return Reply(
        headers={"content-type": "text/event-stream"},
        pieces=sse_chunks(text, size, completion_id=completion_id),
        chunk_delay=delay,
        hold=hold,
        hold_after=hold_after,
    )


# --- OpenAI's Responses API (`POST /v1/responses`) ------------------------------------------------
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
