"""Time to the first output token: `imp.stream` against the raw `lm.stream`, on a loopback provider.

A fake OpenAI-compatible server on 127.0.0.1 streams each reply as server-sent events: the first
event holds `[[ ## answer ## ]]` and the answer's first word, the rest follow 30 ms later. For
each round, the raw side is the time from calling `lm.stream(messages)` to its first text delta
holding that word; the imp side is the time from `imp.stream(predict, ...)` to its first `field`
part, which includes formatting the request, the run's events and reading the marker. The table
gives the median and p90 of each over the rounds, and the verdict against the target: the
median difference within 2 ms.

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
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))
sys.path.append(str(_HERE))  # benchmarks/_same_work.py, after imp and the standard library

import anyio  # noqa: E402 - after the sys.path fix above
from _same_work import Calls, Side, same_work  # noqa: E402

import imp  # noqa: E402

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
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
