"""A journaled run that paused awaiting approval, resumed by its run id.

The journal keeps the pending turn beside the run (status `paused`); `imp.call(program, run_id=...,
journal=..., decisions={...})` resumes it in any process, the resumed steps recorded as the run's next
segment, so a crash in them replays too. A missing decision never runs the call, the arguments that
run are the ones approved, and the pending data read from a journal is hostile input. Every program
that pauses (react with native and written calls, react_trajectory, function programs with tools),
every adapter, and streams.
"""

from __future__ import annotations

import json
import sqlite3
import stat
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

import imp
from imp.models.base import LMResponse
from imp.records import Message

SIG = imp.signature("ticket -> reply")
RAN: list[tuple[str, dict[str, Any], str | None]] = []


class Crash(BaseException):
    """Stands in for a killed process: nothing in imp catches it."""


class CrashingLM(imp.ScriptedLM):
    """A scripted LM whose request number `crash_at` (1-based) never returns."""

    def __init__(self, steps: Sequence[Any], crash_at: int | None = None, **options: Any) -> None:
        super().__init__(list(steps), **options)
        self.crash_at = crash_at
        self.sent = 0

    async def request(self, messages: Sequence[Message], **options: Any) -> LMResponse:
        self.sent += 1
        if self.sent == self.crash_at:
            raise Crash
        return await super().request(messages, **options)


CRASH_IN_REFUND: list[bool] = []


@imp.tool(requires_approval=True)
def refund(order: str, amount: float) -> str:
    """Refund part of an order."""
    RAN.append(("refund", {"order": order, "amount": amount}, imp.idempotency_key()))
    if CRASH_IN_REFUND:
        CRASH_IN_REFUND.pop()
        raise Crash
    return f"refunded {amount:g} on {order}"


@imp.tool
def lookup(order: str) -> str:
    """Look up an order."""
    RAN.append(("lookup", {"order": order}, imp.idempotency_key()))
    return f"{order}: paid 20"


