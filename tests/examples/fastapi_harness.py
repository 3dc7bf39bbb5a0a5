"""Servers for the FastAPI example's tests, all on 127.0.0.1, each on its own event loop and thread.

- `OrderModel`: the order agent's model on the suite's fake provider (tests/fake_provider.py): it
  calls `order_status` for the order in the request, then `submit`s what the tool returned; its
  `snapshot()` says, by order id, what the provider answered, holds, and saw abandoned.
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
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import uvicorn
from fake_provider import FakeProvider, Received, Reply

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


@dataclass
class ProviderStats:
    """What the fake provider saw, by order id."""

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
    peak_in_flight: int = 0
    """The most requests it was answering at once."""


class OrderModel:
    """The order agent's model, answering the requests of the suite's fake provider: it calls
    `order_status` for the order in the request, then `submit`s what the tool returned.

    Every answer waits `delay` seconds (or `delays[order_id]`) first, watching the connection: a
    client that closes it meanwhile is recorded as aborted and gets no answer.
    """

    def __init__(self, *, delay: float = 0.0, delays: dict[str, float] | None = None) -> None:
        self.delay = delay
        self.delays = dict(delays or {})
        self.fake = FakeProvider(responder=self.answer)

    @property
    def base_url(self) -> str:
        return self.fake.base_url

    def start(self) -> OrderModel:
        self.fake.start()
        return self

    def stop(self) -> None:
        self.fake.stop()

    def answer(self, received: Received) -> Reply:
        order_id = _order_id(received.json)
        return Reply(json=_completion(received.json, order_id), delay=self.delays.get(order_id, self.delay))

    def snapshot(self) -> ProviderStats:
        fake = self.fake
        with fake.lock:
            in_flight: dict[str, int] = {}
            for received in fake.in_flight:
                order_id = _order_id(received.json)
                in_flight[order_id] = in_flight.get(order_id, 0) + 1
            return ProviderStats(
                fake.connections_open,
                fake.connections_total,
                len(fake.requests),
                len(fake.answered),
                in_flight,
                [_order_id(r.json) for r in fake.aborted_requests],
                [_order_id(r.json) for r in fake.requests],
                list(fake.errors),
                fake.peak_in_flight,
            )


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
