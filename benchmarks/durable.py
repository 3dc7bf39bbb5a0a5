"""What a journal costs: per recorded step on SQLite beside a DBOS step on Postgres, and nothing without one.

One run of a `react` turn on a zero-latency LM (`imp.StaticLM`): `--steps` steps, each with two tool
calls, then the answer, so a run records 3 x steps + 1 steps (LM exchanges and tool calls). Each
round runs the turn without a journal, with `imp.SQLiteJournal` (a new run id: every step recorded),
replayed from it (the same run id again: every step answered from the journal), and, when DBOS is
installed and `--postgres URL` given, with `imp.dbos.DBOSJournal` on that Postgres (and on a SQLite
file with pysqlite3-binary's SQLite when `--dbos-sqlite`). The cost per step is (journaled run -
plain run) / steps recorded, per round; the table gives the median and p90 over the rounds.

    .venv/bin/python benchmarks/durable.py                        # imp's journal only
    .venv-dbos/bin/python benchmarks/durable.py --postgres postgresql://postgres@127.0.0.1:5432/bench --dbos-sqlite
    .venv/bin/python benchmarks/durable.py --instructions REF     # a call without a journal, now and at git REF

`--instructions REF` counts, with callgrind, the instructions of a sequential `await imp.call(predict)`
without a journal in this tree and in a checkout of REF (the commit before the journal): the hooks a
journal adds (one context-variable read per call, per request and per tool call) must cost nothing
measurable. Counted instructions do not drift with the machine's load as wall time does.
"""

from __future__ import annotations

import argparse
import functools
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import anyio  # noqa: E402 - after the sys.path fix above

import imp  # noqa: E402


def agent(steps: int) -> imp.ReAct:
    @imp.tool
    def lookup(order: str) -> str:
        """Look up an order."""
        return f"{order}: shipped"

    def handler(messages: list[Any], options: Any) -> Any:
        done = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        if done < steps:
            return {"tool_calls": [{"name": "lookup", "arguments": {"order": f"{done}-{i}"}} for i in range(2)]}
        return "All shipped."

    return imp.react("question -> answer", tools=[lookup], lm=imp.StaticLM(handler), max_iters=steps + 2)


async def timed(run: Callable[[], Awaitable[Any]]) -> tuple[float, float]:
    """The run's wall time and this process's CPU time (every thread's), in seconds."""
    wall, cpu = time.perf_counter(), time.process_time()
    await run()
    return time.perf_counter() - wall, time.process_time() - cpu


def row(name: str, costs: list[tuple[float, float]]) -> str:
    walls = sorted(w for w, _ in costs)
    cpus = sorted(c for _, c in costs)
    p90 = walls[min(len(walls) - 1, int(len(walls) * 0.9))]
    return f"| {name} | {statistics.median(walls) * 1e3:.3f} | {p90 * 1e3:.3f} | {statistics.median(cpus) * 1e3:.3f} |"


def per_step(spent: tuple[float, float], plain: tuple[float, float], steps: int) -> tuple[float, float]:
    return (spent[0] - plain[0]) / steps, (spent[1] - plain[1]) / steps


async def measure(args: argparse.Namespace) -> None:
    program = agent(args.steps)
    recorded = 3 * args.steps + 1
    folder = Path(tempfile.mkdtemp(prefix="imp-bench-durable-"))
    journal = imp.SQLiteJournal(folder / "journal.db")
    journals: dict[str, Any] = {}
    if args.postgres or args.dbos_sqlite:
        journals = dbos_journals(args, folder)
    for _ in range(3):  # warm up: every module imported, every cache filled
        await imp.call(program, question="where?")
        await imp.call(program, question="where?", run_id=f"warm-{time.time_ns()}", journal=journal)
    costs: dict[str, list[tuple[float, float]]] = {
        "imp SQLite journal, recording": [],
        "imp SQLite journal, replaying": [],
    }
    costs.update({name: [] for name in journals})
    for n in range(args.rounds):
        plain = await timed(lambda: imp.call(program, question="where?"))
        run_id = f"r{n}-{time.time_ns()}"
        journaled = functools.partial(imp.call, program, question="where?", run_id=run_id, journal=journal)
        record = await timed(journaled)
        replay = await timed(journaled)
        costs["imp SQLite journal, recording"].append(per_step(record, plain, recorded))
        costs["imp SQLite journal, replaying"].append(per_step(replay, plain, recorded))
        for name, other in journals.items():
            other_id = f"{name[:6]}-{n}-{time.time_ns()}"
            spent = await timed(functools.partial(imp.call, program, question="where?", run_id=other_id, journal=other))
            costs[name].append(per_step(spent, plain, recorded))
    print(
        f"imp {imp.__version__}, Python {platform.python_version()}, SQLite {sqlite_version()}, {os.cpu_count()} cores"
    )
    print(
        f"{args.rounds} rounds of a react turn recording {recorded} steps ({args.steps} steps of 2 tool calls, the answer)\n"
    )
    print("| journal | ms per step, median (wall) | p90 (wall) | median (CPU of this process) |")
    print("| --- | --- | --- | --- |")
    for name, found in costs.items():
        print(row(name, found))
    if journals:
        ours = statistics.median(w for w, _ in costs["imp SQLite journal, recording"])
        for name in journals:
            theirs = statistics.median(w for w, _ in costs[name])
            print(f"\n{name}: {theirs / ours:.0f}x imp's SQLite journal per step (median wall time)")


