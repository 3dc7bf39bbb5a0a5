"""Runs killed with SIGKILL at random points, then resumed from their journal.

Each attempt runs a batch of runs of a scenario (crash_child.py) concurrently in a child process,
each started at a random delay, kills the process with SIGKILL at a random moment (so at a different
point of each run), reads what the journal holds, runs the same run ids again to the end in a new
process and counts: the LM requests the resumed runs sent (exactly those the journal did not hold),
the tool runs (none of a call the journal holds) and each final result (equal to an uncrashed
run's). Children are forked from a server that has imported imp (and DBOS) already, and a batch
shares one process, so an attempt costs its runs and one journal start, not an interpreter start
and a DBOS launch per run.

The same runs go through three journals: imp's SQLite journal, DBOS on a SQLite file and DBOS on
Postgres (the DBOS ones in the DBOS tier, `make test-dbos`, which has DBOS installed and a Postgres
server at `IMP_DBOS_POSTGRES`). DBOS's SQLite file lives in shared memory (/dev/shm) where there is
one: a process kill leaves the operating system's buffers alone, so the disk's fsyncs test nothing
here and would cost most of the tier's time. `IMP_CRASH_RUNS` scales the runs per scenario: 1 gives
30 react turns, 30 composite programs, 10 evaluations of 1,000 rows and 30 turns paused twice for
approval (100 runs per journal); without it (`make test`) 5,
5, 1 and 5.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import random
import shutil
import signal
import sqlite3
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent
sys.path.insert(0, str(HERE))

import crash_child  # noqa: E402
from crash_server import APPROVAL_ROUNDS, CALLS, ROUNDS, CrashProvider  # noqa: E402

RUNS = {"react": 30, "composite": 30, "evaluate": 10, "approve": 30}
QUICK = {"react": 5, "composite": 5, "evaluate": 1, "approve": 5}
BATCH = {"react": 5, "composite": 5, "evaluate": 1, "approve": 5}
"""Runs per child process: killed together, each at its own point."""


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
    preload = ["imp", "imp.durable", "imp.evaluation", "crash_child"]
    try:  # the DBOS tier: DBOS and its database drivers imported once, not in every child
        import dbos  # noqa: F401

        preload += ["dbos", "dbos_child", "imp.durable.dbos", "sqlalchemy", "psycopg"]
    except ImportError:
        pass
    ctx.set_forkserver_preload(preload)
    return ctx


def _lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


JOURNALS = ["sqlite", "dbos-sqlite", "dbos-postgres"]
SESSION = uuid.uuid4().hex[:8]
"""Run ids differ between test sessions: a Postgres kept between them keeps their workflows."""


def _dbos_rows(journal: str, path: Path, run_id: str) -> list[tuple[str, str, Any]]:
    """The imp steps a DBOS system database holds for a run: (key, kind, body)."""
    # A run's segments: the workflow of its id, and `<id>/resume-<n>` for each resume after a pause.
    query = "SELECT function_name, output FROM {0}operation_outputs WHERE workflow_uuid = {1} OR workflow_uuid LIKE {1}"
    if journal == "dbos-postgres":
        import psycopg

        with psycopg.connect(os.environ["IMP_DBOS_POSTGRES"].replace("postgresql+psycopg", "postgresql")) as db:
            try:
                found = db.execute(query.format("dbos.", "%s"), (run_id, f"{run_id}/resume-%")).fetchall()
            except psycopg.errors.UndefinedTable:
                found = []
    else:
        if not path.exists():
            return []
        import pysqlite3.dbapi2 as bundled  # type: ignore[import-not-found]

        db = bundled.connect(path)
        try:
            found = db.execute(query.format("", "?"), (run_id, f"{run_id}/resume-%")).fetchall()
        except bundled.OperationalError:
            found = []
        finally:
            db.close()
    rows = []
    for name, output in found:
        value = json.loads(output) if isinstance(output, str) else None
        if isinstance(value, dict) and value.get("imp") == 1:
            rows.append((str(name), str(value["kind"]), value.get("body")))
    return rows


def _recorded(journal: str, path: Path, run_id: str) -> tuple[int, set[str]]:
    """The LM exchanges the journal holds for a run, and the idempotency keys of its tool calls that ran
    (a call recorded as waiting for approval did not run)."""
    rows: list[tuple[str, str, Any]]
    if journal != "sqlite":
        rows = _dbos_rows(journal, path, run_id)
    elif not path.exists():
        rows = []
    else:
        db = sqlite3.connect(path)
        try:
            found = db.execute("SELECT key, kind, body FROM imp_steps WHERE run_id = ?", (run_id,)).fetchall()
            rows = [(key, kind, json.loads(body)) for key, kind, body in found]
        except sqlite3.OperationalError:  # killed before the tables were made
            rows = []
        finally:
            db.close()
    ran = {f"{run_id}:{key}" for key, kind, body in rows if kind == "tool" and body.get("outcome") != "deferred"}
    return sum(1 for _, kind, _ in rows if kind == "lm"), ran


class Attempt:
    """One scenario's runs against one provider, journal and tool log."""

    def __init__(self, ctx: Any, provider: CrashProvider, scenario: str, journal: str, tmp: Path) -> None:
        self.ctx, self.provider, self.scenario, self.kind = ctx, provider, scenario, journal
        self.journal, self.log = tmp / "journal.db", tmp / "tools.log"
        self.out = tmp / "out"
        self.out.mkdir()
        self.extra: list[str] = []
        if journal == "dbos-sqlite":
            shm = Path("/dev/shm")
            # A container's /dev/shm may be small (64 MB under Docker): the runs' file takes about 20 MB.
            if shm.is_dir() and os.access(shm, os.W_OK) and shutil.disk_usage(shm).free > 256 * 1024 * 1024:
                self.journal = shm / f"imp-crash-{os.getpid()}-{tmp.name}.sqlite"
            self.extra = [journal, f"sqlite:///{self.journal}"]
        elif journal == "dbos-postgres":
            self.extra = [journal, os.environ["IMP_DBOS_POSTGRES"]]

    def start(self, runs: list[tuple[str, float]]) -> tuple[Any, Any]:
        planned = ",".join(f"{run_id}@{delay:.3f}" for run_id, delay in runs)
        argv = [
            self.scenario,
            self.provider.base_url,
            str(self.journal),
            planned,
            str(self.log),
            str(self.out),
            *self.extra,
        ]
        started = self.ctx.Event()
        process = self.ctx.Process(target=crash_child.run_in_process, args=(argv, started))
        process.start()
        return process, started

    def finish(self, run_ids: list[str]) -> dict[str, dict[str, Any]]:
        process, started = self.start([(run_id, 0.0) for run_id in run_ids])
        assert started.wait(120)
        process.join(600)
        assert process.exitcode == 0, f"{self.scenario} {run_ids} exited with {process.exitcode}"
        return {run_id: json.loads((self.out / f"{run_id}.json").read_text()) for run_id in run_ids}

    def killed(self, runs: list[tuple[str, float]], after: float) -> None:
        process, started = self.start(runs)
        assert started.wait(120)
        time.sleep(after)
        with contextlib.suppress(ProcessLookupError):  # a kill after the runs ended finds it gone
            os.kill(process.pid, signal.SIGKILL)
        process.join(30)

    def remove(self) -> None:
        if self.kind == "dbos-sqlite":
            for suffix in ("", "-journal", "-wal", "-shm"):
                with contextlib.suppress(FileNotFoundError):
                    os.remove(f"{self.journal}{suffix}")


