"""One call of a run id, and one turn of a session, at a time: a second call of a run that is running
is refused (it would run again what is not recorded yet), a second turn of a session that has one
running too (it would keep the history without the first's turn), in one process and across
processes; a killed process lets go of its runs and sessions at once."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

import imp
from imp.durable._run_lock import lock_path

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX record locks")

CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import imp

    journal_path, run_id, started, gate, kind = sys.argv[1:6]

    @imp.tool
    def wait(order: str) -> str:
        '''Wait for the gate.'''
        Path(started).write_text("started")
        deadline = time.monotonic() + 60
        while not Path(gate).exists() and time.monotonic() < deadline:
            time.sleep(0.01)
        return f"{order}: done"

    lm = imp.ScriptedLM([{"tool_calls": [{"id": "w", "name": "wait", "arguments": {"order": "o1"}}]}, "finished"])
    agent = imp.react("ticket -> reply", [wait], lm=lm)
    if kind == "run":
        prediction = imp.call_sync(agent, run_id=run_id, journal=imp.SQLiteJournal(journal_path), ticket="t")
    else:
        prediction = imp.call_sync(agent, session_id=run_id, sessions=imp.SQLiteSessions(journal_path), ticket="t")
    print(prediction.reply)
    """
)


def _start(tmp_path: Path, journal: Path, run_id: str, kind: str = "run") -> tuple[subprocess.Popen[str], Path, Path]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    started, gate = tmp_path / f"{run_id}.started", tmp_path / f"{run_id}.gate"
    child = subprocess.Popen(
        [sys.executable, str(script), str(journal), run_id, str(started), str(gate), kind],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not started.exists():  # the child is inside its run, holding it
        assert child.poll() is None, child.communicate()
        assert time.monotonic() < deadline, "the child never started its run"
        time.sleep(0.01)
    return child, started, gate


def _agent(reply: str = "replayed") -> imp.Program:
    @imp.tool
    def wait(order: str) -> str:
        """Wait for the gate."""
        return f"{order}: done here"

    lm = imp.ScriptedLM([{"tool_calls": [{"id": "w", "name": "wait", "arguments": {"order": "o1"}}]}, reply])
    return imp.react("ticket -> reply", [wait], lm=lm)


async def test_a_run_running_in_another_process_is_refused_and_free_once_that_process_is_killed(tmp_path: Path) -> None:
    journal_path = tmp_path / "runs.db"
    child, _, _ = _start(tmp_path, journal_path, "shared")
    try:
        with pytest.raises(imp.JournalBusy, match="'shared' is running in another process") as caught:
            await imp.call(_agent(), run_id="shared", journal=imp.SQLiteJournal(journal_path), ticket="t")
        assert (caught.value.kind, caught.value.key) == ("run", "shared")
        # A run of another id is not held by it.
        other = await imp.call(_agent("other"), run_id="other", journal=imp.SQLiteJournal(journal_path), ticket="t")
        assert other.complete and other.reply == "other"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    # The killed process let go of the run: it goes on here at once, its recorded request replayed.
    resumed = await imp.call(_agent(), run_id="shared", journal=imp.SQLiteJournal(journal_path), ticket="t")
    assert resumed.complete and resumed.reply == "replayed" and resumed.metadata.replayed == 1


async def test_a_run_that_ended_in_another_process_replays_here(tmp_path: Path) -> None:
    journal_path = tmp_path / "runs.db"
    child, _, gate = _start(tmp_path, journal_path, "done")
    gate.write_text("go")
    out, err = child.communicate(timeout=60)
    assert child.returncode == 0, err
    assert out.strip() == "finished"
    again = await imp.call(_agent(), run_id="done", journal=imp.SQLiteJournal(journal_path), ticket="t")
    assert again.complete and again.reply == "finished" and again.metadata.replayed == 3


async def test_the_lock_file_is_private_holds_nothing_and_its_folder_is_made(tmp_path: Path) -> None:
    journal_path = tmp_path / "not" / "yet" / "runs.db"
    prediction = await imp.call(_agent("ok"), run_id="r", journal=imp.SQLiteJournal(journal_path), ticket="t")
    assert prediction.complete
    held = lock_path(journal_path.resolve())
    assert held.exists() and held.read_bytes() == b""
    assert stat.S_IMODE(os.stat(held).st_mode) == 0o600


class HeldLM(imp.ScriptedLM):
    """A scripted LM whose requests wait until `go` is set (and say when the first has arrived)."""

    def __init__(self, replies: list[object]) -> None:
        super().__init__(replies)
        self.arrived = anyio.Event()
        self.go = anyio.Event()

    async def request(self, messages: Any, **options: Any) -> Any:
        self.arrived.set()
        await self.go.wait()
        return await super().request(messages, **options)


async def test_a_second_turn_of_a_session_at_once_is_refused_and_the_first_is_kept(tmp_path: Path) -> None:
    store = imp.SQLiteSessions(tmp_path / "app.db")
    held = HeldLM([{"reply": "first"}])
    chat = imp.predict("message, history: History -> reply", lm=held)
    results: list[imp.Prediction] = []

    async def first() -> None:
        results.append(await imp.call(chat, message="one", session_id="u7", sessions=store))

    async with anyio.create_task_group() as group:
        group.start_soon(first)
        await held.arrived.wait()
        second = imp.predict("message, history: History -> reply", lm=imp.ScriptedLM([{"reply": "second"}]))
        with (
            anyio.fail_after(30),
            pytest.raises(imp.JournalBusy, match="session 'u7' has a turn running in this process already"),
        ):
            await imp.call(second, message="two", session_id="u7", sessions=imp.SQLiteSessions(tmp_path / "app.db"))
        # Another session, and a journaled run of the same id in the same file, are not held by it.
        other = imp.predict("message, history: History -> reply", lm=imp.ScriptedLM([{"reply": "b"}]))
        assert (await imp.call(other, message="x", session_id="u8", sessions=store)).reply == "b"
        run = imp.predict("message -> reply", lm=imp.ScriptedLM([{"reply": "r"}]))
        journal = imp.SQLiteJournal(tmp_path / "app.db")
        assert (await imp.call(run, message="x", run_id="u7", journal=journal)).reply == "r"
        held.go.set()
    assert [r.reply for r in results] == ["first"]
    assert [dict(step.fields) for step in store.history("u7")] == [{"message": "one", "reply": "first"}]
    later = imp.predict("message, history: History -> reply", lm=imp.ScriptedLM([{"reply": "second"}]))
    await imp.call(later, message="two", session_id="u7", sessions=store)  # once the first has ended
    assert [step.fields["reply"] for step in store.history("u7")] == ["first", "second"]


async def test_a_session_with_a_turn_in_another_process_is_refused_until_that_process_dies(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    child, _, _ = _start(tmp_path, path, "u7", kind="session")
    try:
        with pytest.raises(imp.JournalBusy, match="session 'u7' has a turn running in another process") as caught:
            await imp.call(_agent("here"), session_id="u7", sessions=imp.SQLiteSessions(path), ticket="t")
        assert (caught.value.kind, caught.value.key) == ("session", "u7")
        assert isinstance(caught.value, imp.JournalError)  # what callers caught before
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(30)
    here = await imp.call(_agent("here"), session_id="u7", sessions=imp.SQLiteSessions(path), ticket="t")
    assert here.complete and here.reply == "here"
    assert imp.SQLiteSessions(path).history("u7")[-1].fields["reply"] == "here"


async def test_a_run_or_a_session_that_is_running_cannot_be_deleted_under_it(tmp_path: Path) -> None:
    # Deleted while running, the run would go on recording into a run that no longer exists, and the
    # session's turn would keep the session again once it ended.
    journal, store = imp.SQLiteJournal(tmp_path / "app.db"), imp.SQLiteSessions(tmp_path / "app.db")
    held = HeldLM([{"reply": "run"}, {"reply": "turn"}])
    program = imp.predict("message, history: History -> reply", lm=held)

    async def run() -> None:
        await imp.call(program, message="m", history=imp.History(), run_id="r1", journal=journal)

    async def turn() -> None:
        await imp.call(program, message="m", session_id="s1", sessions=store)

    for start, delete, kind in ((run, journal.delete, "run"), (turn, store.delete, "session")):
        held.arrived, held.go = anyio.Event(), anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(start)
            await held.arrived.wait()
            with pytest.raises(imp.JournalBusy) as caught:
                delete(f"{kind[0]}1")
            assert caught.value.kind == kind
            held.go.set()
    assert [r.run_id for r in journal.runs()] == ["r1"] and store.sessions() == ["s1"]
    journal.delete("r1")  # once they have ended
    store.delete("s1")
    assert journal.runs() == [] and store.sessions() == []
