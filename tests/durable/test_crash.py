"""Runs killed with SIGKILL at random points, then resumed from their journal.

Each attempt runs a scenario (crash_child.py) in a child process, kills it at a random moment of
its run, reads what the journal holds, runs the same run id again to the end and counts: the LM
requests the resumed run sent (exactly those the journal did not hold), the tool runs (none of a
call the journal holds) and the final result (equal to an uncrashed run's). Children are forked
from a server that has imported imp already, so an attempt costs its run, not an interpreter start.

The same runs go through three journals: imp's SQLite journal, DBOS on a SQLite file and DBOS on
Postgres (the DBOS ones in the DBOS tier, `make test-dbos`, which has DBOS installed and a Postgres
server at `IMP_DBOS_POSTGRES`). `IMP_CRASH_RUNS` scales the attempts per scenario: 1 gives 40, 40
and 20 (100 per journal); without it (`make test`) 2, 2 and 1.
"""

from __future__ import annotations

import contextlib
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
QUICK = {"react": 2, "composite": 2, "evaluate": 1}


def runs_for(scenario: str) -> int:
    given = os.environ.get("IMP_CRASH_RUNS")
    if given is None:
        return QUICK[scenario]
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


JOURNALS = ["sqlite", "dbos-sqlite", "dbos-postgres"]


def _dbos_rows(journal: str, path: Path, run_id: str) -> list[tuple[str, str]]:
    """The imp steps a DBOS system database holds for a run: (key, kind)."""
    query = "SELECT function_name, output FROM {}operation_outputs WHERE workflow_uuid = {}"
    if journal == "dbos-postgres":
        import psycopg

        with psycopg.connect(os.environ["IMP_DBOS_POSTGRES"].replace("postgresql+psycopg", "postgresql")) as db:
            try:
                found = db.execute(query.format("dbos.", "%s"), (run_id,)).fetchall()
            except psycopg.errors.UndefinedTable:
                found = []
    else:
        if not path.exists():
            return []
        import pysqlite3.dbapi2 as bundled  # type: ignore[import-not-found]

        db = bundled.connect(path)
        try:
            found = db.execute(query.format("", "?"), (run_id,)).fetchall()
        except bundled.OperationalError:
            found = []
        finally:
            db.close()
    rows = []
    for name, output in found:
        value = json.loads(output) if isinstance(output, str) else None
        if isinstance(value, dict) and value.get("imp") == 1:
            rows.append((str(name), str(value["kind"])))
    return rows


def _recorded(journal: str, path: Path, run_id: str) -> tuple[int, set[str]]:
    """The LM exchanges the journal holds for a run, and its tool calls' idempotency keys."""
    if journal != "sqlite":
        rows = _dbos_rows(journal, path, run_id)
    elif not path.exists():
        rows = []
    else:
        db = sqlite3.connect(path)
        try:
            rows = db.execute("SELECT key, kind FROM imp_steps WHERE run_id = ?", (run_id,)).fetchall()
        except sqlite3.OperationalError:  # killed before the tables were made
            rows = []
        finally:
            db.close()
    return sum(1 for _, kind in rows if kind == "lm"), {f"{run_id}:{key}" for key, kind in rows if kind == "tool"}


class Attempt:
    """One scenario's runs against one provider, journal and tool log."""

    def __init__(self, ctx: Any, provider: CrashProvider, scenario: str, journal: str, tmp: Path) -> None:
        self.ctx, self.provider, self.scenario, self.kind = ctx, provider, scenario, journal
        self.journal, self.log = tmp / "journal.db", tmp / "tools.log"
        self.tmp = tmp
        self.extra: list[str] = []
        if journal == "dbos-sqlite":
            self.extra = [journal, f"sqlite:///{self.journal}"]
        elif journal == "dbos-postgres":
            self.extra = [journal, os.environ["IMP_DBOS_POSTGRES"]]

    def start(self, run_id: str) -> tuple[Any, Any, Path]:
        out = self.tmp / f"{run_id}.json"
        argv = [self.scenario, self.provider.base_url, str(self.journal), run_id, str(self.log), str(out), *self.extra]
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
        del began, run_began
        result = json.loads(out.read_text())
        return result, float(result.pop("elapsed"))

    def killed(self, run_id: str, after: float) -> None:
        process, started, _ = self.start(run_id)
        assert started.wait(60)
        time.sleep(after)
        with contextlib.suppress(ProcessLookupError):  # a kill after the run ended finds it gone
            os.kill(process.pid, signal.SIGKILL)
        process.join(30)


def _available(journal: str) -> bool:
    if journal == "sqlite":
        return True
    try:
        import dbos  # noqa: F401
    except ImportError:
        return False
    return journal == "dbos-sqlite" or bool(os.environ.get("IMP_DBOS_POSTGRES"))


@pytest.mark.parametrize("journal", JOURNALS)
@pytest.mark.parametrize("scenario", ["react", "composite", "evaluate"])
def test_killed_runs_resume_without_repeating_recorded_steps(
    scenario: str, journal: str, provider: CrashProvider, forks: Any, tmp_path: Path
) -> None:
    if not _available(journal):
        pytest.skip(f"{journal} runs in the DBOS tier (make test-dbos)")
    # One Postgres database serves every test: run ids stay apart.
    run_prefix = f"{tmp_path.name}-" if journal == "dbos-postgres" else ""
    attempt = Attempt(forks, provider, scenario, journal, tmp_path)
    before = provider.count
    reference, duration = attempt.finish(f"{run_prefix}reference")
    lm_calls = provider.count - before
    tool_runs = len(_lines(attempt.log))
    expected_tools = {"react": ROUNDS * CALLS, "composite": ROUNDS * CALLS, "evaluate": 0}[scenario]
    assert tool_runs == expected_tools
    rng = random.Random(f"{scenario}-{os.environ.get('IMP_CRASH_SEED', '1')}")
    totals = {"attempts": 0, "recorded_lm": 0, "recorded_tools": 0, "lm_sent_again": 0, "tools_run_again": 0}
    for n in range(runs_for(scenario)):
        run_id = f"{run_prefix}{scenario}-{n}"
        attempt.killed(run_id, rng.uniform(0, duration * 1.1))
        time.sleep(0.05)  # the provider counts a request once its body has arrived
        sent_before_resume = provider.count
        recorded_lm, recorded_tools = _recorded(journal, attempt.journal, run_id)
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
    print(
        f"\n{scenario} on {journal}: {totals} (an uncrashed run: {lm_calls} requests, {tool_runs} tool runs, {duration:.2f} s)"
    )
