"""imp in a FastAPI service: one LM per process, one agent for every request, deadlines, events as SSE.

Run it against any OpenAI-compatible server (vLLM, Ollama, llama.cpp, OpenAI itself):

    cd docs/examples
    IMP_LM=openai:qwen3 IMP_BASE_URL=http://127.0.0.1:8000/v1 uvicorn fastapi_app:app

Settings, read from the environment when the app starts:

    IMP_LM                "provider:model" (default openai:gpt-5.4-mini)
    IMP_BASE_URL          an OpenAI-compatible server's base URL (default: the provider's own)
    IMP_API_KEY           the key (default: the provider's variable, such as OPENAI_API_KEY)
    IMP_REQUEST_SECONDS   the deadline of one request (default 30)

Endpoints:

    POST /ask         {"order_id": "A-17", "question": "..."} -> the agent's answer as JSON
    POST /ask/stream  the same, answered as server-sent events: one per run event, then `result`
    GET  /healthz     the model in use

A client that goes away mid-request cancels the agent: its in-flight LM request and its
running tool are cancelled, not left to finish for nobody. See docs/fastapi.md.
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import os
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any, Literal

import anyio
from anyio.streams.memory import MemoryObjectSendStream
from fastapi import FastAPI, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field
from starlette.types import Receive, Scope, Send

import imp

log = logging.getLogger("fastapi_app")

CLIENT_CLOSED_REQUEST = 499
"""The status logged for a request whose client went away (nginx's convention; nobody reads it)."""


# --- settings -------------------------------------------------------------------------------


@dataclass(frozen=True)
class AppSettings:
    """What the service reads from its environment at startup."""

    model: str = "openai:gpt-5.4-mini"
    base_url: str | None = None
    api_key: str | None = None
    request_seconds: float = 30.0

    @classmethod
    def from_env(cls) -> AppSettings:
        """The settings in `os.environ` (see the module's docstring)."""
        return cls(
            model=os.environ.get("IMP_LM", cls.model),
            base_url=os.environ.get("IMP_BASE_URL") or None,
            api_key=os.environ.get("IMP_API_KEY") or None,
            request_seconds=float(os.environ.get("IMP_REQUEST_SECONDS", cls.request_seconds)),
        )


def make_lm(settings: AppSettings) -> imp.LM:
    """The process's one LM: one pooled HTTP client, shared by every request."""
    return imp.lm(settings.model, base_url=settings.base_url, api_key=settings.api_key)


# --- the agent: a signature and a tool ------------------------------------------------------


class OrderQuestion(imp.Signature):
    """Answer a customer's question about their order. Look the order up before answering."""

    order_id: str = imp.InputField()
    question: str = imp.InputField()
    status: Literal["processing", "shipped", "delivered", "unknown"] = imp.OutputField()
    eta_days: int = imp.OutputField(desc="days until delivery; 0 once delivered or unknown")
    reply: str = imp.OutputField(desc="one or two sentences for the customer")


def find_order(order_id: str) -> dict[str, Any]:
    """A stand-in for the order database: every `A-<n>` exists and its status follows from n."""
    prefix, _, number = order_id.partition("-")
    if prefix != "A" or not number.isdigit():
        return {"order_id": order_id, "status": "unknown", "eta_days": 0}
    n = int(number)
    status = ("processing", "shipped", "delivered")[n % 3]
    return {"order_id": order_id, "status": status, "eta_days": 0 if status == "delivered" else 1 + n % 5}


@imp.tool
async def order_status(order_id: str) -> dict[str, Any]:
    """Look up an order's status and the days until it is delivered."""
    await anyio.sleep(0.005)  # the database round trip this stands in for
    return find_order(order_id)


# --- requests and answers -------------------------------------------------------------------


class AskRequest(BaseModel):
    order_id: str = Field(min_length=1, max_length=64)
    question: str = Field(min_length=1, max_length=2000)
    deadline_seconds: float | None = Field(default=None, gt=0, description="shortens the server's deadline")


class Answer(BaseModel):
    order_id: str
    status: str
    eta_days: int
    reply: str


class Incomplete(BaseModel):
    detail: str
    termination_cause: str | None


def answer_or_error(order_id: str, prediction: imp.Prediction) -> tuple[int, dict[str, Any]]:
    """The HTTP status and body for a finished run: 200 with the answer, else 504 or 502."""
    if prediction.complete:
        return 200, Answer(order_id=order_id, **prediction.fields).model_dump()
    cause = prediction.metadata.termination_cause
    status = 504 if cause == "deadline_exceeded" else 502
    return status, Incomplete(detail="the agent did not finish its answer", termination_cause=cause).model_dump()


# --- the app --------------------------------------------------------------------------------


def create_app(
    settings: AppSettings | None = None,
    *,
    tools: Sequence[imp.Tool] = (order_status,),
    lm_factory: Callable[[AppSettings], imp.LM] = make_lm,
) -> FastAPI:
    """The service. `settings` default to the environment, read at startup; tests pass their own
    settings, tools (the same tool with another runner) or LM."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        config = settings or AppSettings.from_env()
        lm = lm_factory(config)
        app.state.settings = config
        app.state.lm = lm
        app.state.agent = imp.react(OrderQuestion, list(tools), lm=lm, max_iters=6)
        log.info("fastapi_app.started model=%s", config.model)
        try:
            yield
        finally:
            await lm.aclose()  # closes the connection pool: no socket outlives the app
            log.info("fastapi_app.lm_closed model=%s", config.model)

    app = FastAPI(title="imp agent service", lifespan=lifespan)

    @app.get("/healthz")
    async def healthz(request: Request) -> dict[str, Any]:
        return {"ok": True, "model": request.app.state.settings.model}

    @app.post("/ask", response_model=Answer, responses={502: {"model": Incomplete}, 504: {"model": Incomplete}})
    async def ask(body: AskRequest, request: Request) -> JSONResponse:
        agent: imp.ReAct = request.app.state.agent
        seconds = _request_seconds(request, body)

        async def run() -> imp.Prediction:
            with imp.deadline(seconds):
                return await imp.call(agent, order_id=body.order_id, question=body.question)

        try:
            prediction = await cancel_on_disconnect(request, run)
        except imp.DeadlineExceeded:
            return JSONResponse(
                Incomplete(detail="deadline exceeded", termination_cause="deadline_exceeded").model_dump(), 504
            )
        if prediction is None:
            log.info("fastapi_app.client_gone order_id=%s", body.order_id)
            return JSONResponse({"detail": "client closed the request"}, CLIENT_CLOSED_REQUEST)
        status, payload = answer_or_error(body.order_id, prediction)
        return JSONResponse(payload, status)

    @app.post("/ask/stream", response_class=StreamingResponse)
    async def ask_stream(body: AskRequest, request: Request) -> StreamingResponse:
        agent: imp.ReAct = request.app.state.agent
        seconds = _request_seconds(request, body)

        async def run(events: MemoryObjectSendStream[bytes]) -> None:
            def on_event(event: imp.Event) -> None:
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    events.send_nowait(sse(event.kind, event.dump()))  # never blocks the agent

            try:
                with imp.deadline(seconds):
                    prediction = await imp.call(
                        agent, order_id=body.order_id, question=body.question, on_event=on_event
                    )
                status, payload = answer_or_error(body.order_id, prediction)
                if status == 200:
                    events.send_nowait(sse("result", payload))
                else:
                    events.send_nowait(sse("error", {"http_status": status, **payload}))
            except imp.DeadlineExceeded:
                events.send_nowait(sse("error", {"http_status": 504, "detail": "deadline exceeded"}))

        return RunEventStream(run)

    return app


def _request_seconds(request: Request, body: AskRequest) -> float:
    """The server's deadline, shortened by the client's when it asks for less."""
    limit: float = request.app.state.settings.request_seconds
    return min(limit, body.deadline_seconds or math.inf)


# --- cancelling work whose client went away ------------------------------------------------


async def cancel_on_disconnect[T](request: Request, work: Callable[[], Awaitable[T]]) -> T | None:
    """Run `work` and return its value, or cancel it and return None when the client disconnects.

    Starlette does not cancel a handler whose client went away; it would run to its end, LM
    requests, tools and all. This watches the connection beside the work and cancels the work,
    which closes its in-flight LM request and cancels its running tools.
    """
    value: T | None = None
    error: Exception | None = None
    async with anyio.create_task_group() as tg:
        tg.start_soon(_cancel_when_gone, request.receive, tg.cancel_scope)
        try:
            value = await work()
        except Exception as exc:  # raised below, not wrapped in the task group's ExceptionGroup
            error = exc
        tg.cancel_scope.cancel()  # stop watching
    if error is not None:
        raise error
    return value


async def _cancel_when_gone(receive: Receive, scope: anyio.CancelScope) -> None:
    while (await receive())["type"] != "http.disconnect":
        pass  # the request body was already read; nothing else comes before the disconnect
    scope.cancel()


def sse(kind: str, data: object) -> bytes:
    """One server-sent event: `event: <kind>` and its JSON on one `data:` line."""
    return f"event: {kind}\ndata: {json.dumps(data, default=str, ensure_ascii=False)}\n\n".encode()


class RunEventStream(StreamingResponse):
    """A server-sent-event response fed by one run: the run starts when the response starts and
    is cancelled when it ends, whether the stream finished or the client went away.

    The run writes encoded events into an unbounded memory stream (an agent is never slowed by a
    slow reader; `max_iters` and the deadline bound how much it writes) and closes it at its end,
    which ends the response.
    """

    def __init__(self, run: Callable[[MemoryObjectSendStream[bytes]], Awaitable[None]]) -> None:
        self._events_in, self._events_out = anyio.create_memory_object_stream[bytes](max_buffer_size=math.inf)
        self._run = run
        headers = {"cache-control": "no-cache", "x-accel-buffering": "no"}
        super().__init__(self._events_out, media_type="text/event-stream", headers=headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as tg:
            tg.start_soon(self._produce)
            try:
                await super().__call__(scope, receive, send)  # returns early when the client disconnects
            finally:
                tg.cancel_scope.cancel()
                self._events_out.close()

    async def _produce(self) -> None:
        async with self._events_in:
            try:
                await self._run(self._events_in)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                pass  # the reader is gone
            except Exception:
                log.exception("fastapi_app.stream_failed")
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    self._events_in.send_nowait(sse("error", {"http_status": 500, "detail": "internal error"}))


app = create_app()
"""For `uvicorn fastapi_app:app`: settings come from the environment at startup."""
