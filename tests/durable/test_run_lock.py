"""One call of a run id at a time across processes: a second process calling a run that is running is
refused (it would run again what is not recorded yet), and a killed process lets go of its runs at once."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import imp
from imp.durable._run_lock import lock_path

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX record locks")

CHILD = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import imp

    journal_path, run_id, started, gate = sys.argv[1:5]

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
    prediction = imp.call_sync(agent, run_id=run_id, journal=imp.SQLiteJournal(journal_path), ticket="t")
    print(prediction.reply)
    """
)


def _start(tmp_path: Path, journal: Path, run_id: str) -> tuple[subprocess.Popen[str], Path, Path]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    started, gate = tmp_path / f"{run_id}.started", tmp_path / f"{run_id}.gate"
    child = subprocess.Popen(
        [sys.executable, str(script), str(journal), run_id, str(started), str(gate)],
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
        with pytest.raises(imp.JournalError, match="'shared' is running in another process"):
            await imp.call(_agent(), run_id="shared", journal=imp.SQLiteJournal(journal_path), ticket="t")
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