def call(id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": id, "name": name, "arguments": arguments}


STEP = {"tool_calls": [call("a", "lookup", order="o1"), call("b", "refund", order="o1", amount=20)]}
SCRIPT = [STEP, "Refunded 10 on o1."]
EDIT = {"b": imp.Allow(arguments={"order": "o1", "amount": 10})}


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()
    CRASH_IN_REFUND.clear()


def ran(name: str) -> list[dict[str, Any]]:
    return [arguments for tool, arguments, _ in RAN if tool == name]


def agent(script: Sequence[Any], **options: Any) -> imp.ReAct:
    lm = options.pop("lm", None) or imp.ScriptedLM(list(script), tool_calling=options.pop("tool_calling", True))
    return imp.react(SIG, [lookup, refund], lm=lm, **options)


@pytest.fixture
def journal(tmp_path: Path) -> imp.SQLiteJournal:
    return imp.SQLiteJournal(tmp_path / "runs.db")


async def test_a_paused_run_keeps_its_pending_turn_and_resumes_by_its_run_id(journal: imp.SQLiteJournal) -> None:
    paused = await imp.call(agent(SCRIPT), ticket="Charged twice.", run_id="t1", journal=journal)
    assert paused.metadata.termination_reason == "awaiting_approval" and ran("refund") == []
    assert [r.status for r in journal.runs()] == ["paused"]
    kept = journal.pending("t1")
    assert kept is not None and kept.dump() == paused.metadata.pending.dump()

    lm = imp.ScriptedLM(SCRIPT[1:])
    done = await imp.call(agent([], lm=lm), run_id="t1", journal=journal, decisions=EDIT)
    assert done.complete and done.reply == "Refunded 10 on o1."
    assert ran("refund") == [{"order": "o1", "amount": 10.0}]  # the approved arguments, once
    assert len(lm.requests) == 1 and done.metadata.replayed == 0
    assert [r.status for r in journal.runs()] == ["finished"] and journal.pending("t1") is None
    keys = [(s.key, s.kind) for s in journal.steps("t1")]
    assert keys == [("1", "lm"), ("1.0:a", "tool"), ("1.1:b", "tool"), ("resume-1/0.0:b", "tool"), ("resume-1/1", "lm")]
    assert [key for _, _, key in RAN] == ["t1:1.0:a", "t1:resume-1/0.0:b"]
    # The model read the refund that ran, as an uninterrupted turn would have it.
    assert "refunded 10 on o1" in str(lm.requests[0].messages)

    # The same decisions again (a retried request) replay the resumed part: no request, no tool run.
    again = await imp.call(agent([]), run_id="t1", journal=journal, decisions=EDIT)
    assert again == done and again.metadata.replayed == 2 and len(RAN) == 2
    # Other decisions for a pause already resumed are refused: the first ones ran the refund.
    with pytest.raises(imp.JournalMismatch, match="other decisions"):
        await imp.call(agent([]), run_id="t1", journal=journal, decisions={"b": imp.Deny("no")})
    # Called with its inputs, the run answers its pause again, from the journal.
    first = await imp.call(agent([]), ticket="Charged twice.", run_id="t1", journal=journal)
    assert first.metadata.pending is not None and first.metadata.replayed == 3 and len(RAN) == 2
    assert [r.status for r in journal.runs()] == ["finished"]


async def test_resume_pending_under_the_same_run_id_goes_on_and_another_pending_is_refused(
    journal: imp.SQLiteJournal,
) -> None:
    paused = await imp.call(agent(SCRIPT), ticket="t", run_id="t2", journal=journal)
    other = await imp.call(agent(SCRIPT), ticket="another ticket")
    with pytest.raises(imp.JournalMismatch, match="not the one run 't2' waits with"):
        await imp.call(agent([]), run_id="t2", journal=journal, resume=other.metadata.pending, decisions=EDIT)
    assert ran("refund") == []
    pending = imp.Pending.load(json.loads(json.dumps(paused.metadata.pending.dump())))
    done = await imp.call(agent(SCRIPT[1:]), run_id="t2", journal=journal, resume=pending, decisions=EDIT)
    assert done.complete and ran("refund") == [{"order": "o1", "amount": 10.0}]
    # The same pending value again: the journal replays (the value's own once-only guard is the journal's).
    again = await imp.call(agent([]), run_id="t2", journal=journal, resume=pending, decisions=EDIT)
    assert again == done and len(ran("refund")) == 1


@pytest.mark.parametrize("decisions", [{}, {"a": imp.Allow()}, {"b": "yes"}, [], {"b": imp.Allow(arguments={"x": 1})}])
async def test_a_missing_or_unusable_decision_runs_nothing_and_the_pause_waits_again(
    journal: imp.SQLiteJournal, decisions: Any
) -> None:
    await imp.call(agent(SCRIPT), ticket="t", run_id="t3", journal=journal)
    with pytest.raises((imp.ResumeError, TypeError)):
        await imp.call(agent([]), run_id="t3", journal=journal, decisions=decisions)
    assert ran("refund") == [] and [r.status for r in journal.runs()] == ["paused"]
    done = await imp.call(agent(SCRIPT[1:]), run_id="t3", journal=journal, decisions=EDIT)
    assert done.complete and ran("refund") == [{"order": "o1", "amount": 10.0}]


@pytest.mark.parametrize("by", ["run_id", "pending"])
async def test_a_resume_whose_deadline_has_passed_leaves_the_pause_waiting(journal: imp.SQLiteJournal, by: str) -> None:
    await imp.call(agent(SCRIPT), ticket="t", run_id="t9", journal=journal)
    kept = journal.pending("t9")
    assert kept is not None
    with imp.deadline(0.01):
        time.sleep(0.05)  # noqa: ASYNC251 - no checkpoint: the deadline passes before the resume starts
        late = await imp.call(agent([]), run_id="t9", journal=journal, decisions=EDIT)
    assert late.metadata.termination_cause == "deadline_exceeded" and not late.complete and ran("refund") == []
    # The claim is released: the run still waits with the same pause, and the pending turn handed back
    # (or the same decisions by run id) resumes it once.
    assert [r.status for r in journal.runs()] == ["paused"]
    again = journal.pending("t9")
    assert again is not None and again.dump() == kept.dump() == late.metadata.pending.dump()
    resume = {"resume": late.metadata.pending} if by == "pending" else {}
    done = await imp.call(agent(SCRIPT[1:]), run_id="t9", journal=journal, decisions=EDIT, **resume)
    assert done.complete and ran("refund") == [{"order": "o1", "amount": 10.0}]
    assert [r.status for r in journal.runs()] == ["finished"] and journal.pending("t9") is None
    assert [s.key for s in journal.steps("t9")][-2:] == ["resume-1/0.0:b", "resume-1/1"]
    replay = await imp.call(agent([]), run_id="t9", journal=journal, decisions=EDIT)  # replayed, run once
    assert replay == done and len(ran("refund")) == 1


async def test_a_denial_never_runs_the_tool(journal: imp.SQLiteJournal) -> None:
    await imp.call(agent(SCRIPT), ticket="t", run_id="t4", journal=journal)
    lm = imp.ScriptedLM(["Not refunded."])
    done = await imp.call(agent([], lm=lm), run_id="t4", journal=journal, decisions={"b": imp.Deny("over the limit")})
    assert done.reply == "Not refunded." and ran("refund") == []
    assert "over the limit" in str(lm.requests[0].messages)


async def test_two_pauses_each_resumed_by_run_id_and_a_restart_replays_both(journal: imp.SQLiteJournal) -> None:
    second = {"tool_calls": [call("c", "refund", order="o2", amount=30)]}
    script = [STEP, second, "Both refunded."]
    paused = await imp.call(agent(script), ticket="t", run_id="t5", journal=journal)
    assert paused.metadata.pending.ids == ("b",)
    again = await imp.call(agent(script[1:]), run_id="t5", journal=journal, decisions={"b": imp.Allow()})
    assert again.metadata.pending.ids == ("c",) and [r.status for r in journal.runs()] == ["paused"]
    done = await imp.call(agent(script[2:]), run_id="t5", journal=journal, decisions={"c": imp.Allow()})
    assert done.reply == "Both refunded." and ran("refund") == [
        {"order": "o1", "amount": 20.0},
        {"order": "o2", "amount": 30.0},
    ]
    # A new process that lost track: the inputs, then each pause's decisions, all from the journal.
    restarted = agent([])
    p = await imp.call(restarted, ticket="t", run_id="t5", journal=journal)
    p = await imp.call(restarted, run_id="t5", journal=journal, decisions={"b": imp.Allow()})
    p = await imp.call(restarted, run_id="t5", journal=journal, decisions={"c": imp.Allow()})
    assert p == done and len(ran("refund")) == 2
    assert [s.key for s in journal.steps("t5")][-2:] == ["resume-2/0.0:c", "resume-2/1"]


async def test_a_crash_in_the_resumed_part_replays_it_without_repeating_a_step(journal: imp.SQLiteJournal) -> None:
    script = [STEP, {"tool_calls": [call("d", "lookup", order="o3")]}, "Refunded 10 on o1."]
    await imp.call(agent(script), ticket="t", run_id="t6", journal=journal)
    crashing = CrashingLM(script[1:], crash_at=2)  # the resumed part's second request never returns
    with pytest.raises(Crash):
        await imp.call(agent([], lm=crashing), run_id="t6", journal=journal, decisions=EDIT)
    assert [r.status for r in journal.runs()] == ["failed"]
    lm = imp.ScriptedLM(script[2:])
    done = await imp.call(agent([], lm=lm), run_id="t6", journal=journal, decisions=EDIT)
    assert done.reply == "Refunded 10 on o1." and len(lm.requests) == 1  # only the interrupted request
    assert ran("refund") == [{"order": "o1", "amount": 10.0}] and ran("lookup") == [{"order": "o1"}, {"order": "o3"}]
    assert done.metadata.replayed == 3  # the refund, the resumed request and its lookup


async def test_a_crash_while_the_approved_tool_runs_runs_it_again_with_the_same_key(journal: imp.SQLiteJournal) -> None:
    await imp.call(agent(SCRIPT), ticket="t", run_id="t7", journal=journal)
    CRASH_IN_REFUND.append(True)
    with pytest.raises(BaseException):  # noqa: B017 - the Crash, maybe wrapped by the task group
        await imp.call(agent(SCRIPT[1:]), run_id="t7", journal=journal, decisions=EDIT)
    # The decisions are kept: others are refused, since the refund may have done its work.
    with pytest.raises(imp.JournalMismatch):
        await imp.call(agent(SCRIPT[1:]), run_id="t7", journal=journal, decisions={"b": imp.Deny("no")})
    done = await imp.call(agent(SCRIPT[1:]), run_id="t7", journal=journal, decisions=EDIT)
    assert done.complete
    keys = [key for tool, _, key in RAN if tool == "refund"]
    assert keys == ["t7:resume-1/0.0:b"] * 2  # at least once, with one idempotency key to deduplicate by


async def test_runs_that_are_not_paused_are_refused_by_name(journal: imp.SQLiteJournal) -> None:
    with pytest.raises(imp.ResumeError, match="no run 'nope'"):
        await imp.call(agent([]), run_id="nope", journal=journal, decisions=EDIT)
    await imp.call(agent(["Nothing to refund."]), ticket="t", run_id="t8", journal=journal)
    with pytest.raises(imp.ResumeError, match="not paused awaiting approval \\(it is finished\\)"):
        await imp.call(agent([]), run_id="t8", journal=journal, decisions=EDIT)
    with pytest.raises(TypeError, match="never pauses"):
        await imp.call(imp.predict(SIG, lm=imp.ScriptedLM([])), run_id="t8", journal=journal, decisions=EDIT)
    with pytest.raises(TypeError, match="decisions= goes with resume=pending"):
        await imp.call(agent([]), decisions=EDIT)
    await imp.call(agent(SCRIPT), ticket="t", run_id="t9", journal=journal)
    with pytest.raises(imp.JournalMismatch, match="program"):
        await imp.call(
            imp.react_trajectory(SIG, [lookup, refund], lm=imp.ScriptedLM([])),
            run_id="t9",
            journal=journal,
            decisions=EDIT,
        )
    with pytest.raises(TypeError, match="inputs from the pending"):
        await imp.call(agent([]), {"ticket": "other"}, run_id="t9", journal=journal, decisions=EDIT)
    assert ran("refund") == [] and journal.pending("t9") is not None


async def test_a_pending_turn_resumed_under_a_new_run_id_is_a_run_of_its_own(journal: imp.SQLiteJournal) -> None:
    paused = await imp.call(agent(SCRIPT), ticket="t")
    pending = paused.metadata.pending
    done = await imp.call(agent(SCRIPT[1:]), run_id="fresh", journal=journal, resume=pending, decisions=EDIT)
    again = await imp.call(agent([]), run_id="fresh", journal=journal, resume=pending, decisions=EDIT)
    assert done.complete and again == done and again.metadata.replayed == 2 and len(ran("refund")) == 1


# --- every program that pauses, every adapter, streams ---------------------------------------------

TEMPLATE = imp.TemplateAdapter(
    [imp.system("Handle the ticket. {instruction}"), imp.turns(), imp.user("Ticket: {ticket}")]
)


@pytest.mark.parametrize(
    "adapter",
    [imp.ChatAdapter(), imp.JSONAdapter(), imp.XMLAdapter(), TEMPLATE],
    ids=["chat", "json", "xml", "template"],
)
@pytest.mark.parametrize("tool_calling", [True, False], ids=["native", "written"])
async def test_each_adapter_and_written_calls_resume_by_run_id(
    journal: imp.SQLiteJournal, adapter: imp.Adapter, tool_calling: bool
) -> None:
    if adapter is TEMPLATE and not tool_calling:
        pytest.skip("a template spells no written tool calls (tool calls need a model that calls tools natively)")
    script = [STEP, {"reply": "Refunded 10 on o1."}]
    paused = await imp.call(
        agent(script, adapter=adapter, tool_calling=tool_calling), ticket="t", run_id="a", journal=journal
    )
    ids = paused.metadata.pending.ids
    assert len(ids) == 1 and ran("refund") == []
    decisions = {ids[0]: imp.Allow(arguments={"order": "o1", "amount": 10})}
    crashing = CrashingLM(script[1:], crash_at=1, tool_calling=tool_calling)
    with pytest.raises(Crash):
        await imp.call(agent([], lm=crashing, adapter=adapter), run_id="a", journal=journal, decisions=decisions)
    done = await imp.call(
        agent(script[1:], adapter=adapter, tool_calling=tool_calling), run_id="a", journal=journal, decisions=decisions
    )
    assert done.reply == "Refunded 10 on o1." and done.metadata.adapter == adapter.name
    assert ran("refund") == [{"order": "o1", "amount": 10.0}] and done.metadata.replayed == 1


def _trajectory_step(name: str, **arguments: Any) -> dict[str, Any]:
    return {"next_thought": f"use {name}", "next_tool_name": name, "next_tool_args": arguments}


async def test_react_trajectory_resumes_by_run_id(journal: imp.SQLiteJournal) -> None:
    script = [
        _trajectory_step("lookup", order="o1"),
        _trajectory_step("refund", order="o1", amount=20),
        _trajectory_step("finish"),
        {"reasoning": "done", "reply": "Refunded 10."},
    ]
    program = lambda steps: imp.react_trajectory(SIG, [lookup, refund], lm=imp.ScriptedLM(steps))  # noqa: E731
    paused = await imp.call(program(script), ticket="t", run_id="tr", journal=journal)
    assert paused.metadata.pending.program == "react_trajectory"
    (waiting,) = paused.metadata.pending.ids
    decisions = {waiting: imp.Allow(arguments={"order": "o1", "amount": 10})}
    done = await imp.call(program(script[2:]), run_id="tr", journal=journal, decisions=decisions)
    assert done.reply == "Refunded 10." and ran("refund") == [{"order": "o1", "amount": 10.0}]
    again = await imp.call(program([]), run_id="tr", journal=journal, decisions=decisions)
    assert again == done and len(ran("refund")) == 1


async def test_function_programs_with_tools_resume_by_run_id(journal: imp.SQLiteJournal) -> None:
    def handler(steps: Sequence[Any]) -> Any:
        @imp.fn(lm=imp.ScriptedLM(list(steps)), tools=[lookup, refund])
        async def handle(ticket: str) -> str:
            """Handle the ticket."""
            reply: str = imp.out()
            return reply

        return handle

    paused = await imp.call(handler(SCRIPT), ticket="t", run_id="fn", journal=journal)
    assert paused.metadata.termination_reason == "awaiting_approval"
    done = await imp.call(handler(SCRIPT[1:]), run_id="fn", journal=journal, decisions=EDIT)
    assert done.reply == "Refunded 10 on o1." and ran("refund") == [{"order": "o1", "amount": 10.0}]


async def test_streams_pause_and_resume_by_run_id(journal: imp.SQLiteJournal) -> None:
    parts = [p async for p in imp.stream(agent(SCRIPT), ticket="t", run_id="s", journal=journal)]
    assert parts[-1].kind == "pending" and journal.pending("s") is not None
    rest = [p async for p in imp.stream(agent(SCRIPT[1:]), run_id="s", journal=journal, decisions=EDIT)]
    assert [p.kind for p in rest if p.kind in ("tool_result", "final")] == ["tool_result", "final"]
    assert rest[-1].prediction.reply == "Refunded 10 on o1."
    replayed = [p async for p in imp.stream(agent([]), run_id="s", journal=journal, decisions=EDIT)]
    assert replayed[-1].prediction == rest[-1].prediction and len(ran("refund")) == 1


# --- what the journal keeps, read as hostile input -------------------------------------------------


async def test_the_kept_pending_turn_is_redacted_and_a_redacted_argument_never_runs(tmp_path: Path) -> None:
    secret = "sk-proj-" + "Zx9Yw8Vu" * 6
    journal = imp.SQLiteJournal(tmp_path / "runs.db")
    step = {"tool_calls": [call("b", "refund", order=f"o1 {secret}", amount=20)]}
    paused = await imp.call(agent([step, "Refunded."]), ticket="t", run_id="x", journal=journal)
    assert secret in json.dumps(paused.metadata.pending.dump())  # the live pending turn, shown to the person
    journal.close()
    for name in ("runs.db", "runs.db-wal"):
        path = tmp_path / name
        if path.exists():
            assert secret.encode() not in path.read_bytes() and stat.S_IMODE(path.stat().st_mode) == 0o600
    with pytest.raises(imp.ResumeError, match="keeps redacted"):
        await imp.call(agent([]), run_id="x", journal=journal, decisions={"b": imp.Allow()})
    assert ran("refund") == []
    done = await imp.call(
        agent(["Refunded."]), run_id="x", journal=journal, resume=paused.metadata.pending, decisions={"b": imp.Allow()}
    )
    assert done.complete and ran("refund") == [{"order": f"o1 {secret}", "amount": 20.0}]


def _tamper(path: Path, pending: str) -> None:
    db = sqlite3.connect(path)
    db.execute("UPDATE imp_pauses SET pending = ?", (pending,))
    db.commit()
    db.close()


def _kept(path: Path) -> dict[str, Any]:
    db = sqlite3.connect(path)
    (text,) = db.execute("SELECT pending FROM imp_pauses").fetchone()
    db.close()
    data: dict[str, Any] = json.loads(text)
    return data


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda d: "not json", imp.JournalError),
        (lambda d: "[" * 100_000 + "]" * 100_000, imp.JournalError),
        (lambda d: json.dumps([1, 2]), imp.JournalError),
        (lambda d: " " * (16 * 1024 * 1024 + 1), imp.JournalError),
        (lambda d: json.dumps({**d, "version": 99}), imp.JournalError),
        (lambda d: json.dumps({**d, "calls": [d["calls"][0]] * 2000}), imp.JournalError),
        (lambda d: json.dumps({**d, "calls": [{**d["calls"][0], "tool": "os.system"}]}), imp.ResumeError),
        (lambda d: json.dumps({**d, "calls": [{**d["calls"][0], "id": "a"}]}), imp.ResumeError),
        (lambda d: json.dumps({**d, "inputs": {"__reduce__": "os.system"}}), imp.ResumeError),
    ],
)
async def test_a_tampered_pending_turn_in_the_journal_runs_nothing(
    tmp_path: Path, change: Any, error: type[Exception]
) -> None:
    journal = imp.SQLiteJournal(tmp_path / "runs.db")
    await imp.call(agent(SCRIPT), ticket="t", run_id="h", journal=journal)
    journal.close()
    _tamper(tmp_path / "runs.db", change(_kept(tmp_path / "runs.db")))
    before = list(RAN)
    tampered = imp.SQLiteJournal(tmp_path / "runs.db")
    with pytest.raises(error):
        await imp.call(agent(SCRIPT[1:]), run_id="h", journal=tampered, decisions={"b": imp.Allow()})
    assert before == RAN


