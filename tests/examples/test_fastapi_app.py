"""docs/examples/fastapi_app.py under uvicorn on 127.0.0.1, against a fake OpenAI-compatible server.

Everything runs on loopback, each server on its own thread and event loop; every loop of requests
is bounded in count and every wait in time.
"""

from __future__ import annotations

import functools
import json
import logging
import signal
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

from fastapi_harness import AppProcess, AppServer, OrderModel, load_example

import imp

example = load_example()
CONCURRENT = 200
LM_DELAY = 0.05
"""Seconds the fake provider takes per LM request in the concurrency test."""


async def eventually(predicate: Callable[[], bool], within: float = 3.0) -> bool:
    """Poll `predicate` on the test's loop until it holds or `within` seconds pass (what it reads is
    set by other threads' event loops, so there is no event to wait on)."""
    with anyio.move_on_after(within):
        while not predicate():  # noqa: ASYNC110
            await anyio.sleep(0.005)
        return True
    return predicate()


def expected(order_id: str) -> dict[str, Any]:
    found = example.find_order(order_id)
    return {**found, "reply": f"Order {order_id} is {found['status']}."}


class SlowTool:
    """The example's `order_status` tool (same name and schema) with a runner that takes `seconds`
    and flags, for the test's thread, that it started and whether it was cancelled."""

    def __init__(self, seconds: float = 30.0) -> None:
        self.seconds = seconds
        self.started = threading.Event()
        self.cancelled = threading.Event()
        self.finished = threading.Event()

    async def run(self, order_id: str) -> dict[str, Any]:
        self.started.set()
        try:
            await anyio.sleep(self.seconds)
        except anyio.get_cancelled_exc_class():
            self.cancelled.set()
            raise
        self.finished.set()
        return dict(example.find_order(order_id))

    def tool(self) -> imp.Tool:
        tool: imp.Tool = example.order_status.with_runner(self.run)
        return tool


@pytest.fixture
def provider() -> Iterator[OrderModel]:
    server = OrderModel(delay=LM_DELAY).start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def serve(provider: OrderModel) -> Iterator[Callable[..., AppServer]]:
    """Start the example app under uvicorn (stopped at the end of the test if still running)."""
    started: list[AppServer] = []

    def start(**options: Any) -> AppServer:
        settings = example.AppSettings(model="openai:fake-model", base_url=provider.base_url, api_key="sk-test-key")
        server = AppServer(example.create_app(options.pop("settings", settings), **options)).start()
        started.append(server)
        return server

    yield start
    for server in started:
        if server.server.started and not server.server.should_exit:
            server.stop()


@asynccontextmanager
async def client_for(server: AppServer | AppProcess, **options: Any) -> AsyncIterator[httpx.AsyncClient]:
    limits = httpx.Limits(max_connections=CONCURRENT + 10, max_keepalive_connections=CONCURRENT + 10)
    async with httpx.AsyncClient(base_url=server.url, timeout=30.0, limits=limits, **options) as client:
        yield client


def parse_sse(text: str) -> list[tuple[str, dict[str, Any]]]:
    """`event:`/`data:` frames as (kind, data) pairs."""
    events = []
    for frame in text.strip().split("\n\n"):
        lines = dict(line.split(": ", 1) for line in frame.splitlines())
        events.append((lines["event"], json.loads(lines["data"])))
    return events


async def read_events_until(lines: AsyncIterator[str], kind: str) -> list[str]:
    """Read a stream's event names up to `kind`. The caller holds `lines` (breaking out of an
    `async for` over `aiter_lines()` would close the connection as soon as the abandoned
    iterator is collected, before the test looked at the servers)."""
    seen: list[str] = []
    with anyio.fail_after(5):
        while kind not in seen:
            line = await anext(lines)
            if line.startswith("event: "):
                seen.append(line.removeprefix("event: "))
    return seen


# --- answers ------------------------------------------------------------------------------