def sqlite_version() -> str:
    import sqlite3

    return sqlite3.sqlite_version


def dbos_journals(args: argparse.Namespace, folder: Path) -> dict[str, Any]:
    """DBOS on the given Postgres (and on a SQLite file): one DBOS per process, so one of them only."""
    import imp.durable.dbos as imp_dbos

    if args.dbos_sqlite and not args.postgres:
        imp_dbos.bundled_sqlite()
    from dbos import DBOS
    from dbos._serialization import DBOSPortableJSONSerializer

    url = args.postgres or f"sqlite:///{folder / 'dbos.sqlite'}"
    DBOS(config={"name": "imp-bench", "system_database_url": url, "serializer": DBOSPortableJSONSerializer()})
    journal = imp_dbos.DBOSJournal()
    DBOS.launch()
    kind = "Postgres" if args.postgres else f"SQLite {imp_dbos.sys.modules['sqlite3'].sqlite_version}"
    return {f"DBOS on {kind}": journal}


# --- instructions without a journal -------------------------------------------------------------

CALLS = 1000


BODY = """
import anyio, imp
program = imp.predict("question -> answer", lm=imp.StaticLM(lambda m, o: {"answer": "yes"}))
async def main():
    for _ in range(CALLS):
        await imp.call(program, question="q?")
anyio.run(main)
"""


def count(tree: Path, calls: int) -> int:
    """Instructions of a process making `calls` sequential predict calls with `tree`'s imp (callgrind)."""
    with tempfile.TemporaryDirectory() as out:
        target = Path(out) / "callgrind.out"
        body = BODY.replace("CALLS", str(calls))
        env = {**os.environ, "PYTHONPATH": str(tree), "PYTHONHASHSEED": "0"}
        subprocess.run([sys.executable, "-c", body], env=env, cwd=out, check=True)  # .pyc files written first
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={target}", sys.executable, "-c", body]
        subprocess.run(command, env=env, cwd=out, check=True, capture_output=True)
        for line in target.read_text().splitlines():
            if line.startswith(("summary:", "totals:")):
                return int(line.split()[1])
    raise RuntimeError("callgrind wrote no total")


def instructions(ref: str) -> None:
    root = _HERE.parent
    with tempfile.TemporaryDirectory() as before:
        subprocess.run(
            ["git", "-C", str(root), "worktree", "add", "--detach", before, ref], check=True, capture_output=True
        )
        try:
            per_call = {}
            for name, tree in (("before", Path(before)), ("now", root)):
                per_call[name] = (count(tree, CALLS + 500) - count(tree, 500)) / CALLS
        finally:
            subprocess.run(["git", "-C", str(root), "worktree", "remove", "--force", before], check=True)
    print(
        f"a sequential `await imp.call(predict)` without a journal, instructions per call ({CALLS} calls, callgrind):"
    )
    print(f"| {ref} | {per_call['before']:,.0f} |\n| this tree | {per_call['now']:,.0f} |")
    print(f"change: {100 * (per_call['now'] / per_call['before'] - 1):+.2f}%")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10, help="tool steps per turn (each records 3 steps)")
    parser.add_argument("--rounds", type=int, default=100)
    parser.add_argument("--postgres", default=None, help="a Postgres URL for DBOS's system database")
    parser.add_argument("--dbos-sqlite", action="store_true", help="DBOS on a SQLite file too (bundled SQLite)")
    parser.add_argument("--instructions", default=None, metavar="REF", help="count instructions now and at git REF")
    args = parser.parse_args()
    if args.instructions is not None:
        instructions(args.instructions)
    else:
        anyio.run(measure, args)


if __name__ == "__main__":
    main()