# --- across processes ------------------------------------------------------------------------------

PROCESS = textwrap.dedent(
    """
    import json, sys
    import anyio, imp

    journal = imp.SQLiteJournal(sys.argv[2])

    @imp.tool(requires_approval=True)
    def refund(order: str, amount: float) -> str:
        '''Refund part of an order.'''
        with open(sys.argv[3], "a") as f:
            f.write(f"{order} {amount:g} {imp.idempotency_key()}\\n")
        return f"refunded {amount:g}"

    lm = imp.ScriptedLM([
        {"tool_calls": [{"id": "r1", "name": "refund", "arguments": {"order": "o1", "amount": 20}}]},
        "Refunded.",
    ][int(sys.argv[4]):])
    agent = imp.react("ticket -> reply", [refund], lm=lm)

    async def main() -> None:
        if sys.argv[1] == "start":
            paused = await imp.call(agent, ticket="Charged twice.", run_id="p-1", journal=journal)
            print(json.dumps(list(paused.metadata.pending.ids)))
        else:
            shown = journal.pending("p-1")  # what the person is shown (None once the run was resumed)
            edited = {"r1": imp.Allow(arguments={"order": "o1", "amount": 7})}
            done = await imp.call(agent, run_id="p-1", journal=journal, decisions=edited)
            asked = None if shown is None else dict(shown.calls[0].arguments)
            print(json.dumps({"reply": done.reply, "complete": done.complete, "shown": asked}))

    anyio.run(main)
    """
)


