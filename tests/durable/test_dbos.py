"""imp.dbos on a real Postgres (`IMP_DBOS_POSTGRES`, started by .ci/postgres) in the DBOS tier: runs as
DBOS workflows, each LM exchange and tool call a DBOS step; nothing secret in DBOS's database; the
SQLite DBOS needs, checked. Killed-process recovery is tests/durable/test_crash.py's, on the same tier."""

from __future__ import annotations

import os
import sys
import types
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

pytest.importorskip("dbos")

import imp
import imp.durable.dbos as imp_dbos

POSTGRES = os.environ.get("IMP_DBOS_POSTGRES")
SESSION = uuid.uuid4().hex[:8]
"""Run ids differ between test sessions: a Postgres kept between them keeps their workflows."""
SECRET = "sk-proj-" + "Qw3rTy12" * 6


def test_dbos_on_an_old_sqlite_is_refused_naming_the_sqlite_it_needs(monkeypatch: pytest.MonkeyPatch) -> None:
    old = types.SimpleNamespace(sqlite_version_info=(3, 40, 1))
    monkeypatch.setitem(sys.modules, "sqlite3", old)
    with pytest.raises(imp.JournalError, match=r"needs SQLite >= 3\.42.*links SQLite 3\.40\.1.*bundled_sqlite"):
        imp_dbos.check_sqlite("sqlite:///runs.sqlite")
    imp_dbos.check_sqlite("postgresql://localhost/db")  # Postgres does not depend on it
    new = types.SimpleNamespace(sqlite_version_info=(3, 51, 1))
    monkeypatch.setitem(sys.modules, "sqlite3", new)
    imp_dbos.check_sqlite("sqlite:///runs.sqlite")


@pytest.fixture(scope="module")
def dbos() -> Iterator[Any]:
    if not POSTGRES:
        pytest.skip("no Postgres: set IMP_DBOS_POSTGRES (make test-dbos under .ci/run does)")
    from dbos import DBOS
    from dbos._serialization import DBOSPortableJSONSerializer

    DBOS(config={"name": "imp-test", "system_database_url": POSTGRES, "serializer": DBOSPortableJSONSerializer()})
    DBOS.launch()
    yield DBOS
    DBOS.destroy()


class Counter:
    def __init__(self) -> None:
        self.runs: list[str | None] = []

    def tool(self) -> imp.Tool:
        @imp.tool
        async def lookup(order: str) -> str:
            """Look up an order."""
            self.runs.append(imp.idempotency_key())
            return f"{order}: shipped"

        return lookup


def agent(counter: Counter, script: list[Any]) -> imp.ReAct:
    lm = imp.ScriptedLM(script)
    return imp.react("question -> answer", tools=[counter.tool()], lm=lm)


SCRIPT = [
    {"tool_calls": [{"name": "lookup", "arguments": {"order": o}} for o in ("A", "B", "C")]},
    "All shipped.",
]


async def test_a_run_is_a_workflow_of_steps_and_a_finished_one_replays(dbos: Any, tmp_path: Any) -> None:
    counter = Counter()
    journal = imp_dbos.DBOSJournal()
    run_id = f"dbos-{tmp_path.name}-{SESSION}"
    first = await imp.call(agent(counter, SCRIPT), question="where?", run_id=run_id, journal=journal)
    assert first.answer == "All shipped." and len(counter.runs) == 3
    assert all(key is not None and key.startswith(f"{run_id}:") for key in counter.runs)
    steps = await dbos.list_workflow_steps_async(run_id)
    names = sorted(s["function_name"] for s in steps)
    assert names == ["1", "1.0:call_1_0", "1.1:call_1_1", "1.2:call_1_2", "2"]
    status = await dbos.get_workflow_status_async(run_id)
    assert status.status == "SUCCESS" and status.name == "imp.run"

    again = await imp.call(agent(counter, []), question="where?", run_id=run_id, journal=journal)
    assert again == first and again.metadata.replayed == 5 and len(counter.runs) == 3

    with pytest.raises(imp.JournalMismatch):
        changed = imp.react(
            imp.signature("question -> answer", instructions="Be brief."), tools=[counter.tool()], lm=imp.ScriptedLM([])
        )
        await imp.call(changed, question="where?", run_id=run_id, journal=journal)


async def test_nothing_secret_reaches_dbos_database(dbos: Any, tmp_path: Any) -> None:
    import psycopg

    @imp.tool
    def login(user: str, password: str) -> str:
        """Log in."""
        return f"token {SECRET}"

    script = [{"tool_calls": [{"name": "login", "arguments": {"user": "u", "password": SECRET}}]}, f"Done: {SECRET}"]
    program = imp.react("question -> answer", tools=[login], lm=imp.ScriptedLM(script))
    run_id = f"secret-{tmp_path.name}-{SESSION}"
    await imp.call(program, question="go", run_id=run_id, journal=imp_dbos.DBOSJournal())
    with psycopg.connect(POSTGRES or "") as db:
        rows = db.execute(
            "SELECT function_name, output FROM dbos.operation_outputs WHERE workflow_uuid = %s", (run_id,)
        ).fetchall()
        status = db.execute(
            "SELECT inputs, output FROM dbos.workflow_status WHERE workflow_uuid = %s", (run_id,)
        ).fetchall()
    assert rows and status
    assert SECRET not in repr(rows) + repr(status)


