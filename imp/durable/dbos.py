"""imp programs as DBOS workflows (the `dbos` extra): each LM request and tool call a DBOS step.

DBOS (a library, no server of its own) keeps a workflow's steps in its system database, Postgres
for more than one machine or a SQLite file. With `imp.dbos.DBOSJournal` a journaled call,
`await imp.call(program, inputs, run_id="r-42", journal=journal)`, runs as the DBOS workflow
`run_id`: each completed LM exchange and tool call is a DBOS step (named by its position in the run,
its output the same JSON the SQLite journal keeps), so a crashed run resumes as DBOS workflows do:
on `DBOS.launch()` (DBOS's own recovery), or when called again with its run id.

Only the run id and the program's kind go into DBOS's database, and each step's JSON: the program,
its LM and its credentials never cross (the LM is the program's own, in this process). A run DBOS's
recovery starts at launch waits until it is called again with its run id, as a SQLite-journaled run
is resumed. Steps are matched by their position in the run, not by DBOS's step numbers, so the
calls of a step and the rows of an evaluation may finish in any order.
"""

from __future__ import annotations

import asyncio
import sqlite3
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

try:
    from dbos import DBOS, SetWorkflowID
except ImportError as exc:  # pragma: no cover - the extra's own message
    raise ImportError("imp.dbos runs programs as DBOS workflows: pip install 'imp[dbos]'") from exc

from imp.durable._scope import Recorded, RunLog, Scope
from imp.durable._sqlite import check_run_id
from imp.errors import JournalError, JournalMismatch
from imp.prediction import Prediction
from imp.runtime.journal import current_journal_scope

__all__ = ["MIN_SQLITE", "DBOSJournal", "bundled_sqlite", "check_sqlite"]

MIN_SQLITE = (3, 42, 0)
"""The SQLite DBOS's migrations need (they use `unixepoch('subsec')`, new in 3.42)."""
_STEP_FORMAT = 1

_bodies: dict[str, Callable[[], Awaitable[Any]]] = {}
"""The body of each run started in this process, by run id (DBOS stores only the run id)."""
_results: dict[str, Any] = {}
_waiting: dict[str, threading.Event] = {}
"""Runs DBOS's recovery started before this process called them again: each waits for its body."""
_lock = threading.Lock()


def bundled_sqlite() -> str:
    """Give this process pysqlite3-binary's SQLite (3.51) as `sqlite3`, for DBOS on a SQLite file when
    the Python links an older one. Call it before `DBOS(...)`; returns the SQLite version now used."""
    try:
        import pysqlite3
        import pysqlite3.dbapi2
    except ImportError:
        raise ImportError(
            "imp.dbos.bundled_sqlite() uses pysqlite3-binary (Linux x86-64 wheels): pip install pysqlite3-binary"
        ) from None
    sys.modules["sqlite3"] = pysqlite3
    sys.modules["sqlite3.dbapi2"] = pysqlite3.dbapi2
    return str(pysqlite3.dbapi2.sqlite_version)


def check_sqlite(url: str) -> None:
    """Refuse a SQLite system database when the SQLite this process uses is older than DBOS needs."""
    if not url.startswith("sqlite"):
        return
    module = sys.modules.get("sqlite3", sqlite3)
    version = tuple(getattr(module, "sqlite_version_info", (0, 0, 0)))
    if version < MIN_SQLITE:
        have = ".".join(map(str, version))
        raise JournalError(
            f"DBOS on a SQLite file needs SQLite >= 3.42 (its migrations use unixepoch('subsec')); this "
            f"Python's sqlite3 links SQLite {have}. Use Postgres (system_database_url='postgresql://...'), or "
            "call imp.dbos.bundled_sqlite() before DBOS(...) to use pysqlite3-binary's SQLite"
        )


class _DBOSWriter:
    """Each live step of a run as a DBOS step named by its position; its output the step's JSON."""

    async def record_step(
        self,
        run_id: str,
        seq: int,
        key: str,
        kind: str,
        digest: object,
        produce: Callable[[], Awaitable[object]],
    ) -> object:
        async def step() -> object:
            body = await produce()
            return None if body is None else {"imp": _STEP_FORMAT, "kind": kind, "digest": digest, "body": body}

        # DBOS retries nothing here: imp's clients retry what may be retried, and a tool is never retried.
        out = await DBOS.run_step_async({"name": key, "retries_allowed": False}, step)
        return out["body"] if isinstance(out, Mapping) else None


def _recorded_steps(run_id: str) -> list[Any]:
    """The workflow's steps, read outside any workflow (inside one, DBOS would checkpoint the read)."""
    return list(DBOS.list_workflow_steps(run_id))