def test_a_run_paused_in_one_process_resumes_by_its_run_id_in_another(tmp_path: Path) -> None:
    script, db, log = tmp_path / "agent.py", tmp_path / "runs.db", tmp_path / "refunds.txt"
    script.write_text(PROCESS)
    run = lambda *argv: subprocess.run(  # noqa: E731
        [sys.executable, str(script), *argv], capture_output=True, text=True, timeout=120
    )
    first = run("start", str(db), str(log), "0")
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout) == ["r1"] and not log.exists()
    second = run("resume", str(db), str(log), "1")
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout) == {"reply": "Refunded.", "complete": True, "shown": {"order": "o1", "amount": 20}}
    assert log.read_text() == "o1 7 p-1:resume-1/0.0:r1\n"
    third = run("resume", str(db), str(log), "2")  # the same request again: replayed, nothing runs
    assert third.returncode == 0, third.stderr
    assert json.loads(third.stdout) == {"reply": "Refunded.", "complete": True, "shown": None}
    assert log.read_text() == "o1 7 p-1:resume-1/0.0:r1\n"


async def test_a_session_turn_that_paused_is_kept_whole_once_resumed(tmp_path: Path) -> None:
    journal = imp.SQLiteJournal(tmp_path / "app.db")
    sessions = imp.SQLiteSessions(tmp_path / "app.db")
    paused = await imp.call(agent(SCRIPT), ticket="t", run_id="u1", journal=journal, session_id="u", sessions=sessions)
    assert paused.metadata.pending is not None
    done = await imp.call(
        agent(SCRIPT[1:]), run_id="u1", journal=journal, decisions=EDIT, session_id="u", sessions=sessions
    )
    assert done.complete and sessions.history("u") == done.metadata.history
    assert [s.fields.get("reply") for s in sessions.history("u")][-1] == "Refunded 10 on o1."
    # The session's next turn reads the whole of it.
    nxt = imp.ScriptedLM(["Anything else?"])
    await imp.call(agent([], lm=nxt), ticket="thanks", session_id="u", sessions=sessions)
    assert "refunded 10 on o1" in str(nxt.requests[0].messages)


