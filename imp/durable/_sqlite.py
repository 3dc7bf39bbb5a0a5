"""`imp.SQLiteJournal`: a run's steps in one SQLite file, one row per completed LM exchange or tool call.

Settings, and why: WAL (a writer never waits for readers; each step is one appended frame) with
`synchronous=NORMAL` (a commit is in the operating system's hands when `write_step` returns, so a
killed process loses nothing it recorded; only a power cut or an OS crash can lose the newest
commits, never corrupt the file). `synchronous="FULL"` also survives a power cut, at an fsync per
step. Each step commits on its own (autocommit): nothing recorded waits in a batch a kill would lose.
The file is created 0600 (SQLite gives its -wal and -shm files the same mode). The journal uses only
SQL that SQLite 3.7 already had.
"""

from __future__ import annotations

import json
import os
import sqlite3
import threading
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from imp.durable._pauses import (
    Body,
    Pause,
    check_resume,
    choose,
    claim_digest,
    pause_of,
    read_pause,
    segment_path,
    start_inputs,
    to_resume,
)
from imp.durable._records import value_digest
from imp.durable._run_lock import one_process
from imp.durable._scope import Recorded, RunLog, Scope, one_call
from imp.errors import JournalError, JournalMismatch, ResumeError
from imp.prediction import Prediction
from imp.programs.pending import Pending
from imp.runtime.journal import current_journal_scope

__all__ = ["FORMAT_VERSION", "JournalRun", "JournalStep", "SQLiteJournal", "check_run_id", "open_private"]

FORMAT_VERSION = 1
"""The journal format this imp writes; it reads this one and every older one."""
MAX_RECORD_BYTES = 64 * 1024 * 1024
"""A record larger than this is refused on reading (a journal may be written by anyone)."""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS imp_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS imp_runs (
    run_id TEXT PRIMARY KEY, program TEXT NOT NULL, inputs TEXT NOT NULL, status TEXT NOT NULL,
    created REAL NOT NULL, updated REAL NOT NULL);
CREATE TABLE IF NOT EXISTS imp_steps (
    run_id TEXT NOT NULL, seq INTEGER NOT NULL, key TEXT NOT NULL, kind TEXT NOT NULL,
    digest TEXT NOT NULL, body TEXT NOT NULL, PRIMARY KEY (run_id, key));
CREATE TABLE IF NOT EXISTS imp_pauses (
    run_id TEXT NOT NULL, n INTEGER NOT NULL, pending TEXT NOT NULL, claim TEXT, PRIMARY KEY (run_id, n));
"""
# imp_pauses came after format 1's first files: created on opening, it changes nothing an older imp
# reads (that imp replays a paused run to its pause, and cannot resume it by its run id).


@dataclass(frozen=True, slots=True)
class JournalRun:
    """One run in a journal: its id, program, status (`running`, `paused`, `finished`, `failed`) and step count."""

    run_id: str
    program: str
    status: str
    steps: int
    created: float
    updated: float


@dataclass(frozen=True, slots=True)
class JournalStep:
    """One recorded step: its number in the run (`seq`), key (its position), kind (`lm` or `tool`)."""

    seq: int
    key: str
    kind: str


def check_run_id(run_id: object) -> str:
    """A run id is a non-empty string of at most 200 characters."""
    if not isinstance(run_id, str) or not run_id or len(run_id) > 200:
        raise ValueError(f"run_id is a non-empty string of at most 200 characters, got {run_id!r}")
    return run_id


def open_private(path: Path) -> None:
    """Create the file readable and writable by its owner only, if it does not exist."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        os.close(os.open(path, os.O_CREAT | os.O_RDWR, 0o600))


