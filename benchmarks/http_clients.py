"""HTTP throughput of imp's LM client against a local OpenAI-compatible server, beside the raw client,
DSPy's `dspy.LM` and pydantic-ai's OpenAI model.

A fake server in its own process answers every `POST /v1/chat/completions` after 20 ms with a fixed
chat completion. Each runner sends the same 2,000 requests at concurrency 100 and at 10; the table
gives requests per second, p50/p99 latency and the client's CPU per request.

    .venv-bench/bin/python benchmarks/http_clients.py              # everything (make bench installs the venv)
    .venv-bench/bin/python benchmarks/http_clients.py -n 500       # fewer requests
    .venv-bench/bin/python benchmarks/http_clients.py --only imp   # runners whose name contains "imp"

Runners: raw httpx and raw httpx2 (the same JSON posted by hand: the limit), imp on httpx and imp on
httpx2 (`IMP_HTTP_BACKEND`), DSPy 3.3 `dspy.LM(...).acall` (litellm, cache off, no retries) and
pydantic-ai `OpenAIChatModel.request`. Targets at concurrency 100: imp within 15% of the raw client on
the same library, at least 2x DSPy and 4x pydantic-ai. Also prints `python -X importtime -c "import imp"`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import multiprocessing
import os
import re
import socket
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# This file is named like the standard library's `http` (which httpx imports later, inside the
# runners): keep its folder off the import path.
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))  # this checkout's imp
sys.path.append(str(_HERE))  # benchmarks/_same_work.py, after imp and the standard library

from _same_work import Side, same_work  # noqa: E402

DELAY = 0.020
MESSAGES = [{"role": "user", "content": "Say hello."}]
REPLY = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1,
        "model": "bench-model",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello!"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
    }
).encode()


# -- the server (its own process) ----------------------------------------------------------------


class _Server(asyncio.Protocol):
    """A minimal HTTP/1.1 keep-alive server: every request gets REPLY after DELAY seconds (and is counted)."""

    served: Any = None
    """The count of requests read, shared with the benchmark's process (a `multiprocessing.Value`)."""

    def __init__(self) -> None:
        self.buffer = b""
        self.transport: asyncio.Transport | None = None
        self.loop = asyncio.get_running_loop()

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = self.buffer[:end].lower()
            match = re.search(rb"content-length:\s*(\d+)", head)
            length = int(match.group(1)) if match else 0
            if len(self.buffer) < end + 4 + length:
                return
            self.buffer = self.buffer[end + 4 + length :]
            with _Server.served.get_lock():
                _Server.served.value += 1
            self.loop.call_later(DELAY, self._respond)

    def _respond(self) -> None:
        if self.transport is not None and not self.transport.is_closing():
            self.transport.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                % (len(REPLY), REPLY)
            )


def _serve(port: int, served: Any) -> None:
    _Server.served = served

    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(_Server, "127.0.0.1", port, backlog=1024)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- the runners -----------------------------------------------------------------------------------

Send = Callable[[], Awaitable[Any]]


@dataclass
class Runner:
    name: str
    make: Callable[[str], Awaitable[tuple[Send, Callable[[], Awaitable[None]]]]]
    """Given the base URL, returns (send one request, close)."""


async def _raw(lib_name: str, base: str) -> tuple[Send, Callable[[], Awaitable[None]]]:
    lib: Any = __import__(lib_name)
    client = lib.AsyncClient(timeout=30.0)
    url = f"{base}/chat/completions"
    headers = {"authorization": "Bearer bench", "content-type": "application/json"}

    async def send() -> Any:
        body = json.dumps({"model": "bench-model", "messages": MESSAGES}).encode()
        response = await client.post(url, content=body, headers=headers)
        return json.loads(response.content)["choices"][0]["message"]["content"]

    return send, client.aclose


async def _imp(backend: str, base: str) -> tuple[Send, Callable[[], Awaitable[None]]]:
    os.environ["IMP_HTTP_BACKEND"] = backend
    from imp.models import lm as make_lm

    lm = make_lm("openai:bench-model", api_key="bench", base_url=base, max_retries=0)
    os.environ.pop("IMP_HTTP_BACKEND")

    async def send() -> Any:
        return (await lm.request(MESSAGES)).text

    return send, lm.aclose


async def _dspy(base: str) -> tuple[Send, Callable[[], Awaitable[None]]]:
    import dspy

    lm = dspy.LM("openai/bench-model", api_base=base, api_key="bench", cache=False, num_retries=0)

    async def send() -> Any:
        return await lm.acall(messages=MESSAGES)

    async def close() -> None:
        return None

    return send, close


async def _pydantic_ai(base: str) -> tuple[Send, Callable[[], Awaitable[None]]]:
    from pydantic_ai.messages import ModelRequest, UserPromptPart
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(base_url=base, api_key="bench")
    model = OpenAIChatModel("bench-model", provider=provider)
    params = ModelRequestParameters()

    async def send() -> Any:
        messages = [ModelRequest(parts=[UserPromptPart(content=MESSAGES[0]["content"])])]
        return await model.request(messages, None, params)

    async def close() -> None:
        await provider.client.close()

    return send, close


