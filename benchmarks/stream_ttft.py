"""Time to the first output token: `imp.stream` against the raw `lm.stream`, on a loopback provider.

A fake OpenAI-compatible server on 127.0.0.1 streams each reply as server-sent events: the first
event holds `[[ ## answer ## ]]` and the answer's first word, the rest follow 30 ms later. For
each round, the raw side is the time from calling `lm.stream(messages)` to its first text delta
holding that word; the imp side is the time from `imp.stream(predict, ...)` to its first `field`
part, which includes formatting the request, the run's events and reading the marker. The table
gives the median and p90 of each over the rounds, and the verdict against the target: the
median difference within 2 ms.

Then the cost per chunk as a reply grows: replies of 10 KB and 1 MB (one long string output, and
a list of models) streamed in 16-character chunks from an in-process LM, under the Chat, JSON
and XML adapters, through the raw `lm.stream` (the floor), `imp.stream`, and `imp.stream(...,
partial=True)` (partial values made but not read; then the cost of reading one, as the outputs
stood halfway through the reply: that one grows with the reply, as any snapshot's copy does). The
verdict: imp's cost per chunk at 1 MB within 1.5x of its cost at 10 KB (no re-reading of the
reply per chunk).

    .venv/bin/python benchmarks/stream_ttft.py             # 200 rounds, asyncio and trio
    .venv/bin/python benchmarks/stream_ttft.py --rounds 50
"""

from __future__ import annotations

import argparse
import json
import platform
import socket
import statistics
import sys
import threading
import time
from collections.abc import AsyncIterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))
sys.path.append(str(_HERE))  # benchmarks/_same_work.py, after imp and the standard library

import anyio  # noqa: E402 - after the sys.path fix above
import pydantic  # noqa: E402
from _same_work import Calls, Side, same_work  # noqa: E402

import imp  # noqa: E402
from imp.models.base import LM, LMResponse, StreamEvent  # noqa: E402

SERVED = Calls()
"""Streamed requests the server read."""

TARGET = 0.002
PAUSE = 0.03


