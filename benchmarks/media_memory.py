"""Memory per request with a 5 MB image: imp beside a raw client, DSPy and pydantic-ai.

Each runner sends the same image (5 MiB of PNG-signed bytes, made once before measuring) to a fake
OpenAI-compatible server in its own process, so only the client's memory is counted. After one
warm-up request (imports, connections), `tracemalloc` measures the peak of memory allocated while
one request is in flight, above what was held before it; the median of several requests is shown,
then the same with 4 requests at once (per request). The floor is one base64 encoding of the image
(4/3 of its bytes): a JSON request has to carry that text, so a client that builds the body once
holds at least that much.

    .venv-bench/bin/python benchmarks/media_memory.py        # make bench installs the venv
    .venv/bin/python benchmarks/media_memory.py              # imp and the raw client only

Runners: the raw client (httpx, the body built as most code does: the data URI in a dict,
`json.dumps`, `.encode()`), imp's `lm.request` and a whole `imp.predict` call, DSPy 3.3
`dspy.Predict` with a `dspy.Image`, pydantic-ai's `OpenAIChatModel.request` with a `BinaryContent`.
The target (issue 27): imp adds no copy of the image's bytes per request beyond the one encoding.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import gc
import json
import multiprocessing
import re
import socket
import statistics
import sys
import tracemalloc
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's imp

IMAGE = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * (5 * 1024 * 4) + b"\x00" * (5 * 1024 * 1024 - 8 - 256 * 5 * 1024 * 4)
ENCODED = 4 * ((len(IMAGE) + 2) // 3)
MB = 1024 * 1024
REPLY = json.dumps(
    {
        "id": "chatcmpl-bench",
        "object": "chat.completion",
        "created": 1,
        "model": "bench-model",
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": "[[ ## answer ## ]]\nA test card.\n\n[[ ## completed ## ]]",
                },
                "finish_reason": "stop",
            }
        ],
        "usage": {"prompt_tokens": 9, "completion_tokens": 2, "total_tokens": 11},
    }
).encode()


# -- the server (its own process: its memory is not the client's) -------------------------------------


class _Server(asyncio.Protocol):
    """HTTP/1.1 keep-alive: reads each request whole (by content-length, or chunked) and answers REPLY."""

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while True:
            end = self.buffer.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buffer[:end]).lower()
            match = re.search(rb"content-length:\s*(\d+)", head)
            if match:
                length = int(match.group(1))
                if len(self.buffer) < end + 4 + length:
                    return
                del self.buffer[: end + 4 + length]
            else:  # chunked: wait for the last chunk
                tail = self.buffer.find(b"\r\n0\r\n\r\n", end)
                if tail < 0:
                    return
                del self.buffer[: tail + 7]
            assert self.transport is not None
            self.transport.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: %d\r\n\r\n%s"
                % (len(REPLY), REPLY)
            )


def _serve(port: int) -> None:
    async def main() -> None:
        server = await asyncio.get_running_loop().create_server(_Server, "127.0.0.1", port)
        async with server:
            await server.serve_forever()

    asyncio.run(main())


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# -- the runners ---------------------------------------------------------------------------------------

Send = Callable[[], Awaitable[Any]]


async def _raw(base: str) -> tuple[Send, Callable[[], Awaitable[None]]]:
    import httpx

    client = httpx.AsyncClient(timeout=60.0)

    async def send() -> Any:
        uri = "data:image/png;base64," + base64.b64encode(IMAGE).decode()
        content = [{"type": "text", "text": "What is it?"}, {"type": "image_url", "image_url": {"url": uri}}]
        body = json.dumps({"model": "bench-model", "messages": [{"role": "user", "content": content}]}).encode()
        response = await client.post(
            f"{base}/chat/completions", content=body, headers={"content-type": "application/json"}
        )
        return response.json()

    return send, client.aclose


async def _imp_request(base: str) -> tuple[Send, Callable[[], Awaitable[None]]]:
    import imp

    lm = imp.lm("openai:bench-model", base_url=base, max_retries=0, timeout=60.0)
    image = imp.Image.from_bytes(IMAGE)

    async def send() -> Any:
        return await lm.request([{"role": "user", "content": ["What is it?", image]}])

    return send, lm.aclose


async def _imp_predict(base: str) -> tuple[Send, Callable[[], Awaitable[None]]]:
    import imp

    lm = imp.lm("openai:bench-model", base_url=base, max_retries=0, timeout=60.0)
    program = imp.predict("photo: Image, question -> answer", lm=lm)
    image = imp.Image.from_bytes(IMAGE)

    async def send() -> Any:
        return await imp.call(program, photo=image, question="What is it?")

    return send, lm.aclose


def _quiet_litellm_teardown(unraisable: Any) -> None:
    # LiteLLM's aiohttp transport raises from `__del__` when its loop is gone (asyncio.run per runner).
    if "LiteLLMAiohttpTransport" not in repr(getattr(unraisable, "object", None)):
        sys.__unraisablehook__(unraisable)


async def _dspy(base: str) -> tuple[Send, Callable[[], Awaitable[None]]]:
    import dspy

    sys.unraisablehook = _quiet_litellm_teardown

    lm = dspy.LM("openai/bench-model", api_base=base, api_key="bench", cache=False, num_retries=0)
    program = dspy.Predict("photo: dspy.Image, question -> answer")
    image = dspy.Image("data:image/png;base64," + base64.b64encode(IMAGE).decode())

    async def send() -> Any:
        with dspy.context(lm=lm):
            return await program.acall(photo=image, question="What is it?")

    async def close() -> None:
        return None

    return send, close


async def _pydantic_ai(base: str) -> tuple[Send, Callable[[], Awaitable[None]]]:
    from pydantic_ai.messages import BinaryContent, ModelRequest, UserPromptPart
    from pydantic_ai.models import ModelRequestParameters
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    provider = OpenAIProvider(base_url=base, api_key="bench")
    model = OpenAIChatModel("bench-model", provider=provider)
    image = BinaryContent(data=IMAGE, media_type="image/png")

    async def send() -> Any:
        messages = [ModelRequest(parts=[UserPromptPart(content=["What is it?", image])])]
        return await model.request(messages, None, ModelRequestParameters())

    async def close() -> None:
        await provider.client.close()

    return send, close


RUNNERS: dict[str, Callable[[str], Awaitable[tuple[Send, Callable[[], Awaitable[None]]]]]] = {
    "raw httpx (data URI, json.dumps)": _raw,
    "imp lm.request": _imp_request,
    "imp predict": _imp_predict,
    "dspy.Predict + dspy.Image": _dspy,
    "pydantic-ai BinaryContent": _pydantic_ai,
}


async def _peak(send: Send, at_once: int) -> float:
    """Bytes allocated at the peak of `at_once` requests in flight, above what was held before."""
    gc.collect()
    tracemalloc.reset_peak()
    before, _ = tracemalloc.get_traced_memory()
    await asyncio.gather(*(send() for _ in range(at_once)))
    _, peak = tracemalloc.get_traced_memory()
    return (peak - before) / at_once


async def _measure(name: str, base: str, repeats: int) -> tuple[float, float] | str:
    try:
        send, close = await RUNNERS[name](base)
    except ImportError as exc:
        return f"not installed ({exc.name})"
    try:
        await send()  # imports, connections, caches
        await asyncio.gather(*(send() for _ in range(4)))
        tracemalloc.start()
        one = statistics.median([await _peak(send, 1) for _ in range(repeats)])
        four = statistics.median([await _peak(send, 4) for _ in range(max(2, repeats // 2))])
        tracemalloc.stop()
        return one, four
    finally:
        await close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--repeats", type=int, default=5)
    parser.add_argument("--only", default="", help="runners whose name contains this")
    args = parser.parse_args()
    port = _free_port()
    server = multiprocessing.get_context("spawn").Process(target=_serve, args=(port,), daemon=True)
    server.start()
    base = f"http://127.0.0.1:{port}/v1"
    try:
        _wait_for(port)
        print(f"image: {len(IMAGE) / MB:.1f} MB; one base64 encoding (the floor): {ENCODED / MB:.2f} MB\n")
        print(f"{'runner':<34} {'1 in flight':>12} {'x encoding':>11} {'4 in flight':>12} {'x encoding':>11}")
        for name in RUNNERS:
            if args.only and args.only not in name:
                continue
            found = asyncio.run(_measure(name, base, args.repeats))
            if isinstance(found, str):
                print(f"{name:<34} {found}")
                continue
            one, four = found
            print(
                f"{name:<34} {one / MB:>9.2f} MB {one / ENCODED:>10.2f}x {four / MB:>9.2f} MB {four / ENCODED:>10.2f}x"
            )
    finally:
        server.terminate()
        server.join()


def _wait_for(port: int) -> None:
    import time

    for _ in range(200):
        try:
            socket.create_connection(("127.0.0.1", port), timeout=0.1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError("the fake server did not start")


if __name__ == "__main__":
    main()
