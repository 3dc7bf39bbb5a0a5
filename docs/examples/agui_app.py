"""imp behind an AG-UI endpoint: a web page talks to an imp agent through the AG-UI event protocol.

    cd docs/examples
    IMP_LM=openai:qwen3 IMP_BASE_URL=http://127.0.0.1:8000/v1 uvicorn agui_app:app --port 8001

    POST /agui  an AG-UI `RunAgentInput` (thread, run, messages) -> the run's AG-UI events as
                server-sent events: RUN_STARTED, TEXT_MESSAGE_*, TOOL_CALL_*, STATE_SNAPSHOT,
                RUN_FINISHED (or RUN_ERROR)
    GET  /      a page that sends what you type and shows the answer and the tool calls as they come

A client that goes away stops the response, which cancels the run and its LM request. See
docs/agui.md.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

from ag_ui.core import RunAgentInput
from fastapi import FastAPI
from fastapi.responses import HTMLResponse, StreamingResponse

import imp
import imp.agui

PAGE = Path(__file__).with_name("agui_page.html")


@imp.tool
def stock(item: str) -> int:
    """How many of an item are in the warehouse."""
    return {"kettle": 3, "toaster": 0}.get(item.lower(), 0)


def default_program() -> imp.ReAct:
    """The agent, on the LM the environment names (IMP_LM, IMP_BASE_URL, IMP_API_KEY)."""
    lm = imp.lm(
        os.environ.get("IMP_LM", "openai:gpt-5.4-mini"),
        base_url=os.environ.get("IMP_BASE_URL") or None,
        api_key=os.environ.get("IMP_API_KEY") or None,
    )
    return imp.react("question -> answer", [stock], lm=lm)


def _question(body: RunAgentInput) -> str:
    """The text of the last user message."""
    for message in reversed(body.messages):
        if message.role == "user":
            content = message.content
            return content if isinstance(content, str) else " ".join(getattr(p, "text", "") for p in content)
    return ""


def create_app(program: imp.Program | None = None) -> FastAPI:
    """The service: `program` answers each run (default: `default_program()`, made on first use)."""
    app = FastAPI(title="imp over AG-UI")
    held: list[imp.Program] = [program] if program is not None else []

    @app.post("/agui")
    async def agui(body: RunAgentInput) -> StreamingResponse:
        if not held:
            held.append(default_program())
        parts = imp.stream(held[0], question=_question(body), deadline=60)
        events = imp.agui.events(parts, thread_id=body.thread_id, run_id=body.run_id)

        async def body_text() -> AsyncIterator[str]:
            async for line in imp.agui.encode(events):
                yield line

        return StreamingResponse(body_text(), media_type=imp.agui.CONTENT_TYPE)

    @app.get("/", response_class=HTMLResponse)
    async def page() -> str:
        return PAGE.read_text(encoding="utf-8")

    return app


app = create_app()  # the LM is made on the first run, from the environment
