"""Servers for the FastAPI example's tests, all on 127.0.0.1, each on its own event loop and thread.

- `FakeOpenAI`: an OpenAI-compatible chat-completions server that plays the order agent's model:
  it calls `order_status` for the order in the request, then `submit`s what the tool returned.
  It counts the connections it holds and records a request whose client closed the connection
  while it was being answered (an LM request cancelled in flight).
- `AppServer`: uvicorn serving an app in a background thread, stopped like a real shutdown.
- `AppProcess`: `python -m uvicorn fastapi_app:app` in a subprocess, configured by environment.
- `load_example()`: docs/examples/fastapi_app.py as a module.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import uvicorn

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "fastapi_app.py"
_ORDER_ID = re.compile(r"\[\[ ## order_id ## \]\]\s*(\S+)")


def load_example(path: Path = EXAMPLE) -> ModuleType:
    """An example app's module, imported once under its file's name (`fastapi_app` by default)."""
    name = path.stem
    module = sys.modules.get(name)
    if module is not None and getattr(module, "__file__", None) == str(path):
        return module
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def wait_until(predicate: Callable[[], bool], timeout: float = 5.0, interval: float = 0.005) -> bool:
    """Poll `predicate` until it holds (True) or `timeout` seconds pass (False)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(interval)
    return predicate()


class LoopThread:
    """An asyncio event loop running forever in a daemon thread."""

    def __init__(self, name: str) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name=name, daemon=True)
        self._thread.start()

    def run[T](self, coro: Coroutine[Any, Any, T], timeout: float = 10.0) -> T:
        """Run `coro` on the loop and wait for its value."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)
        self.loop.close()


@dataclass
class ProviderStats:
    """What the fake provider saw (read from the test thread under `FakeOpenAI.lock`)."""

    connections_open: int = 0
    connections_total: int = 0
    requests: int = 0
    answered: int = 0
    in_flight: dict[str, int] = field(default_factory=dict)
    """Order id -> requests for it being answered now."""
    aborted: list[str] = field(default_factory=list)
    """Order ids of requests whose client closed the connection before the answer was sent."""
    seen: list[str] = field(default_factory=list)
    """Order ids of every request, in arrival order."""
    errors: list[str] = field(default_factory=list)
    """Requests the fake could not read (a bug in the test or the client)."""


class FakeOpenAI:
    """An OpenAI-compatible `/v1/chat/completions` on 127.0.0.1 playing the order agent's model.

    Every answer waits `delay` seconds (or `delays[order_id]`) first, watching the connection:
    a client that closes it meanwhile is recorded in `stats.aborted` and gets no answer.
    """

    def __init__(self, *, delay: float = 0.0, delays: dict[str, float] | None = None) -> None:
        self.delay = delay
        self.delays = dict(delays or {})
        self.lock = threading.Lock()
        self.stats = ProviderStats()
        self._loop = LoopThread("fake-openai")
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def start(self) -> FakeOpenAI:
        async def start() -> None:
            self._server = await asyncio.start_server(self._handle, "127.0.0.1", 0, backlog=1024)
            self.port = self._server.sockets[0].getsockname()[1]

        self._loop.run(start())
        return self

    def stop(self) -> None:
        async def stop() -> None:
            if self._server is not None:
                self._server.close()
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)

        self._loop.run(stop())
        self._loop.close()

    def snapshot(self) -> ProviderStats:
        with self.lock:
            return ProviderStats(
                self.stats.connections_open,
                self.stats.connections_total,
                self.stats.requests,
                self.stats.answered,
                dict(self.stats.in_flight),
                list(self.stats.aborted),
                list(self.stats.seen),
                list(self.stats.errors),
            )

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
        """Answer one request; False when the client closed the connection."""
        try:
            head = await reader.readuntil(b"\r\n\r\n")
        except asyncio.IncompleteReadError:
            return False
        lines = head.decode("latin-1").split("\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        body = json.loads(await reader.readexactly(int(headers.get("content-length", "0"))))
        order_id = _order_id(body)
        with self.lock:
            self.stats.requests += 1
            self.stats.seen.append(order_id)
            self.stats.in_flight[order_id] = self.stats.in_flight.get(order_id, 0) + 1
        try:
            delay = self.delays.get(order_id, self.delay)
            if delay > 0 and await _closed_within(reader, delay):
                with self.lock:
                    self.stats.aborted.append(order_id)
                return False
            payload = json.dumps(_completion(body, order_id)).encode()
            writer.write(
                b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                + f"content-length: {len(payload)}\r\n\r\n".encode()
                + payload
            )
            await writer.drain()
            with self.lock:
                self.stats.answered += 1
            return True
        finally:
            with self.lock:
                self.stats.in_flight[order_id] -= 1
                if not self.stats.in_flight[order_id]:
                    del self.stats.in_flight[order_id]


async def _closed_within(reader: asyncio.StreamReader, seconds: float) -> bool:
    """Wait `seconds`, watching the connection; True as soon as the client closes it."""
    try:
        async with asyncio.timeout(seconds):
            return await reader.read(1) == b""  # httpx sends nothing more on this connection until answered
    except TimeoutError:
        return False


def _order_id(body: dict[str, Any]) -> str:
    for message in body["messages"]:
        if message["role"] == "user":
            found = _ORDER_ID.search(str(message.get("content") or ""))
            if found:
                return found.group(1)
    return "?"


def _completion(body: dict[str, Any], order_id: str) -> dict[str, Any]:
    """Step 1: call `order_status`; step 2: `submit` what it returned."""
    results = [m for m in body["messages"] if m["role"] == "tool"]
    if not results:
        call = {"name": "order_status", "arguments": json.dumps({"order_id": order_id})}
    else:
        found = json.loads(results[-1]["content"])
        outputs = {
            "status": found["status"],
            "eta_days": found["eta_days"],
            "reply": f"Order {order_id} is {found['status']}.",
        }
        call = {"name": "submit", "arguments": json.dumps(outputs)}
    step = len(results) + 1
    return {
        "id": f"chatcmpl-{order_id}-{step}",
        "object": "chat.completion",
        "created": 0,
        "model": body.get("model", "fake"),
        "choices": [
            {
                "index": 0,
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [{"id": f"call_{order_id}_{step}", "type": "function", "function": call}],
                },
                "finish_reason": "tool_calls",
            }
        ],
        "usage": {"prompt_tokens": 50, "completion_tokens": 10, "total_tokens": 60},
    }


class AppServer:
    """uvicorn serving `app` on 127.0.0.1 in a background thread with its own event loop."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self._socket = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._socket.bind(("127.0.0.1", 0))
        self.port = self._socket.getsockname()[1]
        config = uvicorn.Config(
            app,
            loop="asyncio",
            lifespan="on",
            log_level="warning",
            access_log=False,
            backlog=1024,
            timeout_keep_alive=60,  # longer than any test: the client never reuses a closing connection
        )
        self.server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._serve, name="uvicorn", daemon=True)
        self.error: BaseException | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        try:
            asyncio.run(self.server.serve(sockets=[self._socket]))
        except BaseException as exc:
            self.error = exc

    def start(self) -> AppServer:
        self._thread.start()
        if not wait_until(lambda: self.server.started or not self._thread.is_alive(), timeout=10):
            raise RuntimeError("uvicorn did not start")
        if not self.server.started:
            raise RuntimeError(f"uvicorn failed to start: {self.error!r}")
        return self

    def stop(self, timeout: float = 10.0) -> None:
        """Shut down as on SIGTERM: stop accepting, finish, run the lifespan's exit."""
        self.server.should_exit = True
        self._thread.join(timeout)
        self._socket.close()
        if self._thread.is_alive():
            raise RuntimeError("uvicorn did not stop")