class SQLiteJournal:
    """A durable record of runs in one SQLite file: `await imp.call(program, inputs, run_id="r-42",
    journal=imp.SQLiteJournal("runs.db"))` records each completed LM exchange and tool call; calling
    again with the same run id replays them and runs the rest live."""

    def __init__(self, path: str | os.PathLike[str], *, synchronous: Literal["NORMAL", "FULL"] = "NORMAL") -> None:
        if synchronous not in ("NORMAL", "FULL"):
            raise ValueError(
                f"synchronous is 'NORMAL' (a process kill loses nothing) or 'FULL' (nor a power cut), got {synchronous!r}"
            )
        self.path = Path(path)
        self.synchronous = synchronous
        self._lock = threading.Lock()
        self._db: sqlite3.Connection | None = None

    def __repr__(self) -> str:
        return f"SQLiteJournal({str(self.path)!r})"

    # --- the connection ---------------------------------------------------------------------

    def _connection(self) -> sqlite3.Connection:
        db = self._db
        if db is not None:
            return db
        with self._lock:
            if self._db is None:
                self._db = self._open()
            return self._db

    def _open(self) -> sqlite3.Connection:
        open_private(self.path)
        try:
            db = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False, timeout=30)
            db.execute("PRAGMA journal_mode=WAL")
            db.execute(f"PRAGMA synchronous={self.synchronous}")
            db.executescript(_SCHEMA)
            row = db.execute("SELECT value FROM imp_meta WHERE key = 'format'").fetchone()
        except sqlite3.DatabaseError as exc:
            raise JournalError(f"{self.path} is not a journal imp can open: {exc}") from None
        if row is None:
            db.execute("INSERT OR IGNORE INTO imp_meta VALUES ('format', ?)", (str(FORMAT_VERSION),))
        else:
            version = int(row[0]) if str(row[0]).isdigit() else -1
            if version < 1 or version > FORMAT_VERSION:
                db.close()
                raise JournalError(
                    f"{self.path} holds a journal of format {row[0]!r}; this imp reads formats 1 to {FORMAT_VERSION}"
                )
        return db

    def close(self) -> None:
        """Close the file (a later call opens it again)."""
        with self._lock:
            if self._db is not None:
                self._db.close()
                self._db = None

    async def record_step(
        self,
        run_id: str,
        seq: int,
        key: str,
        kind: str,
        digest: object,
        produce: Callable[[], Awaitable[object]],
    ) -> object:
        """Run the step live and append its body, committed before this returns."""
        body = await produce()
        if body is not None:
            self.write_step(run_id, seq, key, kind, digest, body)
        return body

    def write_step(self, run_id: str, seq: int, key: str, kind: str, digest: object, body: object) -> None:
        """Append one step, committed before this returns."""
        db = self._connection()
        row = (run_id, seq, key, kind, json.dumps(digest), json.dumps(body, ensure_ascii=False))
        with self._lock:
            db.execute("INSERT OR REPLACE INTO imp_steps VALUES (?, ?, ?, ?, ?, ?)", row)

    # --- a run ------------------------------------------------------------------------------

    async def run(
        self, run_id: str, program: str, inputs: Mapping[str, Any], body: Callable[[], Awaitable[object]]
    ) -> Any:
        """Run `body` as the run `run_id`: recorded steps are replayed, new ones recorded."""
        with self._only(check_run_id(run_id)):
            return await self._run(run_id, program, inputs, body)

    async def _run(
        self, run_id: str, program: str, inputs: Mapping[str, Any], body: Callable[[], Awaitable[Any]]
    ) -> Any:
        log = self.open_run(run_id, program, inputs)
        return await self._segment(log, 0, body)

    @contextmanager
    def _only(self, run_id: str) -> Iterator[None]:
        """One call of the run at a time: in this process, then across processes (`_run_lock`)."""
        self._connection()  # the journal's folder and file exist before the lock file beside them
        path = self.path.resolve()
        with one_call(str(path), run_id), one_process(path, "run", run_id):
            yield

    async def _segment(
        self,
        log: RunLog,
        segment: int,
        body: Callable[[], Awaitable[Any]],
        stands: Callable[[object], bool] | None = None,
    ) -> Any:
        """Run one segment of a run (0: the call with its inputs; n: its n-th resume) in its scope; keep
        the pause it ends with, and the run's status when it is the run's newest segment. A resume
        whose pause `stands` (it ran nothing and handed its pending turn back) releases that pause."""
        token = current_journal_scope.set(Scope(log, segment_path(segment)))
        try:
            result = await body()
        except BaseException:
            self._end(log.run_id, segment, "failed", None)
            raise
        finally:
            current_journal_scope.reset(token)
        if stands is not None and stands(result):
            self._release(log.run_id, segment - 1)
        else:
            pause = pause_of(result)
            self._end(log.run_id, segment, "finished" if pause is None else "paused", pause)
        if isinstance(result, Prediction):
            result = Prediction(result.fields, result.metadata.replace(replayed=log.replayed), complete=result.complete)
        return result

    def _end(self, run_id: str, segment: int, status: str, pause: dict[str, Any] | None) -> None:
        db = self._connection()
        with self._lock:
            db.execute("BEGIN IMMEDIATE")
            try:
                if pause is not None:  # a replayed segment finds its pause kept already
                    db.execute(
                        "INSERT OR IGNORE INTO imp_pauses VALUES (?, ?, ?, NULL)",
                        (run_id, segment, json.dumps(pause, ensure_ascii=False)),
                    )
                # Only the run's newest segment sets its status: replaying an earlier one changes nothing.
                db.execute(
                    "UPDATE imp_runs SET status = ?, updated = ? WHERE run_id = ? AND "
                    "(SELECT COUNT(*) FROM imp_pauses WHERE run_id = ? AND claim IS NOT NULL) = ?",
                    (status, time.time(), run_id, run_id, segment),
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    # --- a paused run ---------------------------------------------------------------------------

    async def resume(self, run_id: str, program: str, pending: object, decisions: object, body: Body) -> Any:
        """Resume the run `run_id`, paused awaiting approval, with these decisions: its newest pause (or
        `pending`, when given, checked to be it) runs on as the run's next segment, recorded like any
        run. The same decisions again replay that segment; a run id the journal does not hold, given
        `pending`, starts a new run from it."""
        check_run_id(run_id)
        given = check_resume(pending, decisions)
        assert isinstance(decisions, Mapping)
        with self._only(run_id):
            return await self._resume(run_id, program, given, decisions, body)

    async def _resume(
        self, run_id: str, program: str, given: Pending | None, decisions: Mapping[str, Any], body: Body
    ) -> Any:
        db = self._connection()
        with self._lock:
            row = db.execute("SELECT program, inputs, status FROM imp_runs WHERE run_id = ?", (run_id,)).fetchone()
        if given is not None and (row is None or row[1] == value_digest(start_inputs(given, decisions))):
            # A pending turn resumed under a run id of its own: a run whose inputs are the turn and the decisions.
            first = row is None
            return await self._run(
                run_id,
                program,
                start_inputs(given, decisions),
                lambda: body(given if first else Pending.load(given.dump())),
            )
        if row is None:
            raise ResumeError(f"no run {run_id!r} in {self.path} to resume; a run is started with its inputs")
        if row[0] != program:
            raise JournalMismatch(
                f"run {run_id!r} was recorded with the program {row[0]}, not {program}: resume it with its own program",
                run_id=run_id,
            )
        pause, claim = choose(run_id, str(row[2]), self._pauses(run_id), given, decisions)
        resumed = to_resume(pause, given, decisions, run_id, claim)
        if claim and not self._claim(run_id, pause.n, claim_digest(pause.data, decisions)):
            # Another call claimed it between the read and the write: it runs the resumed part now, and
            # running it here too would run its tools twice. Called again later, this call replays it.
            raise ResumeError(
                f"run {run_id!r}'s pause {pause.n} was resumed by another call just now; call again once it "
                "has finished (the same decisions replay what it did)"
            )
        segment = pause.n + 1
        log = self._log(run_id)
        before = log.next_seq

        def stands(result: object) -> bool:
            # The resume ran nothing and its turn still waits (a deadline that had passed): the pause
            # waits again, for these decisions or others, as after a refused resume.
            return (
                claim
                and log.next_seq == before
                and isinstance(result, Prediction)
                and result.metadata.pending is resumed
            )

        try:
            return await self._segment(log, segment, lambda: body(resumed), stands)
        except (ResumeError, TypeError):
            if claim and log.next_seq == before:  # refused before anything ran: the pause waits again
                self._release(run_id, pause.n)
            raise

    def _pauses(self, run_id: str) -> list[Pause]:
        db = self._connection()
        with self._lock:
            rows = db.execute(
                "SELECT n, pending, claim FROM imp_pauses WHERE run_id = ? ORDER BY n", (run_id,)
            ).fetchall()
        return [Pause(int(n), read_pause(text, run_id, int(n)), claim) for n, text, claim in rows]

    def _claim(self, run_id: str, n: int, claim: str) -> bool:
        db = self._connection()
        with self._lock:
            db.execute("BEGIN IMMEDIATE")
            try:
                done = db.execute(
                    "UPDATE imp_pauses SET claim = ? WHERE run_id = ? AND n = ? AND claim IS NULL", (claim, run_id, n)
                ).rowcount
                if done:
                    db.execute(
                        "UPDATE imp_runs SET status = 'running', updated = ? WHERE run_id = ?", (time.time(), run_id)
                    )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise
        return bool(done)

    def _release(self, run_id: str, n: int) -> None:
        db = self._connection()
        with self._lock:
            db.execute("BEGIN IMMEDIATE")
            db.execute("UPDATE imp_pauses SET claim = NULL WHERE run_id = ? AND n = ?", (run_id, n))
            db.execute("UPDATE imp_runs SET status = 'paused', updated = ? WHERE run_id = ?", (time.time(), run_id))
            db.execute("COMMIT")

    def pending(self, run_id: str) -> Pending | None:
        """The pending turn the run `run_id` waits with (its newest pause, not yet resumed), or None."""
        pauses = self._pauses(run_id)
        if not pauses or pauses[-1].claim is not None:
            return None
        newest = pauses[-1]
        return to_resume(newest, None, {}, run_id, True)

    def open_run(self, run_id: str, program: str, inputs: Mapping[str, Any]) -> RunLog:
        """The run's log: its recorded steps read once; a run recorded with other inputs is refused."""
        db = self._connection()
        digest = value_digest(inputs)
        now = time.time()
        with self._lock:
            row = db.execute("SELECT program, inputs, status FROM imp_runs WHERE run_id = ?", (run_id,)).fetchone()
            if row is None:
                db.execute(
                    "INSERT INTO imp_runs VALUES (?, ?, ?, 'running', ?, ?)", (run_id, program, digest, now, now)
                )
            rows = db.execute(
                "SELECT seq, key, kind, digest, body FROM imp_steps WHERE run_id = ? ORDER BY seq", (run_id,)
            ).fetchall()
        if row is not None and (row[0], row[1]) != (program, digest):
            what = f"the program ({row[0]} recorded, {program} now)" if row[0] != program else "the inputs"
            paused = " It is paused awaiting approval: resume it with decisions={...}." if row[2] == "paused" else ""
            raise JournalMismatch(
                f"run {run_id!r} was recorded with other {what.removeprefix('the ')}: {what} changed. "
                f"Give this call a new run id (journal.delete({run_id!r}) forgets the old run).{paused}",
                run_id=run_id,
            )
        return _log_of(self, run_id, rows)

    def _log(self, run_id: str) -> RunLog:
        db = self._connection()
        with self._lock:
            rows = db.execute(
                "SELECT seq, key, kind, digest, body FROM imp_steps WHERE run_id = ? ORDER BY seq", (run_id,)
            ).fetchall()
        return _log_of(self, run_id, rows)

    # --- looking at runs ----------------------------------------------------------------------

    def runs(self) -> list[JournalRun]:
        """Every run in the journal, oldest first."""
        db = self._connection()
        with self._lock:
            rows = db.execute(
                "SELECT r.run_id, r.program, r.status, COUNT(s.key), r.created, r.updated FROM imp_runs r "
                "LEFT JOIN imp_steps s ON s.run_id = r.run_id GROUP BY r.run_id ORDER BY r.created"
            ).fetchall()
        return [JournalRun(*row) for row in rows]

    def steps(self, run_id: str) -> list[JournalStep]:
        """A run's recorded steps in the order they completed."""
        db = self._connection()
        with self._lock:
            rows = db.execute(
                "SELECT seq, key, kind FROM imp_steps WHERE run_id = ? ORDER BY seq", (run_id,)
            ).fetchall()
        return [JournalStep(*row) for row in rows]

    def fork(self, run_id: str, new_run_id: str, *, before: int) -> None:
        """Start `new_run_id` as a copy of `run_id`'s steps numbered below `before`: called with the new
        id, the run replays those and runs the rest live (on the program and inputs given then)."""
        check_run_id(new_run_id)
        db = self._connection()
        with self._lock:
            if db.execute("SELECT 1 FROM imp_runs WHERE run_id = ?", (run_id,)).fetchone() is None:
                raise KeyError(f"no run {run_id!r} in {self.path}")
            if db.execute("SELECT 1 FROM imp_runs WHERE run_id = ?", (new_run_id,)).fetchone() is not None:
                raise ValueError(f"run {new_run_id!r} already exists in {self.path}; fork to a new id")
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute(
                    # A forked step is replayed without its request's digest checked: the fork exists
                    # to go on from there with a changed program.
                    "INSERT INTO imp_steps SELECT ?, seq, key, kind, '\"forked\"', body FROM imp_steps "
                    "WHERE run_id = ? AND seq < ?",
                    (new_run_id, run_id, before),
                )
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise

    def delete(self, run_id: str) -> None:
        """Forget a run and its steps (a run that is running, here or in another process, is
        `imp.JournalBusy`: it would go on recording into a run that no longer exists)."""
        db = self._connection()
        with self._only(run_id), self._lock:
            db.execute("BEGIN IMMEDIATE")
            try:
                db.execute("DELETE FROM imp_steps WHERE run_id = ?", (run_id,))
                db.execute("DELETE FROM imp_pauses WHERE run_id = ?", (run_id,))
                db.execute("DELETE FROM imp_runs WHERE run_id = ?", (run_id,))
                db.execute("COMMIT")
            except BaseException:
                db.execute("ROLLBACK")
                raise


def _log_of(journal: SQLiteJournal, run_id: str, rows: list[Any]) -> RunLog:
    log = RunLog(run_id, journal)
    for seq, key, kind, digest_text, body_text in rows:
        log.steps[key] = Recorded(seq, kind, _read(digest_text, run_id, key), _read(body_text, run_id, key))
        log.next_seq = max(log.next_seq, seq + 1)
    return log


def _read(text: object, run_id: str, key: str) -> Any:
    if not isinstance(text, str) or len(text) > MAX_RECORD_BYTES:
        raise JournalError(f"run {run_id!r}, step {key}: the record is not JSON text under {MAX_RECORD_BYTES} bytes")
    try:
        return json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise JournalError(f"run {run_id!r}, step {key}: the record does not read as JSON ({exc})") from None