async def test_200_concurrent_requests_are_all_answered(provider: OrderModel) -> None:
    # The app as deployed: the uvicorn command in its own process, settings from the environment.
    env = {
        "IMP_LM": "openai:fake-model",
        "IMP_BASE_URL": provider.base_url,
        "IMP_API_KEY": "sk-test-key",
        "IMP_REQUEST_SECONDS": "30",
    }
    server = AppProcess(env).start()
    try:
        async with client_for(server) as client:
            health = await client.get("/healthz")
            assert health.json() == {"ok": True, "model": "openai:fake-model"}
            order_ids = [f"A-{n}" for n in range(CONCURRENT)]
            responses: dict[str, httpx.Response] = {}

            async def ask(order_id: str) -> None:
                responses[order_id] = await client.post(
                    "/ask", json={"order_id": order_id, "question": "Where is my order?"}
                )

            with anyio.fail_after(120):  # "did not hang", not a speed claim
                async with anyio.create_task_group() as tg:
                    for order_id in order_ids:
                        tg.start_soon(ask, order_id)
    finally:
        output = server.stop()
    # uvicorn shuts down on SIGTERM, runs the lifespan's exit, then re-raises the signal.
    assert server.process.returncode in (0, -signal.SIGTERM), output
    assert "Application shutdown complete." in output, output
    assert {k: r.status_code for k, r in responses.items() if r.status_code != 200} == {}
    assert {k: r.json() for k, r in responses.items()} == {k: expected(k) for k in order_ids}
    stats = provider.snapshot()
    assert stats.requests == stats.answered == 2 * CONCURRENT  # a tool call, then submit
    assert stats.aborted == [] and stats.errors == []
    assert await eventually(lambda: provider.snapshot().connections_open == 0)
    # Served concurrently, counted rather than timed: the provider held many of the app's LM
    # requests at once (one at a time, this is 1). How long it takes is a benchmark's question.
    assert stats.peak_in_flight >= 10, stats.peak_in_flight


