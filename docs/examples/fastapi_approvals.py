"""Approvals in a FastAPI service: a refund waits for a person, who decides later, maybe days later.

    cd docs/examples
    IMP_LM=openai:qwen3 IMP_BASE_URL=http://127.0.0.1:8000/v1 uvicorn fastapi_approvals:app

Endpoints:

    POST /tickets                      {"ticket": "..."} -> the answer, or the calls waiting for approval
    POST /approvals/{approval_id}      {"decisions": {call_id: {"allow": true} | {"allow": true, "arguments": {...}}
                                                      | {"deny": "why"}}} -> the answer, or the next calls waiting

A turn that pauses is kept in SQLite (`IMP_APPROVALS_DB`, default `approvals.db`) under a random id,
so the service may restart between the two requests. The pending turn never leaves the server: the
person decides on the calls the server shows, and the arguments that run are those (or the edited
ones, checked against the tool's schema again). Each pending turn is taken from the store once, in
one transaction, so two decisions posted at once cannot run a call twice; decisions that cannot be
used (a call left undecided, edited arguments that do not fit) put it back and answer 422.
"""

from __future__ import annotations

import json
import os
import secrets
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from fastapi import FastAPI, HTTPException
from pydantic import BaseModel

import imp

SIGNATURE = imp.signature("ticket -> reply")


@imp.tool(requires_approval=True)
def refund(order: str, amount: float) -> str:
    """Refund part of an order to the customer's card."""
    return f"refunded {amount:g} on {order}"


@imp.tool
def order_status(order: str) -> str:
    """Look up what an order cost and whether it was paid."""
    return f"{order}: 40.00, paid twice"


class PendingStore:
    """Pending turns by id in SQLite: put one, take one (read and deleted in one transaction)."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        with self._connect() as db:
            db.execute("CREATE TABLE IF NOT EXISTS pending (id TEXT PRIMARY KEY, data TEXT NOT NULL)")

    def _connect(self) -> sqlite3.Connection:
        return sqlite3.connect(self.path, timeout=10, isolation_level=None)

    def _put(self, approval_id: str, data: str) -> None:
        with self._connect() as db:
            db.execute("INSERT OR REPLACE INTO pending VALUES (?, ?)", (approval_id, data))

    def _take(self, approval_id: str) -> str | None:
        db = self._connect()
        try:
            db.execute("BEGIN IMMEDIATE")
            row = db.execute("SELECT data FROM pending WHERE id = ?", (approval_id,)).fetchone()
            db.execute("DELETE FROM pending WHERE id = ?", (approval_id,))
            db.execute("COMMIT")
        finally:
            db.close()
        return None if row is None else str(row[0])

    async def put(self, pending: imp.Pending) -> str:
        approval_id = secrets.token_urlsafe(16)
        await anyio.to_thread.run_sync(self._put, approval_id, json.dumps(pending.dump()))
        return approval_id

    async def put_back(self, approval_id: str, pending: imp.Pending) -> None:
        await anyio.to_thread.run_sync(self._put, approval_id, json.dumps(pending.dump()))

    async def take(self, approval_id: str) -> imp.Pending | None:
        data = await anyio.to_thread.run_sync(self._take, approval_id)
        return None if data is None else imp.Pending.load(json.loads(data))


class Ticket(BaseModel):
    ticket: str


class Decision(BaseModel):
    allow: bool = False
    arguments: dict[str, Any] | None = None
    deny: str | None = None

    def decision(self) -> imp.Allow | imp.Deny:
        if self.allow and self.deny is None:
            return imp.Allow(arguments=self.arguments)
        return imp.Deny(self.deny or "the reviewer declined it")


class Decisions(BaseModel):
    decisions: dict[str, Decision]


def create_app(lm: imp.LM | None = None, db_path: str | Path | None = None) -> FastAPI:
    """The service: its agent on `lm` (default: from `IMP_LM`), its pending turns in `db_path`."""
    state: dict[str, Any] = {}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        model = lm or imp.lm(os.environ.get("IMP_LM", "openai:gpt-5.4-mini"), base_url=os.environ.get("IMP_BASE_URL"))
        state["agent"] = imp.react(SIGNATURE, [order_status, refund], lm=model, max_iters=6)
        state["store"] = PendingStore(db_path or os.environ.get("IMP_APPROVALS_DB", "approvals.db"))
        yield

    app = FastAPI(lifespan=lifespan)

    async def answer(prediction: imp.Prediction) -> dict[str, Any]:
        pending = prediction.metadata.pending
        if pending is None:
            return {"status": "answered", "reply": prediction.reply, "complete": prediction.complete}
        approval_id = await state["store"].put(pending)
        calls = [{"id": c.id, "tool": c.tool, "arguments": c.arguments, "reason": c.reason} for c in pending.calls]
        return {"status": "awaiting_approval", "approval_id": approval_id, "calls": calls}

    @app.post("/tickets")
    async def start(body: Ticket) -> dict[str, Any]:
        with imp.deadline(30):
            return await answer(await imp.call(state["agent"], ticket=body.ticket))

    @app.post("/approvals/{approval_id}")
    async def decide(approval_id: str, body: Decisions) -> dict[str, Any]:
        pending = await state["store"].take(approval_id)
        if pending is None:
            raise HTTPException(404, "no such approval (already decided, or never made)")
        decisions = {call_id: d.decision() for call_id, d in body.decisions.items()}
        try:
            with imp.deadline(30):
                prediction = await imp.call(state["agent"], resume=pending, decisions=decisions)
        except imp.ResumeError as exc:  # nothing ran: the turn waits as it was
            await state["store"].put_back(approval_id, pending)
            raise HTTPException(422, str(exc)) from None
        return await answer(prediction)

    return app


app = create_app()
