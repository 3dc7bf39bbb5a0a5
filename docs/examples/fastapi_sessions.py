"""A chat service whose conversations outlive the process: imp sessions in a SQLite file.

Each conversation's history is kept by id (`imp.SQLiteSessions`): a redeploy, a crash or a second
worker process picks every conversation up where it was. Run it against any OpenAI-compatible server:

    cd docs/examples
    IMP_LM=openai:qwen3 IMP_BASE_URL=http://127.0.0.1:8000/v1 uvicorn fastapi_sessions:app

Settings, read from the environment when the app starts:

    IMP_LM         "provider:model" (default openai:gpt-5.4-mini)
    IMP_BASE_URL   an OpenAI-compatible server's base URL (default: the provider's own)
    IMP_API_KEY    the key (default: the provider's variable, such as OPENAI_API_KEY)
    IMP_SESSIONS   the SQLite file that keeps the conversations (default sessions.db)

Endpoints:

    POST   /chat/{session_id}   {"message": "..."} -> {"reply": "...", "turns": n}
                                (409 while another turn of that conversation is running)
    GET    /chat/{session_id}   the conversation so far: [{"message": ..., "reply": ...}, ...]
    DELETE /chat/{session_id}   forget it
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI, HTTPException
from pydantic import BaseModel, Field

import imp

CHAT = imp.signature(
    "message: str, history: History -> reply: str",
    instructions="You are a helpful assistant. Answer the user's message; the history is the conversation so far.",
)


class Turn(BaseModel):
    message: str = Field(min_length=1, max_length=20_000)


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    lm = imp.lm(
        os.environ.get("IMP_LM", "openai:gpt-5.4-mini"),
        base_url=os.environ.get("IMP_BASE_URL"),
        api_key=os.environ.get("IMP_API_KEY"),
    )
    app.state.program = imp.predict(CHAT, lm=lm)
    app.state.sessions = imp.SQLiteSessions(os.environ.get("IMP_SESSIONS", "sessions.db"))
    try:
        yield
    finally:
        app.state.sessions.close()
        await lm.aclose()


app = FastAPI(lifespan=lifespan)


@app.post("/chat/{session_id}")
async def chat(session_id: str, turn: Turn) -> dict[str, Any]:
    """One turn: the session's history goes in, the new turn is kept after it."""
    sessions: imp.SQLiteSessions = app.state.sessions
    try:
        prediction = await imp.call(app.state.program, message=turn.message, session_id=session_id, sessions=sessions)
    except imp.JournalBusy as busy:  # a message sent twice, or from a second tab: one turn at a time
        raise HTTPException(status_code=409, detail=str(busy)) from None
    return {"reply": prediction.reply, "turns": len(sessions.history(session_id))}


@app.get("/chat/{session_id}")
async def conversation(session_id: str) -> list[dict[str, Any]]:
    """The conversation so far, oldest turn first."""
    history = app.state.sessions.history(session_id)
    return [{"message": step.fields.get("message"), "reply": step.fields.get("reply")} for step in history]


@app.delete("/chat/{session_id}")
async def forget(session_id: str) -> dict[str, str]:
    app.state.sessions.delete(session_id)
    return {"deleted": session_id}