async def test_two_calls_resuming_one_pause_at_once_run_the_approved_call_once(tmp_path: Path) -> None:
    """The same approval taken twice at once (a double-clicked button): one call resumes the run, the
    other is refused; called again once the first has ended, it replays."""
    import anyio

    first = imp.SQLiteJournal(tmp_path / "runs.db")
    await imp.call(agent(SCRIPT), ticket="t", run_id="race", journal=first)
    outcomes: list[str] = []

    async def resume(journal: imp.SQLiteJournal) -> None:
        try:
            await imp.call(agent(SCRIPT[1:]), run_id="race", journal=journal, decisions=EDIT)
            outcomes.append("resumed")
        except (imp.ResumeError, imp.JournalError) as error:
            assert "just now" in str(error) or "running in this process already" in str(error)
            outcomes.append("refused")

    async with anyio.create_task_group() as group:
        for journal in (imp.SQLiteJournal(tmp_path / "runs.db"), imp.SQLiteJournal(tmp_path / "runs.db")):
            group.start_soon(resume, journal)
    assert sorted(outcomes) == ["refused", "resumed"]
    assert ran("refund") == [{"order": "o1", "amount": 10.0}]
    again = await imp.call(agent([]), run_id="race", journal=first, decisions=EDIT)
    assert again.complete and len(ran("refund")) == 1