async def _load(run_id: str) -> RunLog:
    # run_in_executor copies no context variables: the read runs outside the workflow's context.
    steps = await asyncio.get_running_loop().run_in_executor(None, _recorded_steps, run_id)
    log = RunLog(run_id, _DBOSWriter())
    newest = 0
    for info in steps:
        newest = max(newest, int(info["function_id"]))
        out = info.get("output")
        if isinstance(out, Mapping) and out.get("imp") == _STEP_FORMAT and info.get("error") is None:
            name = str(info["function_name"])
            log.steps[name] = Recorded(
                int(info["function_id"]), str(out.get("kind")), out.get("digest"), out.get("body")
            )
    log.next_seq = newest + 1
    return log


@DBOS.workflow(name="imp.run")  # type: ignore[untyped-decorator]
async def _imp_run(program: str, run_id: str) -> dict[str, Any]:
    with _lock:
        body = _bodies.get(run_id)
        if body is None:  # DBOS's recovery at launch: the run continues when it is called again
            ready = _waiting.setdefault(run_id, threading.Event())
    if body is None:
        # DBOS's recovery runs on its own event loop thread; the call that resumes the run comes from
        # the application's loop: a thread-safe flag, looked at every 50 ms, joins the two.
        while not ready.is_set():  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        body = _bodies[run_id]
    log = await _load(run_id)
    # New steps take DBOS step numbers after every recorded one; recorded steps are found by name.
    for _ in range(log.next_seq - 1):
        DBOS.reserve_step()
    token = current_journal_scope.set(Scope(log, ""))
    try:
        result = await body()
    finally:
        current_journal_scope.reset(token)
    if isinstance(result, Prediction):
        result = Prediction(result.fields, result.metadata.replace(replayed=log.replayed), complete=result.complete)
    _results[run_id] = result
    return {"program": program, "replayed": log.replayed}


class DBOSJournal:
    """Journaled runs as DBOS workflows: `imp.call(program, inputs, run_id=..., journal=imp.dbos.DBOSJournal())`.

    Construct `DBOS(config=...)` first. A run is the DBOS workflow of its run id; each LM exchange
    and tool call of it a DBOS step.
    """

    def __init__(self) -> None:
        url = _system_database_url()
        if url is not None:
            check_sqlite(url)

    def __repr__(self) -> str:
        return "DBOSJournal()"

    async def run(
        self, run_id: str, program: str, inputs: Mapping[str, Any], body: Callable[[], Awaitable[Any]]
    ) -> Any:
        """Run `body` as the DBOS workflow `run_id`: its recorded steps answered from DBOS, new ones run as steps."""
        check_run_id(run_id)
        url = _system_database_url()
        if url is not None:
            check_sqlite(url)
        status = await DBOS.get_workflow_status_async(run_id)
        if status is not None and status.name != "imp.run":
            raise JournalMismatch(
                f"workflow {run_id!r} is a DBOS workflow of {status.name}, not an imp run", run_id=run_id
            )
        with _lock:
            _bodies[run_id] = body
            recovered = _waiting.pop(run_id, None)
        try:
            if recovered is not None:  # DBOS's recovery started it: give it its body and wait
                recovered.set()
                handle: Any = await DBOS.retrieve_workflow_async(run_id)
            elif status is not None and status.status == "SUCCESS":
                return await _replay_finished(run_id, body)
            else:
                with SetWorkflowID(run_id):
                    handle = await DBOS.start_workflow_async(_imp_run, program, run_id)
            await handle.get_result()
            if run_id in _results:
                return _results.pop(run_id)
            return await _replay_finished(run_id, body)
        finally:
            with _lock:
                _bodies.pop(run_id, None)


async def _replay_finished(run_id: str, body: Callable[[], Awaitable[Any]]) -> Any:
    """A run that finished (in another process, or before): its result, replayed from its steps."""
    log = await _load(run_id)
    log.writer = _Finished()
    token = current_journal_scope.set(Scope(log, ""))
    try:
        result = await body()
    finally:
        current_journal_scope.reset(token)
    if isinstance(result, Prediction):
        result = Prediction(result.fields, result.metadata.replace(replayed=log.replayed), complete=result.complete)
    return result


class _Finished:
    """A finished workflow takes no new step: one it does not hold means the program changed."""

    async def record_step(
        self, run_id: str, seq: int, key: str, kind: str, digest: object, produce: Callable[[], Awaitable[object]]
    ) -> object:
        raise JournalMismatch(
            f"run {run_id!r} finished without a step {key}: the program or its inputs changed since it ran; "
            "give this call a new run id",
            run_id=run_id,
            step=key,
        )


def _system_database_url() -> str | None:
    try:
        from dbos._dbos import _get_dbos_instance

        config = _get_dbos_instance()._config
    except Exception:  # DBOS() not constructed yet: checked again when a run starts
        return None
    url = config.get("system_database_url")
    return url if isinstance(url, str) else None