def _event(content: str | None, finish: str | None = None) -> bytes:
    delta = {"content": content} if content is not None else {}
    body: dict[str, Any] = {"choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    if finish:
        body["usage"] = {"prompt_tokens": 20, "completion_tokens": 8, "total_tokens": 28}
    return f"data: {json.dumps(body)}\n\n".encode()


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length") or 0))
        SERVED.add()  # counted as it arrives: before the client can have read the reply
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no Nagle wait on small writes
        self.send_response(200)
        self.send_header("content-type", "text/event-stream")
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        pieces = [_event("[[ ## answer ## ]]\nHello"), None, _event(" there, friend."), _event(None, "stop")]
        pieces.append(b"data: [DONE]\n\n")
        for piece in pieces:
            if piece is None:
                time.sleep(PAUSE)
                continue
            self.wfile.write(f"{len(piece):x}\r\n".encode() + piece + b"\r\n")
            self.wfile.flush()
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()


async def measure(base_url: str, rounds: int) -> tuple[list[float], list[float], list[Side]]:
    """The time to the first answer token of each round, raw `lm.stream` and `imp.stream`, and what
    each side did: the streamed requests it made and the first token it saw."""
    lm = imp.lm("openai:fake", base_url=base_url, api_key="sk-bench")
    program = imp.predict("question -> answer", lm=lm)
    messages = list(program.render(question="hi").messages)
    raw: list[float] = []
    through: list[float] = []
    made = {"raw": 0, "imp": 0}
    try:
        for _ in range(3):  # warm the connection pool and the code paths
            async for _part in imp.stream(program, question="hi"):
                pass
        for _ in range(rounds):
            started = time.perf_counter()
            SERVED.take()
            async for event in lm.stream(messages):
                if event.kind == "text" and "Hello" in event.delta:
                    raw.append(time.perf_counter() - started)
            made["raw"] += SERVED.take()
            started = time.perf_counter()
            first: float | None = None
            async for part in imp.stream(program, question="hi"):
                if part.kind == "field" and first is None:
                    first = time.perf_counter() - started
                    assert part.delta == "Hello", part
            assert first is not None
            through.append(first)
            made["imp"] += SERVED.take()
    finally:
        await lm.aclose()
    sides = [
        Side("lm.stream", {"streamed requests": made["raw"], "rounds with the first token 'Hello'": len(raw)}),
        Side("imp.stream", {"streamed requests": made["imp"], "rounds with the first token 'Hello'": len(through)}),
    ]
    return raw, through, sides


class Item(pydantic.BaseModel):
    name: str
    count: int


CHUNK = 16
FLAT = 1.5


class InProcessLM(LM):
    """Streams one fixed reply in `CHUNK`-character deltas, with no I/O: what is measured is the reading."""

    def __init__(self, reply: str) -> None:
        self.reply = reply
        self.chunks = [reply[i : i + CHUNK] for i in range(0, len(reply), CHUNK)]

    async def request(self, messages: Any, **options: Any) -> LMResponse:
        return LMResponse(text=self.reply)

    async def stream(self, messages: Any, **options: Any) -> AsyncIterator[StreamEvent]:
        for chunk in self.chunks:
            yield StreamEvent("text", delta=chunk)
        yield StreamEvent("final", response=LMResponse(text=self.reply))


def _reply(adapter: imp.Adapter, shape: str, size: int) -> tuple[imp.Signature, str]:
    if shape == "text":
        signature = imp.Signature(
            [imp.Field("question", "input", str)], [imp.Field("answer", "output", str)], "Answer."
        )
        words = ("lorem ipsum dolor sit amet " * (size // 27 + 1))[:size]
        return signature, adapter.reply_text(signature, {"answer": words.strip()})
    signature = imp.Signature([imp.Field("question", "input", str)], [imp.Field("rows", "output", list[Item])], "List.")
    # At most 3,000 items (longer ones for a larger reply): a 1 MB reply stays within XML's element
    # limit (10,000 by default; `imp.configure`'s parse limits).
    count = max(1, min(size // 200, 3000))
    pad = "x" * max(0, size // count - 70)
    return signature, adapter.reply_text(
        signature, {"rows": [Item(name=f"item {i} {pad}", count=i) for i in range(count)]}
    )


async def _per_chunk(adapter: imp.Adapter, shape: str, size: int) -> tuple[float, float, float, float, int]:
    """Seconds per chunk: the raw stream, imp.stream, imp.stream with partial values; the seconds to
    read the partial value made halfway; and the chunk count."""
    signature, reply = _reply(adapter, shape, size)
    lm = InProcessLM(reply)
    program = imp.predict(signature, adapter=adapter, lm=lm, json_fallback=False)
    started = time.perf_counter()
    async for _event in lm.stream([]):
        pass
    raw = time.perf_counter() - started
    started = time.perf_counter()
    async for _part in imp.stream(program, question="q"):
        pass
    plain = time.perf_counter() - started
    halfway: list[imp.StreamPart] = []
    started = time.perf_counter()
    async for part in imp.stream(program, question="q", partial=True):
        if part.kind == "partial" and len(halfway) < len(lm.chunks) // 2:
            halfway.append(part)
    partial = time.perf_counter() - started
    started = time.perf_counter()
    value = halfway[-1].value  # the outputs as they stood halfway through the reply
    read = time.perf_counter() - started
    assert value is not None and value[next(iter(signature.outputs))]
    n = len(lm.chunks)
    return raw / n, plain / n, partial / n, read, n


def chunk_costs() -> bool:
    """Print the cost per chunk at 10 KB and 1 MB; whether imp's stays flat."""
    print(f"\ncost per {CHUNK}-character chunk as the reply grows (asyncio; us per chunk)")
    print(
        f"{'adapter':5} {'output':6} {'size':>6} {'chunks':>7} {'raw':>6} {'stream':>7} {'partial':>8}"
        f" {'read a value halfway':>21}"
    )
    ok = True
    adapters = {"chat": imp.ChatAdapter(), "json": imp.JSONAdapter(), "xml": imp.XMLAdapter()}
    for name, adapter in adapters.items():
        for shape in ("text", "items"):
            rows = {}
            for label, size in (("10 KB", 10_000), ("1 MB", 1_000_000)):
                rows[label] = anyio.run(_per_chunk, adapter, shape, size)
                raw, plain, partial, read, n = rows[label]
                print(
                    f"{name:5} {shape:6} {label:>6} {n:>7} {raw * 1e6:>6.2f} {plain * 1e6:>7.2f} {partial * 1e6:>8.2f}"
                    f" {read * 1e3:>18.2f} ms"
                )
            small, large = rows["10 KB"], rows["1 MB"]
            growth = max(large[1] / small[1], large[2] / small[2])
            flat = growth <= FLAT
            ok = ok and flat
            print(f"{'':5} {'':6} 1 MB / 10 KB per chunk: {growth:.2f}x  {'flat' if flat else 'grows'}")
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args(argv)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True).start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    print(f"time to the first output token, {args.rounds} rounds; Python {platform.python_version()}")
    print(
        f"{'backend':8} {'raw median':>11} {'raw p90':>9} {'imp median':>11} {'imp p90':>9} {'difference':>11}  verdict"
    )
    ok = True
    try:
        for backend in ("asyncio", "trio"):
            raw, through, sides = anyio.run(measure, base_url, args.rounds, backend=backend)
            difference = statistics.median(through) - statistics.median(raw)
            verdict = "ok" if difference <= TARGET else f"over {TARGET * 1000:.0f} ms"
            ok = ok and difference <= TARGET

            def ms(values: list[float], q: float) -> str:
                return (
                    f"{statistics.quantiles(values, n=10)[8] * 1000:.2f}"
                    if q
                    else f"{statistics.median(values) * 1000:.2f}"
                )

            print(
                f"{backend:8} {ms(raw, 0):>8} ms {ms(raw, 0.9):>6} ms {ms(through, 0):>8} ms {ms(through, 0.9):>6} ms"
                f" {difference * 1000:>8.2f} ms  {verdict}"
            )
            same_work(f"{args.rounds} rounds on {backend}", sides)
    finally:
        server.shutdown()
    ok = chunk_costs() and ok
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