class AppProcess:
    """The example as deployed: `python -m uvicorn fastapi_app:app` in its own process, settings from
    the environment. Stopped with SIGTERM, as a process manager would."""

    def __init__(self, env: dict[str, str]) -> None:
        with socket.socket() as probe:  # a free port (uvicorn binds it again at once)
            probe.bind(("127.0.0.1", 0))
            self.port = probe.getsockname()[1]
        command = [
            sys.executable,
            "-m",
            "uvicorn",
            "fastapi_app:app",
            "--app-dir",
            str(EXAMPLE.parent),
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--log-level",
            "info",
            "--no-access-log",
            "--backlog",
            "1024",
            "--timeout-keep-alive",
            "60",  # longer than any test, so the client never reuses a connection uvicorn is closing
        ]
        self.process = subprocess.Popen(
            command, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self, timeout: float = 20.0) -> AppProcess:
        def ready() -> bool:
            if self.process.poll() is not None:
                return True
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", self.port), timeout=0.2):
                return True
            return False

        if not wait_until(ready, timeout=timeout, interval=0.05) or self.process.poll() is not None:
            output = self.stop()
            raise RuntimeError(f"uvicorn did not start:\n{output}")
        return self

    def stop(self, timeout: float = 10.0) -> str:
        """SIGTERM, wait, and return what the process printed."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        try:
            output, _ = self.process.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            output, _ = self.process.communicate(timeout=5)
        return output or ""
