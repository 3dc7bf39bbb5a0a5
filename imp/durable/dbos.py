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
import json
import sqlite3
import sys
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

try:
    from dbos import DBOS, SetWorkflowID
except ImportError as exc:  # pragma: no cover - the extra's own message
    raise ImportError("imp.dbos runs programs as DBOS workflows: pip install 'imp[dbos]'") from exc

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
from imp.durable._scope import Recorded, RunLog, Scope, one_call
from imp.durable._sqlite import check_run_id
from imp.errors import JournalError, JournalMismatch, ResumeError
from imp.prediction import Prediction
from imp.programs.pending import Pending
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


def _recorded_steps(workflow_id: str) -> list[Any]:
    """The workflow's steps, read outside any workflow (inside one, DBOS would checkpoint the read)."""
    return list(DBOS.list_workflow_steps(workflow_id))


def _workflow_id(run_id: str, segment: int) -> str:
    """The DBOS workflow of a run's segment: the run id itself, then `<run id>/resume-<n>` for its n-th resume."""
    return run_id if segment == 0 else f"{run_id}/{segment_path(segment)}"


async def _load(workflow_id: str, run_id: str) -> RunLog:
    # run_in_executor copies no context variables: the read runs outside the workflow's context.
    steps = await asyncio.get_running_loop().run_in_executor(None, _recorded_steps, workflow_id)
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
async def _imp_run(program: str, run_id: str, segment: int = 0, claim: str | None = None) -> dict[str, Any]:
    """One segment of an imp run (0: the call with its inputs; n: its n-th resume, claimed by `claim`)."""
    workflow_id = _workflow_id(run_id, segment)
    with _lock:
        body = _bodies.get(workflow_id)
        if body is None:  # DBOS's recovery at launch: the run continues when it is called again
            ready = _waiting.setdefault(workflow_id, threading.Event())
    if body is None:
        # DBOS's recovery runs on its own event loop thread; the call that resumes the run comes from
        # the application's loop: a thread-safe flag, looked at every 50 ms, joins the two.
        while not ready.is_set():  # noqa: ASYNC110
            await asyncio.sleep(0.05)
        body = _bodies[workflow_id]
    log = await _load(workflow_id, run_id)
    # New steps take DBOS step numbers after every recorded one; recorded steps are found by name.
    for _ in range(log.next_seq - 1):
        DBOS.reserve_step()
    token = current_journal_scope.set(Scope(log, segment_path(segment)))
    try:
        result = await body()
    finally:
        current_journal_scope.reset(token)
    if isinstance(result, Prediction):
        result = Prediction(result.fields, result.metadata.replace(replayed=log.replayed), complete=result.complete)
    _results[workflow_id] = result
    # The pause a segment ends with is its workflow's output (redacted JSON): the next resume reads it.
    return {"program": program, "replayed": log.replayed, "pending": pause_of(result)}


