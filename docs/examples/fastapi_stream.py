"""imp in a FastAPI service: an answer streamed token by token as server-sent events.

    cd docs/examples
    IMP_LM=openai:qwen3 IMP_BASE_URL=http://127.0.0.1:8000/v1 uvicorn fastapi_stream:app

    POST /answer/stream  {"question": "..."} -> `token` events ({"field", "delta"}) as the model
                         writes, then one `result` (the whole answer) or one `error` (with
                         `http_status`: 504 past the deadline, 502 when the model failed or its
                         reply could not be read, 500 for anything else), each error logged

The endpoint is FastAPI's own SSE support (`response_class=EventSourceResponse` on a generator
path operation). A client that goes away stops the generator, which cancels the run and closes
its LM request. See docs/fastapi.md.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass

from fastapi import FastAPI, Request
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import BaseModel, Field

import imp

log = logging.getLogger("fastapi_stream")


@dataclass(frozen=True)
class StreamSettings:
    """What the service reads from its environment at startup."""

    model: str = "openai:gpt-5.4-mini"
    base_url: str | None = None
    api_key: str | None = None
    request_seconds: float = 30.0

    @classmethod
    def from_env(cls) -> StreamSettings:
        """The settings in `os.environ`."""
        return cls(
            model=os.environ.get("IMP_LM", cls.model),
            base_url=os.environ.get("IMP_BASE_URL") or None,
            api_key=os.environ.get("IMP_API_KEY") or None,
            request_seconds=float(os.environ.get("IMP_REQUEST_SECONDS", cls.request_seconds)),
        )


class Explain(imp.Signature):
    """Answer the question in a few plain sentences."""

    question: str = imp.InputField()
    answer: str = imp.OutputField()


class AskBody(BaseModel):
    question: str = Field(min_length=1, max_length=2000)


def make_lm(settings: StreamSettings) -> imp.LM:
    """The process's one LM, shared by every request."""
    return imp.lm(settings.model, base_url=settings.base_url, api_key=settings.api_key)


def create_app(
    settings: StreamSettings | None = None, *, lm_factory: Callable[[StreamSettings], imp.LM] = make_lm
) -> FastAPI:
    """The service; tests pass their own settings."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        config = settings or StreamSettings.from_env()
        lm = lm_factory(config)
        app.state.settings = config
        app.state.program = imp.chain_of_thought(Explain, lm=lm)
        try:
            yield
        finally:
            await lm.aclose()

    app = FastAPI(title="imp streaming answers", lifespan=lifespan)

    @app.post("/answer/stream", response_class=EventSourceResponse)
    async def answer_stream(body: AskBody, request: Request) -> AsyncIterator[ServerSentEvent]:
        program: imp.ChainOfThought = request.app.state.program
        seconds: float = request.app.state.settings.request_seconds
        try:
            async for part in imp.stream(program, question=body.question, deadline=seconds):
                if part.kind == "field":
                    yield ServerSentEvent(event="token", data={"field": part.field, "delta": part.delta})
                elif part.kind == "retry":
                    yield ServerSentEvent(event="retry", data={"reason": part.reason})
                elif part.kind == "final" and part.prediction is not None:
                    yield ServerSentEvent(event="result", data=part.prediction.fields)
        except imp.DeadlineExceeded:
            log.warning("fastapi_stream.deadline seconds=%s", seconds)
            yield ServerSentEvent(event="error", data={"http_status": 504, "detail": "deadline exceeded"})
        except imp.LMError as exc:
            log.warning("fastapi_stream.lm_error %s", type(exc).__name__)
            yield ServerSentEvent(event="error", data={"http_status": 502, "detail": type(exc).__name__})
        except imp.ImpError as exc:  # a reply that could not be parsed, a turn without an answer, ...
            log.warning("fastapi_stream.failed %s", type(exc).__name__)
            yield ServerSentEvent(event="error", data={"http_status": 502, "detail": type(exc).__name__})
        except Exception:  # a bug: logged with its traceback; the client is told only that it failed
            log.exception("fastapi_stream.crashed")
            yield ServerSentEvent(event="error", data={"http_status": 500, "detail": "internal error"})

    return app


app = create_app()
"""For `uvicorn fastapi_stream:app`: settings come from the environment at startup."""
