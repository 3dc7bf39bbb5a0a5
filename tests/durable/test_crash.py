"""Runs killed with SIGKILL at random points, then resumed from their journal.

Each attempt runs a scenario (crash_child.py) in a child process, kills it at a random moment of
its run, reads what the journal holds, runs the same run id again to the end and counts: the LM
requests the resumed run sent (exactly those the journal did not hold), the tool runs (none of a
call the journal holds) and the final result (equal to an uncrashed run's). Children are forked
from a server that has imported imp already, so an attempt costs its run, not an interpreter start.

`IMP_CRASH_RUNS` sets the attempts per scenario (`make test-durable` runs 40, 40 and 20, at least
100 in all; `make test` runs 2 of each).
"""

from __future__ import annotations

import json
import multiprocessing
import os
import random
import signal
import sqlite3
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import crash_child  # noqa: E402
from crash_server import CALLS, ROUNDS, CrashProvider  # noqa: E402

RUNS = {"react": 40, "composite": 40, "evaluate": 20}
QUICK = 2


def runs_for(scenario: str) -> int:
    given = os.environ.get("IMP_CRASH_RUNS")
    if given is None:
        return QUICK
    return max(1, round(RUNS[scenario] * float(given)))


@pytest.fixture(scope="module")
def provider() -> Iterator[CrashProvider]:
    server = CrashProvider().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def forks() -> Any:
    ctx = multiprocessing.get_context("forkserver")
    ctx.set_forkserver_preload(["imp", "imp.durable", "imp.evaluation", "crash_child"])
    return ctx


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def _recorded(journal: Path, run_id: str) -> tuple[int, set[str]]:
    """The LM exchanges the journal holds for a run, and its tool calls' idempotency keys."""
    if not journal.exists():
        return 0, set()
    db = sqlite3.connect(journal)
    try:
        rows = db.execute("SELECT key, kind FROM imp_steps WHERE run_id = ?", (run_id,)).fetchall()
    except sqlite3.OperationalError:  # killed before the tables were made
        rows = []
    finally:
        db.close()
    return sum(1 for _, kind in rows if kind == "lm"), {f"{run_id}:{key}" for key, kind in rows if kind == "tool"}


class Attempt:
    """One scenario's runs against one provider, journal and tool log."""

    def __init__(self, ctx: Any, provider: CrashProvider, scenario: str, tmp: Path) -> None:
        self.ctx, self.provider, self.scenario = ctx, provider, scenario
        self.journal, self.log = tmp / "journal.db", tmp / "tools.log"
        self.tmp = tmp

    def start(self, run_id: str) -> tuple[Any, Any, Path]:
        out = self.tmp / f"{run_id}.json"
        argv = [self.scenario, self.provider.base_url, str(self.journal), run_id, str(self.log), str(out)]
        started = self.ctx.Event()
        process = self.ctx.Process(target=crash_child.run_in_process, args=(argv, started))
        process.start()
        return process, started, out

    def finish(self, run_id: str) -> tuple[dict[str, Any], float]:
        began = time.monotonic()
        process, started, out = self.start(run_id)
        started.wait(60)
        run_began = time.monotonic()
        process.join(300)
        assert process.exitcode == 0, f"{self.scenario} {run_id} exited with {process.exitcode}"
        del began
        return json.loads(out.read_text()), time.monotonic() - run_began

    def killed(self, run_id: str, after: float) -> None:
        process, started, _ = self.start(run_id)
        assert started.wait(60)
        time.sleep(after)
        os.kill(process.pid, signal.SIGKILL)
        process.join(30)


@pytest.mark.parametrize("scenario", ["react", "composite", "evaluate"])
def test_killed_runs_resume_without_repeating_recorded_steps(
    scenario: str, provider: CrashProvider, forks: Any, tmp_path: Path
) -> None:
    attempt = Attempt(forks, provider, scenario, tmp_path)
    before = provider.count
    reference, duration = attempt.finish("reference")
    lm_calls = provider.count - before
    tool_runs = len(_lines(attempt.log))
    expected_tools = {"react": ROUNDS * CALLS, "composite": ROUNDS * CALLS, "evaluate": 0}[scenario]
    assert tool_runs == expected_tools
    rng = random.Random(f"{scenario}-{os.environ.get('IMP_CRASH_SEED', '1')}")
    totals = {"attempts": 0, "recorded_lm": 0, "recorded_tools": 0, "lm_sent_again": 0, "tools_run_again": 0}
    for n in range(runs_for(scenario)):
        run_id = f"{scenario}-{n}"
        attempt.killed(run_id, rng.uniform(0, duration * 1.1))
        time.sleep(0.05)  # the provider counts a request once its body has arrived
        sent_before_resume = provider.count
        recorded_lm, recorded_tools = _recorded(attempt.journal, run_id)
        ran_before = len(_lines(attempt.log))
        result, _ = attempt.finish(run_id)
        sent_on_resume = provider.count - sent_before_resume
        resumed_tool_keys = _lines(attempt.log)[ran_before:]
        again = recorded_tools & set(resumed_tool_keys)
        totals["attempts"] += 1
        totals["recorded_lm"] += recorded_lm
        totals["recorded_tools"] += len(recorded_tools)
        totals["lm_sent_again"] += sent_on_resume - (lm_calls - recorded_lm)
        totals["tools_run_again"] += len(again)
        assert not again, f"{run_id}: recorded tool calls ran again: {sorted(again)}"
        assert sent_on_resume == lm_calls - recorded_lm, (
            f"{run_id}: the resumed run sent {sent_on_resume} requests; the journal held {recorded_lm} of {lm_calls}"
        )
        assert len(resumed_tool_keys) == expected_tools - len(recorded_tools)
        if scenario == "evaluate":
            assert result == reference
        else:
            assert (result["fields"], result["complete"]) == (reference["fields"], reference["complete"])
    print(f"\n{scenario}: {totals} (an uncrashed run: {lm_calls} requests, {tool_runs} tool runs, {duration:.2f} s)")
