"""`imp.SQLiteSessions`: a conversation's `History` kept by id across restarts, in a SQLite file.

`await imp.call(program, inputs, session_id="user-7", sessions=store)` gives the program the
session's history as its `History` input and keeps the history with the new turn added. A tool
loop's turn is kept as its steps (its prediction's history); any other program's turn as one
conversation turn, its inputs and outputs. The store is a file a person may read: histories are
redacted before they are written, as in logs.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from imp.durable._run_lock import one_process
from imp.durable._scope import one_call
from imp.durable._sqlite import MAX_RECORD_BYTES, open_private
from imp.errors import JournalError
from imp.history import History, Step
from imp.prediction import Prediction

__all__ = ["SQLiteSessions"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS imp_sessions (
    session_id TEXT PRIMARY KEY, history TEXT NOT NULL, turns INTEGER NOT NULL, updated REAL NOT NULL);
"""


class SQLiteSessions:
    """Conversations kept by id in one SQLite file (the journal's file may hold them too)."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"SQLiteSessions({str(self.path)!r})"

    def _connection(self) -> sqlite3.Connection:
        with self._lock:
            if self._db is None:
                open_private(self.path)
                try:
                    db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
                    db.execute("PRAGMA journal_mode=WAL")
                    db.execute("PRAGMA synchronous=NORMAL")
                    db.executescript(_SCHEMA)
                except sqlite3.DatabaseError as exc:
                    raise JournalError(f"{self.path} is not a session store imp can open: {exc}") from None
                self._db = db
            return self._db

    def close(self) -> None:
        """Close the file (a later call opens it again)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    def history(self, session_id: str) -> History:
        """The session's history (empty for a session not seen yet)."""
        data = self.load(session_id)
        if data is None:
            return History()
        try:
            return History.load(data)
        except (ValueError, TypeError) as exc:
            raise JournalError(f"session {session_id!r}: the stored history does not read ({exc})") from None

    def load(self, session_id: str) -> dict[str, Any] | None:
        """The session's history as `History.dump()` gave it, or None for a session not seen yet
        (with `save`, the store `imp.acp.serve(..., store=...)` takes)."""
        _check_id(session_id)
        db = self._connection()
        with self._lock:
            row = db.execute("SELECT history FROM imp_sessions WHERE session_id = ?", (session_id,)).fetchone()
        if row is None:
            return None
        text = row[0]
        if not isinstance(text, str) or len(text) > MAX_RECORD_BYTES:
            raise JournalError(
                f"session {session_id!r}: the stored history is not JSON text under {MAX_RECORD_BYTES} bytes"
            )
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise JournalError(f"session {session_id!r}: the stored history does not read ({exc})") from None
        if not isinstance(data, dict):
            raise JournalError(f"session {session_id!r}: the stored history is not a history's dump")
        return data

    def save(self, session_id: str, history: History | Mapping[str, Any]) -> None:
        """Keep `history` (a History, or its dump) as the session's, redacted, replacing what was kept."""
        _check_id(session_id)
        if isinstance(history, Mapping):
            history = History.load(history)
        if not isinstance(history, History):
            raise TypeError(f"a session keeps an imp.History, got {type(history).__name__}")
        text = json.dumps(history.redact().dump(), ensure_ascii=False)
        db = self._connection()
        with self._lock:
            db.execute(
                "INSERT OR REPLACE INTO imp_sessions VALUES (?, ?, ?, ?)", (session_id, text, len(history), time.time())
            )

    def delete(self, session_id: str) -> None:
        """Forget a session (one with a turn running is `imp.JournalBusy`: the turn would keep it again)."""
        db = self._connection()
        with self._held(session_id), self._lock:
            db.execute("DELETE FROM imp_sessions WHERE session_id = ?", (session_id,))

    def sessions(self) -> list[str]:
        """The ids of the sessions kept, most recently used first."""
        db = self._connection()
        with self._lock:
            rows = db.execute("SELECT session_id FROM imp_sessions ORDER BY updated DESC").fetchall()
        return [row[0] for row in rows]

    async def run(
        self,
        session_id: str,
        program: object,
        inputs: dict[str, Any],
        turn: Callable[[dict[str, Any]], Awaitable[Prediction]],
        *,
        resumed: bool = False,
    ) -> Prediction:
        """One turn of the session: the program's history input filled, the new turn kept after it. A
        resumed turn (paused awaiting approval) holds its history: the session keeps what it ends with.
        One turn of a session at a time, in this process and across processes: a second turn at once
        is `imp.JournalBusy` (it would keep the history without the first's turn)."""
        _check_id(session_id)
        with self._held(session_id):
            return await self._turn(session_id, program, inputs, turn, resumed)

    @contextmanager
    def _held(self, session_id: str) -> Iterator[None]:
        """The session held by this call: in this process, then across processes (`_run_lock`)."""
        self._connection()  # the store's folder and file exist before the lock file beside them
        path = self.path.resolve()
        with one_call(str(path), session_id, "session"), one_process(path, "session", session_id):
            yield

    async def _turn(
        self,
        session_id: str,
        program: object,
        inputs: dict[str, Any],
        turn: Callable[[dict[str, Any]], Awaitable[Prediction]],
        resumed: bool,
    ) -> Prediction:
        if resumed:
            prediction = await turn(inputs)
            if prediction.metadata.history is not None:
                self.save(session_id, prediction.metadata.history)
            return prediction
        name = history_input(program)
        if name in inputs:
            raise TypeError(
                f"imp.call was given both session_id and the history input {name!r}: the session fills it; "
                "give one or the other"
            )
        history = self.history(session_id)
        prediction = await turn({**inputs, name: history})
        self.save(session_id, _after(history, inputs, prediction))
        return prediction


def history_input(program: object) -> str:
    """The name of the program's `History` input, which a session fills (a tool loop's is `history`)."""
    from imp.programs.react import ReAct
    from imp.programs.react_trajectory import ReActTrajectory

    signature = getattr(program, "signature", None)
    name = getattr(signature, "history_field", None)
    if isinstance(name, str):
        return name
    if isinstance(program, ReAct | ReActTrajectory):
        return "history"
    raise TypeError(
        f"{type(program).__name__} has no History input for a session to fill: declare one, "
        '`imp.signature("question, history: History -> answer")`'
    )


def _after(history: History, inputs: dict[str, Any], prediction: Prediction) -> History:
    """The session's history with this turn added: a loop's steps, or one conversation turn."""
    kept = prediction.metadata.history
    if kept is not None and len(kept) >= len(history) and list(kept[: len(history)]) == list(history):
        return kept
    return history.append(Step(fields={**inputs, **prediction.fields}))


def _check_id(session_id: object) -> None:
    if not isinstance(session_id, str) or not session_id or len(session_id) > 200:
        raise ValueError(f"session_id is a non-empty string of at most 200 characters, got {session_id!r}")