def _available(journal: str) -> bool:
    if journal == "sqlite":
        return True
    try:
        import dbos  # noqa: F401
    except ImportError:
        return False
    return journal == "dbos-sqlite" or bool(os.environ.get("IMP_DBOS_POSTGRES"))


EXPECTED_TOOLS = {"react": ROUNDS * CALLS, "composite": ROUNDS * CALLS, "evaluate": 0, "approve": APPROVAL_ROUNDS * 3}


@pytest.mark.parametrize("journal", JOURNALS)
@pytest.mark.parametrize("scenario", ["react", "composite", "evaluate", "approve"])
def test_killed_runs_resume_without_repeating_recorded_steps(
    scenario: str, journal: str, provider: CrashProvider, forks: Any, tmp_path: Path
) -> None:
    if not _available(journal):
        pytest.skip(f"{journal} runs in the DBOS tier (make test-dbos)")
    # One Postgres database serves every test: run ids stay apart.
    run_prefix = f"{tmp_path.name}-{SESSION}-" if journal == "dbos-postgres" else ""
    attempt = Attempt(forks, provider, scenario, journal, tmp_path)
    try:
        _attempts(attempt, scenario, journal, provider, run_prefix)
    finally:
        attempt.remove()


def _attempts(attempt: Attempt, scenario: str, journal: str, provider: CrashProvider, run_prefix: str) -> None:
    began = time.monotonic()
    before = provider.count
    count, batch = runs_for(scenario), BATCH[scenario]
    # The uncrashed reference runs as a batch too, so its time is a batched run's (the kills' scale).
    references = attempt.finish([f"{run_prefix}reference-{i}" for i in range(batch)])
    duration = max(float(r.pop("elapsed")) for r in references.values())
    reference = references[f"{run_prefix}reference-0"]
    assert all(r == reference for r in references.values())
    assert (provider.count - before) % batch == 0
    lm_calls = (provider.count - before) // batch
    tool_lines = _lines(attempt.log)
    expected_tools = EXPECTED_TOOLS[scenario]
    assert len(tool_lines) == expected_tools * batch
    if scenario == "approve":  # each refund ran once, after its pause, with the arguments approved (half)
        refunds = [line.split(" refund ")[1] for line in tool_lines if " refund " in line]
        assert sorted(json.loads(r)["amount"] for r in refunds) == sorted([20.0, 20.5] * batch)
        assert reference["pauses"] == APPROVAL_ROUNDS
    rng = random.Random(f"{scenario}-{os.environ.get('IMP_CRASH_SEED', '1')}")
    totals = {"runs": 0, "recorded_lm": 0, "recorded_tools": 0, "lm_sent_again": 0, "tools_run_again": 0}
    for first in range(0, count, batch):
        run_ids = [f"{run_prefix}{scenario}-{n}" for n in range(first, min(count, first + batch))]
        # Each run is to be killed at a random point of its own: started that much before the one kill.
        points = [rng.uniform(0, duration * 1.1) for _ in run_ids]
        kill_at = max(points)
        attempt.killed([(run_id, kill_at - point) for run_id, point in zip(run_ids, points, strict=True)], kill_at)
        time.sleep(0.05)  # the provider counts a request once its body has arrived
        sent_before_resume = provider.count
        recorded = {run_id: _recorded(journal, attempt.journal, run_id) for run_id in run_ids}
        ran_before = len(_lines(attempt.log))
        results = attempt.finish(run_ids)
        sent_on_resume = provider.count - sent_before_resume
        resumed_lines = _lines(attempt.log)[ran_before:]
        resumed_tool_keys = [line.split(" ")[0] for line in resumed_lines]
        recorded_lm = sum(lm for lm, _ in recorded.values())
        recorded_tools = set().union(*(tools for _, tools in recorded.values()))
        again = recorded_tools & set(resumed_tool_keys)
        totals["runs"] += len(run_ids)
        totals["recorded_lm"] += recorded_lm
        totals["recorded_tools"] += len(recorded_tools)
        totals["lm_sent_again"] += sent_on_resume - (lm_calls * len(run_ids) - recorded_lm)
        totals["tools_run_again"] += len(again)
        assert not again, f"{run_ids}: recorded tool calls ran again: {sorted(again)}"
        assert sent_on_resume == lm_calls * len(run_ids) - recorded_lm, (
            f"{run_ids}: the resumed runs sent {sent_on_resume} requests; the journal held {recorded_lm} "
            f"of {lm_calls * len(run_ids)}"
        )
        for run_id in run_ids:
            # The resumed run ran exactly the calls the journal did not hold (one running at the kill runs again).
            mine = [key for key in resumed_tool_keys if key.startswith(f"{run_id}:")]
            held = recorded[run_id][1]
            assert len(mine) == expected_tools - len(held), f"{run_id}: ran {mine} with {sorted(held)} recorded"
            result = results[run_id]
            result.pop("elapsed")
            assert result == reference, f"{run_id}: {result} differs from the uncrashed run's"
            if scenario == "approve":  # every refund run, in either process, ran with the arguments approved
                lines = [line for line in _lines(attempt.log) if line.startswith(f"{run_id}:") and " refund " in line]
                refunds = {line.split(" ")[0]: json.loads(line.split(" refund ")[1])["amount"] for line in lines}
                assert sorted(refunds.values()) == [20.0, 20.5], f"{run_id}: refunds {lines}"
    print(
        f"\n{scenario} on {journal}: {totals} (an uncrashed run: {lm_calls} requests, {expected_tools} tool "
        f"runs, {duration:.2f} s; {time.monotonic() - began:.0f} s in all)"
    )