@imp.tool(requires_approval=True)
def refund(order: str, amount: float) -> str:
    """Refund part of an order."""
    REFUNDS.append((order, amount, imp.idempotency_key()))
    return f"refunded {amount:g} on {order}"


REFUNDS: list[tuple[str, float, str | None]] = []
PAUSING = [
    {"tool_calls": [{"id": "b", "name": "refund", "arguments": {"order": "o1", "amount": 20}}]},
    {"tool_calls": [{"id": "c", "name": "refund", "arguments": {"order": "o2", "amount": 30}}]},
    "Both refunded.",
]


async def test_a_paused_run_resumes_by_its_run_id_as_workflows_of_its_segments(dbos: Any, tmp_path: Any) -> None:
    journal = imp_dbos.DBOSJournal()
    run_id = f"pause-{tmp_path.name}-{SESSION}"
    gated = lambda script: imp.react("ticket -> reply", [refund], lm=imp.ScriptedLM(script))  # noqa: E731
    paused = await imp.call(gated(PAUSING), ticket="t", run_id=run_id, journal=journal)
    assert paused.metadata.pending.ids == ("b",) and REFUNDS == []
    assert (await journal.pending(run_id)).dump() == paused.metadata.pending.dump()
    edit = {"b": imp.Allow(arguments={"order": "o1", "amount": 10})}
    again = await imp.call(gated(PAUSING[1:]), run_id=run_id, journal=journal, decisions=edit)
    assert again.metadata.pending.ids == ("c",) and [("o1", 10.0, f"{run_id}:resume-1/0.0:b")] == REFUNDS
    done = await imp.call(gated(PAUSING[2:]), run_id=run_id, journal=journal, decisions={"c": imp.Allow()})
    assert done.reply == "Both refunded." and len(REFUNDS) == 2 and (await journal.pending(run_id)) is None
    for segment in ("resume-1", "resume-2"):
        status = await dbos.get_workflow_status_async(f"{run_id}/{segment}")
        assert status.status == "SUCCESS" and status.name == "imp.run"
    # The same decisions replay; other ones are refused; the inputs answer the first pause again.
    replayed = await imp.call(gated([]), run_id=run_id, journal=journal, decisions=edit)
    assert replayed.metadata.pending.ids == ("c",) and len(REFUNDS) == 2
    with pytest.raises(imp.JournalMismatch, match="other decisions"):
        await imp.call(gated([]), run_id=run_id, journal=journal, decisions={"c": imp.Deny("no")})
    first = await imp.call(gated([]), ticket="t", run_id=run_id, journal=journal)
    assert first.metadata.pending.ids == ("b",) and len(REFUNDS) == 2
    with pytest.raises(imp.ResumeError, match="no DBOS workflow"):
        await imp.call(gated([]), run_id=f"none-{tmp_path.name}-{SESSION}", journal=journal, decisions=edit)


async def test_refused_decisions_leave_a_dbos_pause_waiting(dbos: Any, tmp_path: Any) -> None:
    journal = imp_dbos.DBOSJournal()
    run_id = f"refused-{tmp_path.name}-{SESSION}"
    gated = lambda script: imp.react("ticket -> reply", [refund], lm=imp.ScriptedLM(script))  # noqa: E731
    await imp.call(gated(PAUSING), ticket="t", run_id=run_id, journal=journal)
    before = len(REFUNDS)
    with pytest.raises(imp.ResumeError, match="no decision"):
        await imp.call(gated([]), run_id=run_id, journal=journal, decisions={})
    assert (await journal.pending(run_id)) is not None and len(REFUNDS) == before
    done = await imp.call(gated(PAUSING[1:]), run_id=run_id, journal=journal, decisions={"b": imp.Deny("no")})
    assert done.metadata.pending.ids == ("c",) and len(REFUNDS) == before


async def test_a_resume_whose_deadline_has_passed_leaves_a_dbos_pause_waiting(
    dbos: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    journal = imp_dbos.DBOSJournal()
    run_id = f"late-{tmp_path.name}-{SESSION}"
    gated = lambda script: imp.react("ticket -> reply", [refund], lm=imp.ScriptedLM(script))  # noqa: E731
    await imp.call(gated(PAUSING), ticket="t", run_id=run_id, journal=journal)
    before = len(REFUNDS)
    # The deadline passes once the segment's workflow has started, as the program reads it (an
    # `imp.deadline` already passed before the call cuts DBOS's own calls first: DeadlineExceeded).
    monkeypatch.setattr(sys.modules["imp.programs.react._program"], "deadline_passed", lambda: True)
    late = await imp.call(gated([]), run_id=run_id, journal=journal, decisions={"b": imp.Allow()})
    monkeypatch.undo()
    assert late.metadata.termination_cause == "deadline_exceeded" and len(REFUNDS) == before
    kept = await journal.pending(run_id)
    assert kept is not None and kept.dump() == late.metadata.pending.dump()
    assert await dbos.get_workflow_status_async(f"{run_id}/resume-1") is None  # the pause is not claimed
    done = await imp.call(gated(PAUSING[1:]), run_id=run_id, journal=journal, decisions={"b": imp.Allow()})
    assert done.metadata.pending.ids == ("c",) and len(REFUNDS) == before + 1