class DBOSJournal:
    """Journaled runs as DBOS workflows: `imp.call(program, inputs, run_id=..., journal=imp.dbos.DBOSJournal())`.

    Construct `DBOS(config=...)` first. A run is the DBOS workflow of its run id; each LM exchange
    and tool call of it a DBOS step. A run that paused awaiting approval resumes by its id
    (`imp.call(program, run_id=..., journal=..., decisions={...})`) as the workflow `<run id>/resume-1`.
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
        with one_call("dbos", run_id):
            return await self._segment(run_id, 0, program, None, body)

    async def _segment(
        self, run_id: str, segment: int, program: str, claim: str | None, body: Callable[[], Awaitable[Any]]
    ) -> Any:
        url = _system_database_url()
        if url is not None:
            check_sqlite(url)
        workflow_id = _workflow_id(run_id, segment)
        status = await DBOS.get_workflow_status_async(workflow_id)
        if status is not None and status.name != "imp.run":
            raise JournalMismatch(
                f"workflow {workflow_id!r} is a DBOS workflow of {status.name}, not an imp run", run_id=run_id
            )
        with _lock:
            _bodies[workflow_id] = body
            recovered = _waiting.pop(workflow_id, None)
        try:
            if recovered is not None:  # DBOS's recovery started it: give it its body and wait
                recovered.set()
                handle: Any = await DBOS.retrieve_workflow_async(workflow_id)
            elif status is not None and status.status == "SUCCESS":
                return await _replay_finished(workflow_id, run_id, segment, body)
            else:
                with SetWorkflowID(workflow_id):
                    handle = await DBOS.start_workflow_async(_imp_run, program, run_id, segment, claim)
            await handle.get_result()
            if workflow_id in _results:
                return _results.pop(workflow_id)
            return await _replay_finished(workflow_id, run_id, segment, body)
        finally:
            with _lock:
                _bodies.pop(workflow_id, None)

    # --- a paused run ---------------------------------------------------------------------------

    async def resume(self, run_id: str, program: str, pending: object, decisions: object, body: Body) -> Any:
        """Resume the run `run_id`, paused awaiting approval, with these decisions: its newest pause (or
        `pending`, when given, checked to be it) runs on as the workflow `<run id>/resume-<n>`. The same
        decisions again replay it; a run id DBOS does not hold, given `pending`, starts a run from it."""
        check_run_id(run_id)
        given = check_resume(pending, decisions)
        assert isinstance(decisions, Mapping)
        with one_call("dbos", run_id):
            return await self._resume(run_id, program, given, decisions, body)

    async def _resume(
        self, run_id: str, program: str, given: Pending | None, decisions: Mapping[str, Any], body: Body
    ) -> Any:
        first = await DBOS.get_workflow_status_async(run_id)
        if given is not None:
            start = value_digest(start_inputs(given, decisions))
            if first is None or _claim_of(first) == start:
                # A pending turn resumed under a run id of its own: the run's claim is the turn and the decisions.
                fresh = first is None
                return await self._segment(
                    run_id, 0, program, start, lambda: body(given if fresh else Pending.load(given.dump()))
                )
        if first is None:
            raise ResumeError(f"no DBOS workflow {run_id!r} to resume; a run is started with its inputs")
        pauses, status = await _pauses(run_id)
        pause, claim = choose(run_id, status, pauses, given, decisions)
        resumed = to_resume(pause, given, decisions, run_id, claim)
        segment = pause.n + 1
        try:
            result = await self._segment(
                run_id, segment, program, claim_digest(pause.data, decisions), lambda: body(resumed)
            )
        except (ResumeError, TypeError):
            if claim and not await DBOS.list_workflow_steps_async(_workflow_id(run_id, segment)):
                # Refused before anything ran: the pause waits again.
                await DBOS.delete_workflow_async(_workflow_id(run_id, segment))
            raise
        if (
            claim
            and isinstance(result, Prediction)
            and result.metadata.pending is resumed
            and not await DBOS.list_workflow_steps_async(_workflow_id(run_id, segment))
        ):
            # The resume ran nothing and its turn still waits (a deadline that had passed): the pause
            # waits again, for these decisions or others, as after a refused resume.
            await DBOS.delete_workflow_async(_workflow_id(run_id, segment))
        return result

    async def pending(self, run_id: str) -> Pending | None:
        """The pending turn the run `run_id` waits with (its newest pause, not yet resumed), or None
        (a coroutine, as DBOS's own status calls are)."""
        pauses, _ = await _pauses(run_id)
        if not pauses or pauses[-1].claim is not None:
            return None
        return to_resume(pauses[-1], None, {}, run_id, True)


def _claim_of(status: Any) -> str | None:
    """The claim a segment's workflow was started with (its fourth argument)."""
    inputs = status.input or {}
    args = list(inputs.get("args") or ()) if isinstance(inputs, Mapping) else []
    kwargs = inputs.get("kwargs") or {} if isinstance(inputs, Mapping) else {}
    claim = args[3] if len(args) > 3 else kwargs.get("claim") if isinstance(kwargs, Mapping) else None
    return claim if isinstance(claim, str) else None


async def _pauses(run_id: str) -> tuple[list[Pause], str]:
    """A run's pauses (each segment's workflow that ended with a pending turn, and the claim of the one
    that resumed it), and the status of its newest segment in imp's words."""
    pauses: list[Pause] = []
    segment = 0
    status = await DBOS.get_workflow_status_async(run_id)
    word = "running"
    while status is not None:
        word = {"SUCCESS": "finished", "ERROR": "failed"}.get(status.status, "running")
        out = status.output if status.status == "SUCCESS" else None
        data = out.get("pending") if isinstance(out, Mapping) else None
        if data is None:
            break
        checked = read_pause(json.dumps(data), run_id, segment)  # DBOS read it; bounded here all the same
        status = await DBOS.get_workflow_status_async(_workflow_id(run_id, segment + 1))
        claim = None if status is None else _claim_of(status)
        pauses.append(Pause(segment, checked, claim))
        word = "paused"
        segment += 1
    return pauses, word


async def _replay_finished(workflow_id: str, run_id: str, segment: int, body: Callable[[], Awaitable[Any]]) -> Any:
    """A run that finished (in another process, or before): its result, replayed from its steps."""
    log = await _load(workflow_id, run_id)
    log.writer = _Finished()
    token = current_journal_scope.set(Scope(log, segment_path(segment)))
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