RUNNERS = [
    Runner("raw httpx", lambda base: _raw("httpx", base)),
    Runner("raw httpx2", lambda base: _raw("httpx2", base)),
    Runner("imp (httpx)", lambda base: _imp("httpx", base)),
    Runner("imp (httpx2)", lambda base: _imp("httpx2", base)),
    Runner("dspy.LM", _dspy),
    Runner("pydantic-ai", _pydantic_ai),
]


@dataclass
class Result:
    name: str
    concurrency: int
    rps: float
    p50: float
    p99: float
    cpu_ms: float
    errors: int
    served: int = 0
    """Requests the server read during the run."""


async def _run(send: Send, n: int, concurrency: int) -> tuple[float, list[float], float, int]:
    latencies: list[float] = []
    errors = 0
    remaining = n

    async def worker() -> None:
        nonlocal remaining, errors
        while remaining > 0:
            remaining -= 1
            started = time.perf_counter()
            try:
                await send()
            except Exception:
                errors += 1
            latencies.append(time.perf_counter() - started)

    cpu = time.process_time()
    wall = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(concurrency)))
    return time.perf_counter() - wall, latencies, time.process_time() - cpu, errors


async def bench(base: str, runner: Runner, n: int, levels: list[int], served: Any) -> list[Result]:
    send, close = await runner.make(base)
    try:
        await _run(send, min(200, n), 20)  # warm up: connections, imports, caches
        out = []
        for concurrency in levels:
            before = served.value
            wall, latencies, cpu, errors = await _run(send, n, concurrency)
            latencies.sort()
            out.append(
                Result(
                    runner.name,
                    concurrency,
                    n / wall,
                    statistics.median(latencies) * 1000,
                    latencies[int(len(latencies) * 0.99) - 1] * 1000,
                    cpu / n * 1000,
                    errors,
                    served.value - before,
                )
            )
        return out
    finally:
        await close()


def import_time(module: str) -> float | None:
    """Milliseconds `python -X importtime -c "import module"` reports for the module (median of 3)."""
    times = []
    for _ in range(3):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", "-c", f"import {module}"], capture_output=True, text=True, check=False
        )
        for line in proc.stderr.splitlines()[::-1]:
            parts = [p.strip() for p in line.split("|")]
            if len(parts) == 3 and parts[2] == module:
                times.append(int(parts[1]) / 1000)
                break
    return statistics.median(times) if times else None


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=2000)
    parser.add_argument("--concurrency", type=int, nargs="*", default=[100, 10])
    parser.add_argument("--only", default="")
    args = parser.parse_args()

    port = _free_port()
    spawn = multiprocessing.get_context("spawn")
    served = spawn.Value("i", 0)
    server = spawn.Process(target=_serve, args=(port, served), daemon=True)
    server.start()
    base = f"http://127.0.0.1:{port}/v1"
    for _ in range(100):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            break
        except OSError:
            time.sleep(0.05)

    results: list[Result] = []
    skipped: list[str] = []
    try:
        for runner in RUNNERS:
            if args.only and args.only not in runner.name:
                continue
            try:
                results += asyncio.run(bench(base, runner, args.n, args.concurrency, served))
            except ImportError as exc:
                skipped.append(f"{runner.name} ({exc.name} not installed)")
            print(f"  done: {runner.name}", file=sys.stderr)
    finally:
        server.terminate()

    print(
        f"{args.n} requests per run; the server answers after {DELAY * 1000:.0f} ms; {os.cpu_count()} cores; Python {sys.version.split()[0]}"
    )
    print(f"{'runner':<14} {'conc':>5} {'req/s':>8} {'p50 ms':>8} {'p99 ms':>8} {'CPU ms/req':>11} {'errors':>7}")
    for r in results:
        print(
            f"{r.name:<14} {r.concurrency:>5} {r.rps:>8.0f} {r.p50:>8.1f} {r.p99:>8.1f} {r.cpu_ms:>11.2f} {r.errors:>7}"
        )
    for concurrency in args.concurrency:
        sides = [
            Side(r.name, {"requests served": r.served, "errors": r.errors})
            for r in results
            if r.concurrency == concurrency
        ]
        same_work(f"{args.n} requests at concurrency {concurrency}", sides)
    for line in skipped:
        print(f"skipped: {line}")

    def rps(name: str, concurrency: int) -> float | None:
        found = [r.rps for r in results if r.name == name and r.concurrency == concurrency]
        return found[0] if found else None

    top = max(args.concurrency)
    print(f"\nratios at concurrency {top} (targets: imp/raw >= 0.85, imp/dspy >= 2, imp/pydantic-ai >= 4):")
    for lib in ("httpx", "httpx2"):
        imp_rps = rps(f"imp ({lib})", top)
        if imp_rps is None:
            continue
        for other in (f"raw {lib}", "dspy.LM", "pydantic-ai"):
            other_rps = rps(other, top)
            if other_rps:
                print(f"  imp ({lib}) / {other}: {imp_rps / other_rps:.2f}")
    took = import_time("imp")
    print(f"\nimport imp: {took:.0f} ms (target < 150 ms)" if took is not None else "\nimport imp: unknown")


if __name__ == "__main__":
    main()