async def test_stream_sends_the_run_events_then_the_result(serve: Callable[..., AppServer]) -> None:
    server = serve()
    async with client_for(server) as client:
        response = await client.post("/ask/stream", json={"order_id": "A-17", "question": "Where is it?"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["cache-control"] == "no-cache"
    events = parse_sse(response.text)
    kinds = [kind for kind, _ in events]
    assert kinds == [
        "run_started",
        "model_request",
        "model_response",
        "tool_call",
        "tool_result",
        "model_request",
        "model_response",
        "tool_call",
        "tool_result",
        "run_finished",
        "result",
    ]
    run_events = [data for kind, data in events if kind != "result"]
    assert [e["seq"] for e in run_events] == list(range(1, len(run_events) + 1))
    assert len({e["call_id"] for e in run_events}) == 1
    assert run_events[3]["tool_name"] == "order_status" and run_events[3]["arguments"] == {"order_id": "A-17"}
    assert run_events[4]["output"] == example.find_order("A-17")
    assert events[-1][1] == expected("A-17")


async def test_a_request_past_its_deadline_is_answered_504_promptly(
    serve: Callable[..., AppServer], provider: OrderModel
) -> None:
    provider.delays["A-9"] = 30.0
    server = serve()
    async with client_for(server) as client:
        started = time.perf_counter()
        response = await client.post("/ask", json={"order_id": "A-9", "question": "?", "deadline_seconds": 0.3})
        elapsed = time.perf_counter() - started
        assert response.status_code == 504
        assert response.json()["termination_cause"] == "deadline_exceeded"
        assert elapsed >= 0.3  # no sooner than the deadline; the 30 s reply was never waited for:
        # the LM request was cancelled at the deadline, not left running at the provider.
        assert await eventually(lambda: "A-9" in provider.snapshot().aborted, within=10)
        stream = await client.post("/ask/stream", json={"order_id": "A-9", "question": "?", "deadline_seconds": 0.3})
        kinds = [kind for kind, _ in parse_sse(stream.text)]
        assert kinds[-1] == "error" and parse_sse(stream.text)[-1][1]["http_status"] == 504


# --- a client that goes away --------------------------------------------------------------


async def test_a_client_that_disconnects_cancels_the_in_flight_lm_request(
    serve: Callable[..., AppServer], provider: OrderModel, caplog: pytest.LogCaptureFixture
) -> None:
    provider.delays["A-5"] = 30.0
    server = serve()
    caplog.set_level(logging.INFO, logger="fastapi_app")
    async with client_for(server) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(client.post, "/ask", json={"order_id": "A-5", "question": "?"}))
            assert await eventually(lambda: "A-5" in provider.snapshot().in_flight)
            tg.cancel_scope.cancel()  # the client goes away: httpx closes its connection
        assert await eventually(lambda: "A-5" in provider.snapshot().aborted, within=3)
        assert await eventually(lambda: "fastapi_app.client_gone order_id=A-5" in caplog.text)
        # Nothing went on for the gone client, and the service is still fine.
        await anyio.sleep(0.2)
        assert provider.snapshot().seen.count("A-5") == 1
        response = await client.post("/ask", json={"order_id": "A-6", "question": "?"})
        assert response.json() == expected("A-6")


async def test_a_client_that_disconnects_cancels_the_running_tool(
    serve: Callable[..., AppServer], provider: OrderModel
) -> None:
    slow = SlowTool()
    server = serve(tools=[slow.tool()])
    async with client_for(server) as client:
        async with anyio.create_task_group() as tg:
            tg.start_soon(functools.partial(client.post, "/ask", json={"order_id": "A-8", "question": "?"}))
            assert await eventually(slow.started.is_set)
            tg.cancel_scope.cancel()
        assert await eventually(slow.cancelled.is_set, within=3)
        await anyio.sleep(0.2)
        assert not slow.finished.is_set()
        assert provider.snapshot().seen.count("A-8") == 1  # no LM request after the tool


async def test_a_stream_client_that_disconnects_cancels_the_running_tool(
    serve: Callable[..., AppServer], provider: OrderModel
) -> None:
    slow = SlowTool()
    server = serve(tools=[slow.tool()])
    async with client_for(server) as client:
        async with client.stream("POST", "/ask/stream", json={"order_id": "A-4", "question": "?"}) as response:
            lines = response.aiter_lines()
            seen = await read_events_until(lines, "tool_call")
            assert await eventually(slow.started.is_set)
        # Leaving the block closed the connection mid-stream, while the tool ran.
        assert seen == ["run_started", "model_request", "model_response", "tool_call"]
        assert await eventually(slow.cancelled.is_set, within=3)
        assert not slow.finished.is_set()
        assert provider.snapshot().seen.count("A-4") == 1


async def test_a_stream_client_that_disconnects_cancels_the_in_flight_lm_request(
    serve: Callable[..., AppServer], provider: OrderModel
) -> None:
    provider.delays["A-3"] = 30.0
    server = serve()
    async with client_for(server) as client:
        async with client.stream("POST", "/ask/stream", json={"order_id": "A-3", "question": "?"}) as response:
            lines = response.aiter_lines()
            assert await read_events_until(lines, "model_request") == ["run_started", "model_request"]
            assert await eventually(lambda: "A-3" in provider.snapshot().in_flight)
        # Leaving the block closed the connection while the LM request was at the provider.
        assert await eventually(lambda: "A-3" in provider.snapshot().aborted, within=3)
        assert provider.snapshot().seen.count("A-3") == 1


# --- shutdown -----------------------------------------------------------------------------


async def test_shutdown_closes_the_lm_connection_pool(
    serve: Callable[..., AppServer], provider: OrderModel, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="fastapi_app")
    server = serve()
    async with client_for(server) as client:
        for n in range(3):
            assert (await client.post("/ask", json={"order_id": f"A-{n}", "question": "?"})).status_code == 200
    lm = server.app.state.lm  # held, so only an explicit close can close its sockets
    assert provider.snapshot().connections_open >= 1  # the pool keeps its connections alive
    await anyio.to_thread.run_sync(server.stop)
    assert "fastapi_app.lm_closed model=openai:fake-model" in caplog.text
    assert await eventually(lambda: provider.snapshot().connections_open == 0, within=3)
    assert lm is server.app.state.lm


async def test_an_lm_left_open_keeps_its_connections(provider: OrderModel) -> None:
    """The control for the test above: without `aclose`, the provider still holds the connection."""
    lm = imp.lm("openai:fake-model", base_url=provider.base_url, api_key="sk-test-key")
    agent = imp.react(example.OrderQuestion, [example.order_status], lm=lm)
    prediction = await imp.call(agent, order_id="A-1", question="?")
    assert prediction.complete
    await anyio.sleep(0.3)
    assert provider.snapshot().connections_open == 1
    await lm.aclose()
    assert await eventually(lambda: provider.snapshot().connections_open == 0)


async def test_without_the_watch_a_gone_clients_handler_runs_on() -> None:
    """The control for `cancel_on_disconnect`: FastAPI itself lets a handler whose client went away
    run to its end (if a release starts cancelling it, the example's watch is merely redundant)."""
    from fastapi import FastAPI

    app = FastAPI()
    started, cancelled, finished = threading.Event(), threading.Event(), threading.Event()

    @app.post("/work")
    async def work() -> dict[str, bool]:
        started.set()
        try:
            await anyio.sleep(0.5)
        except anyio.get_cancelled_exc_class():
            cancelled.set()
            raise
        finished.set()
        return {"done": True}

    server = AppServer(app).start()
    try:
        async with client_for(server) as client, anyio.create_task_group() as tg:
            tg.start_soon(client.post, "/work")
            assert await eventually(started.is_set)
            tg.cancel_scope.cancel()
        assert await eventually(finished.is_set, within=3)
        assert not cancelled.is_set()
    finally:
        server.stop()


async def test_an_agent_that_never_answers_is_a_502_with_its_reason() -> None:
    """In-process (httpx's ASGITransport), with a model that keeps calling the tool and never submits."""

    def stubborn(messages: list[dict[str, Any]], options: dict[str, Any]) -> dict[str, Any]:
        return {"tool_calls": [{"name": "order_status", "arguments": {"order_id": "A-1"}}]}

    app = example.create_app(example.AppSettings(model="static"), lm_factory=lambda _: imp.StaticLM(handler=stubborn))
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://app") as client:
            response = await client.post("/ask", json={"order_id": "A-1", "question": "?"})
            assert response.status_code == 502
            assert response.json() == {
                "detail": "the agent did not finish its answer",
                "termination_cause": "max_iters",
            }
            stream = await client.post("/ask/stream", json={"order_id": "A-1", "question": "?"})
            assert parse_sse(stream.text)[-1] == (
                "error",
                {"http_status": 502, "detail": "the agent did not finish its answer", "termination_cause": "max_iters"},
            )
            invalid = await client.post("/ask", json={"order_id": "", "question": "?"})
            assert invalid.status_code == 422


def test_settings_come_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("IMP_LM", "IMP_BASE_URL", "IMP_API_KEY", "IMP_REQUEST_SECONDS"):
        monkeypatch.delenv(name, raising=False)
    assert example.AppSettings.from_env() == example.AppSettings()
    monkeypatch.setenv("IMP_LM", "openai:qwen3")
    monkeypatch.setenv("IMP_BASE_URL", "http://127.0.0.1:8000/v1")
    monkeypatch.setenv("IMP_REQUEST_SECONDS", "2.5")
    settings = example.AppSettings.from_env()
    assert (settings.model, settings.base_url, settings.api_key, settings.request_seconds) == (
        "openai:qwen3",
        "http://127.0.0.1:8000/v1",
        None,
        2.5,
    )
    lm = example.make_lm(settings)
    assert lm.model_key == "openai:qwen3" and lm.base_url == "http://127.0.0.1:8000/v1"
