"""What imp's reply limits cost on ordinary replies, and what they stop on hostile ones.

Ordinary: recorded streams of four providers (llama-cpp-python text and a tool call, Anthropic with
thinking, DeepSeek's reasoning) and a 2,000-delta stream, read by each provider's stream reader in
memory (no network: the reading alone is measured, in CPU time), with the default
`max_response_bytes` (every event's size checked, every delta counted, keep-alives watched)
against no limit at all; then whole calls, `request` and `stream`, against a loopback server. The
figure is the median of alternating runs, and the verdict says whether the difference is within
the runs' own spread (their interquartile range).

Hostile: a 100 MB stream of content (stopped at the limit: bytes read and peak memory), and one
line of 1 MB sent 16 bytes at a time, which a decoder that rescans its buffer on each chunk reads in
quadratic time (shown beside imp's, which scans each byte once).

    .venv/bin/python benchmarks/stream_limits.py
    .venv/bin/python benchmarks/stream_limits.py --runs 50
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import threading
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import anyio  # noqa: E402 - after the sys.path fix above

import imp  # noqa: E402
from imp.models._http import DEFAULT_MAX_RESPONSE_BYTES  # noqa: E402
from imp.models._sse import SSEDecoder, SSEEvent  # noqa: E402
from imp.models._stream import StreamReader  # noqa: E402

FIXTURES = _HERE.parent / "tests" / "models" / "fixtures" / "providers"
CHUNK = 64
"""Bytes per chunk fed to the readers, about what a socket hands over for a token-at-a-time stream."""


def _recorded(relative: str) -> bytes:
    path = FIXTURES / relative
    if path.suffix == ".sse":
        return path.read_bytes()
    data = json.loads(path.read_text())
    (interaction,) = [i for i in data["interactions"] if "text" in i["response"]][:1]
    return str(interaction["response"]["text"]).encode()


def _long_stream(deltas: int) -> bytes:
    chunks = [
        {"choices": [{"index": 0, "delta": {"content": f" word{i}"}, "finish_reason": None}]} for i in range(deltas)
    ]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    return ("".join(f"data: {json.dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n").encode()


STREAMS: dict[str, tuple[str, bytes]] = {
    "llama-cpp-python text": ("openai", _recorded("llama_cpp/stream_text.sse")),
    "llama-cpp-python tool call": ("openai", _recorded("llama_cpp/stream_tool_call.sse")),
    "anthropic thinking": ("anthropic", _recorded("anthropic/stream_thinking.json")),
    "deepseek reasoning": ("openai", _recorded("deepseek/stream_reasoning_content.json")),
    "2,000 deltas": ("openai", _long_stream(2000)),
}
CLIENTS = {name: imp.lm(f"{name}:m", api_key="sk-bench-0123456789") for name in ("openai", "anthropic")}


def _pieces(body: bytes, size: int = CHUNK) -> list[bytes]:
    return [body[i : i + size] for i in range(0, len(body), size)]


async def _read(provider: str, pieces: list[bytes], limit: int | None) -> int:
    async def source() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece

    state = CLIENTS[provider].stream_state(step=1, headers={})
    reader = StreamReader(state, source(), provider=provider, limit=limit, stall=None if limit is None else 120.0)
    count = 0
    async for _ in reader.deltas():
        count += 1
    return count


def _cpu(run: Callable[[], object]) -> float:
    started = time.process_time()
    run()
    return time.process_time() - started


def _ordinary(runs: int) -> None:
    print(f"\nordinary replies: CPU time to read one, median of {runs} alternating runs (no limit, then the default)")
    print(f"{'stream':<28} {'bytes':>9} {'no limit':>10} {'8 MiB limit':>12} {'ratio':>7} {'spread':>7}  verdict")

    async def many(provider: str, pieces: list[bytes], limit: int | None, inner: int) -> None:
        for _ in range(inner):
            await _read(provider, pieces, limit)

    for name, (provider, body) in STREAMS.items():
        pieces = _pieces(body)
        inner = max(1, 400_000 // len(body))
        anyio.run(many, provider, pieces, None, inner)  # warm up
        off: list[float] = []
        on: list[float] = []
        for _ in range(runs):  # alternating, so a busy moment of the machine falls on both sides
            off.append(_cpu(lambda p=provider, c=pieces, n=inner: anyio.run(many, p, c, None, n)) / inner)
            on.append(
                _cpu(lambda p=provider, c=pieces, n=inner: anyio.run(many, p, c, DEFAULT_MAX_RESPONSE_BYTES, n)) / inner
            )
        off_m, on_m = statistics.median(off), statistics.median(on)
        quartiles = statistics.quantiles(off, n=4)
        spread = (quartiles[2] - quartiles[0]) / off_m
        ratio = on_m / off_m
        verdict = "no measurable cost" if abs(ratio - 1) <= max(spread, 0.02) else "a cost over the spread"
        print(
            f"{name:<28} {len(body):>9,} {off_m * 1e6:>8.0f}us {on_m * 1e6:>10.0f}us {ratio:>7.3f} {spread:>7.1%}  {verdict}"
        )

    body = json.dumps({"choices": [{"index": 0, "message": {"role": "assistant", "content": "x" * 4000}}]}).encode()
    client = CLIENTS["openai"]
    whole = statistics.median(
        _cpu(lambda: [client.parse_whole(body, {}, status=200, step=1) for _ in range(200)]) / 200 for _ in range(runs)
    )
    print(
        f"{'a whole 4 KB body (parse)':<28} {len(body):>9,} {whole * 1e6:>8.0f}us  (its limit: one comparison per chunk)"
    )


class _Server(threading.Thread):
    """A loopback server that answers every POST with one recorded body, streamed or whole."""

    def __init__(self, body: bytes, content_type: str) -> None:
        super().__init__(daemon=True)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: object) -> None:
                pass

            def do_POST(self) -> None:
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.send_response(200)
                self.send_header("content-type", content_type)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base_url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def run(self) -> None:
        self.server.serve_forever(0.05)


def _end_to_end(runs: int) -> None:
    print(f"\nend to end on loopback: wall time per call, median of {runs} alternating runs of 20 calls")
    print(f"{'call':<28} {'no limit':>10} {'8 MiB limit':>12} {'ratio':>7} {'spread':>7}  verdict")
    whole = json.dumps(
        {"choices": [{"index": 0, "message": {"role": "assistant", "content": "word " * 400}, "finish_reason": "stop"}]}
    ).encode()
    cases = {
        "request (2 KB reply)": (whole, "application/json", False),
        "stream (2,000 deltas)": (_long_stream(2000), "text/event-stream", True),
    }
    messages = [{"role": "user", "content": "hi"}]
    for name, (body, content_type, streamed) in cases.items():
        server = _Server(body, content_type)
        server.start()

        async def calls(limit: int | None, base_url: str = server.base_url, streamed: bool = streamed) -> None:
            async with imp.lm("openai:m", base_url=base_url, max_response_bytes=limit) as lm:
                for _ in range(20):
                    if streamed:
                        async for _ in lm.stream(messages):
                            pass
                    else:
                        await lm.request(messages)

        anyio.run(calls, None)
        off: list[float] = []
        on: list[float] = []
        for _ in range(runs):
            for limit, out in ((None, off), (DEFAULT_MAX_RESPONSE_BYTES, on)):
                started = time.perf_counter()
                anyio.run(calls, limit)
                out.append((time.perf_counter() - started) / 20)
        server.server.shutdown()
        off_m, on_m = statistics.median(off), statistics.median(on)
        quartiles = statistics.quantiles(off, n=4)
        spread = (quartiles[2] - quartiles[0]) / off_m
        ratio = on_m / off_m
        verdict = "no measurable cost" if abs(ratio - 1) <= max(spread, 0.02) else "a cost over the spread"
        print(f"{name:<28} {off_m * 1e3:>8.2f}ms {on_m * 1e3:>10.2f}ms {ratio:>7.3f} {spread:>7.1%}  {verdict}")


class _RescanningDecoder:
    """A decoder that joins and rescans its whole buffer on every chunk (what imp's did before)."""

    def __init__(self) -> None:
        self._buffer = b""

    def feed(self, chunk: bytes) -> list[SSEEvent]:
        buffer = self._buffer + chunk
        lines = buffer.split(b"\n")
        self._buffer = lines.pop()
        return [SSEEvent("message", line.decode()) for line in lines if line.startswith(b"data:")]


def _hostile() -> None:
    print("\nhostile replies")
    hundred_mb = 100 * 1024 * 1024
    piece = ('data: {"choices":[{"index":0,"delta":{"content":"' + "z" * 4000 + '"}}]}\n\n').encode()

    async def endless() -> AsyncIterator[bytes]:
        sent = 0
        while sent < hundred_mb:
            sent += len(piece)
            yield piece

    async def read_endless() -> tuple[str, int]:
        reader = StreamReader(
            CLIENTS["openai"].stream_state(step=1, headers={}),
            endless(),
            provider="openai",
            limit=DEFAULT_MAX_RESPONSE_BYTES,
            stall=120.0,
        )
        try:
            async for _ in reader.deltas():
                pass
        except imp.ResponseTooLarge:
            return "ResponseTooLarge", reader.received
        return "read whole", reader.received

    tracemalloc.start()
    started = time.perf_counter()
    outcome, received = anyio.run(read_endless)
    elapsed = time.perf_counter() - started
    _, peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    print(
        f"a 100 MB stream of content: {outcome} after {received / 1e6:.1f} MB read, {elapsed:.2f} s, "
        f"peak memory {peak / 1e6:.1f} MB"
    )

    line = b"data: " + b"a" * (1024 * 1024)
    pieces = _pieces(line, 16)
    for label, decoder in (("rescanning decoder", _RescanningDecoder()), ("imp's decoder", SSEDecoder(None))):
        started = time.perf_counter()
        for p in pieces[:16384]:  # the first 256 KB: the rescanning decoder's time grows with its square
            decoder.feed(p)
        elapsed = time.perf_counter() - started
        print(f"one 1 MB line in 16-byte chunks, first 256 KB, {label}: {elapsed * 1000:.1f} ms")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=25)
    args = parser.parse_args(argv)
    print(f"imp reply limits; Python {platform.python_version()}, {platform.machine()}")
    _ordinary(args.runs)
    _end_to_end(max(5, args.runs // 2))
    _hostile()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
