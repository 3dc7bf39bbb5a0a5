"""What a journal costs: per recorded step on SQLite beside a DBOS step on SQLite and on Postgres, and nothing without one.

One run of a `react` turn on a zero-latency LM (`imp.StaticLM`): `--steps` steps, each with two tool
calls, then the answer, so a run records 3 x steps + 1 steps (LM exchanges and tool calls). Each
round runs the turn without a journal, with `imp.SQLiteJournal` (a new run id: every step recorded),
replayed from it (the same run id again: every step answered from the journal), and, when DBOS is
installed, with `imp.dbos.DBOSJournal` on a Postgres (`--postgres URL`) and on a SQLite file with
pysqlite3-binary's SQLite (`--dbos-sqlite`). DBOS runs once per process, so each DBOS journal is
measured in a child process of its own, which measures imp's journal in the same rounds beside it.
The runs of a round are paired (back to back), and the cost per step is (journaled run - plain run)
/ steps recorded, per round; the table gives the median and p90 over the rounds, of wall time and of
the CPU time of the whole process (every thread; a Postgres server's own work is not in it).

    .venv/bin/python benchmarks/durable.py                        # imp's journal only
    .venv-dbos/bin/python benchmarks/durable.py --postgres postgresql://postgres@127.0.0.1:5432/bench --dbos-sqlite
    .venv-dbos/bin/python benchmarks/durable.py --count --postgres URL --dbos-sqlite   # instructions per step
    .venv/bin/python benchmarks/durable.py --instructions REF     # a call without a journal, now and at git REF

On a loaded machine wall times stretch; `--count` counts instead, with callgrind, the instructions
this process spends per recorded step (a process running journaled turns, less one running the same
turns plain, over the steps recorded): imp's journal and DBOS on SQLite entirely, DBOS on Postgres
on the client's side only (the server's work is another process).

`--instructions REF` counts, with callgrind, the instructions of a sequential `await imp.call(predict)`
without a journal in this tree and in a checkout of REF (the commit before the journal): the hooks a
journal adds (one context-variable read per call, per request and per tool call) must cost nothing
measurable. Counted instructions do not drift with the machine's load as wall time does.
"""

from __future__ import annotations

import argparse
import functools
import json
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
    if args.child:
        journals = dbos_journals(args.child, args.postgres, folder)
    for _ in range(3):  # warm up: every module imported, every cache filled
        await imp.call(program, question="where?")
        await imp.call(program, question="where?", run_id=f"warm-{time.time_ns()}", journal=journal)
        for other in journals.values():
            await imp.call(program, question="where?", run_id=f"warm-{time.time_ns()}", journal=other)
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
    if args.child:  # the parent prints: the costs as JSON on the last line
        print(json.dumps(costs))
        return
    for kind in ("dbos-sqlite", "dbos-postgres"):
        if (kind == "dbos-sqlite" and not args.dbos_sqlite) or (kind == "dbos-postgres" and not args.postgres):
            continue
        found = child(args, kind)
        # The child's own imp journal ran beside its DBOS in the same rounds: kept for the ratio.
        costs[f"imp SQLite journal, recording (beside {kind})"] = found.pop("imp SQLite journal, recording")
        found.pop("imp SQLite journal, replaying")
        costs.update(found)
    print(
        f"imp {imp.__version__}, Python {platform.python_version()}, SQLite {sqlite_version()}, {os.cpu_count()} cores, "
        f"load average {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{args.rounds} rounds of a react turn recording {recorded} steps ({args.steps} steps of 2 tool calls, the answer)\n"
    )
    print("| journal | ms per step, median (wall) | p90 (wall) | median (CPU of this process) |")
    print("| --- | --- | --- | --- |")
    for name, found_costs in costs.items():
        print(row(name, found_costs))
    for name in costs:
        if name.startswith("DBOS on"):
            beside = "dbos-postgres" if "Postgres" in name else "dbos-sqlite"
            ours = statistics.median(w for w, _ in costs[f"imp SQLite journal, recording (beside {beside})"])
            theirs = statistics.median(w for w, _ in costs[name])
            print(f"\n{name}: {theirs / ours:.0f}x imp's SQLite journal per step (median wall time, the same rounds)")


def child(args: argparse.Namespace, kind: str) -> dict[str, list[tuple[float, float]]]:
    """Run the rounds with one DBOS journal in a process of its own (DBOS launches once per process)."""
    command = [sys.executable, __file__, "--child", kind, "--rounds", str(args.rounds), "--steps", str(args.steps)]
    if args.postgres:
        command += ["--postgres", args.postgres]
    done = subprocess.run(command, check=True, capture_output=True, text=True)
    found: dict[str, list[tuple[float, float]]] = json.loads(done.stdout.strip().splitlines()[-1])
    return found


def sqlite_version() -> str:
    import sqlite3

    return sqlite3.sqlite_version


def dbos_journals(kind: str, postgres: str | None, folder: Path) -> dict[str, Any]:
    """DBOS on the given Postgres or on a SQLite file (with pysqlite3-binary's SQLite)."""
    import logging

    import imp.durable.dbos as imp_dbos

    if kind == "dbos-sqlite":
        imp_dbos.bundled_sqlite()
    from dbos import DBOS
    from dbos._serialization import DBOSPortableJSONSerializer

    logging.getLogger("dbos").setLevel(logging.WARNING)
    url = postgres if kind == "dbos-postgres" else f"sqlite:///{folder / 'dbos.sqlite'}"
    if url is None:
        raise SystemExit("--child dbos-postgres needs --postgres URL")
    DBOS(
        config={
            "name": "imp-bench",
            "system_database_url": url,
            "serializer": DBOSPortableJSONSerializer(),
            "run_admin_server": False,
        }
    )
    journal = imp_dbos.DBOSJournal()
    DBOS.launch()
    name = (
        "DBOS on Postgres"
        if kind == "dbos-postgres"
        else f"DBOS on SQLite {imp_dbos.sys.modules['sqlite3'].sqlite_version}"
    )
    return {name: journal}


# --- instructions per recorded step ------------------------------------------------------------

TURNS = (2, 6)
"""The turns of the two counted processes: their difference cancels start-up and DBOS's launch."""

COUNTED = """
import sys, tempfile, time, anyio
sys.path.insert(0, BENCH)
import durable
from pathlib import Path
folder = Path(tempfile.mkdtemp())
program = durable.agent(STEPS)
journal = None
if KIND == "imp":
    import imp
    journal = imp.SQLiteJournal(folder / "journal.db")
elif KIND != "plain":
    (journal,) = durable.dbos_journals(KIND, POSTGRES, folder).values()
async def main():
    import imp
    for n in range(2):  # warm up
        await imp.call(program, question="q", **({} if journal is None else {"run_id": f"w{n}-{time.time_ns()}", "journal": journal}))
    for n in range(TURNS):
        await imp.call(program, question="q", **({} if journal is None else {"run_id": f"t{n}-{time.time_ns()}", "journal": journal}))
anyio.run(main)
import os
os._exit(0)  # DBOS's threads keep a process alive
"""


def counted(kind: str, turns: int, steps: int, postgres: str | None) -> int:
    """Instructions of a process running `turns` turns with this journal (callgrind, every thread)."""
    body = (
        COUNTED.replace("BENCH", repr(str(_HERE)))
        .replace("STEPS", str(steps))
        .replace("KIND", repr(kind))
        .replace("POSTGRES", repr(postgres))
        .replace("TURNS", str(turns))
    )
    with tempfile.TemporaryDirectory() as out:
        target = Path(out) / "callgrind.out"
        env = {**os.environ, "PYTHONHASHSEED": "0"}
        command = ["valgrind", "--tool=callgrind", f"--callgrind-out-file={target}", sys.executable, "-c", body]
        subprocess.run(command, env=env, cwd=out, check=True, capture_output=True)
        total = 0
        for path in Path(out).glob("callgrind.out*"):  # one file per thread or process
            for line in path.read_text(errors="replace").splitlines():
                if line.startswith(("summary:", "totals:")):
                    total += int(line.split()[1])
                    break
    return total


def count_per_step(args: argparse.Namespace) -> None:
    recorded = 3 * args.steps + 1
    kinds = ["imp"] + (["dbos-sqlite"] if args.dbos_sqlite else []) + (["dbos-postgres"] if args.postgres else [])
    few, many = TURNS
    plain = counted("plain", many, args.steps, None) - counted("plain", few, args.steps, None)
    print(
        f"instructions per recorded step (callgrind; {many - few} turns of {recorded} steps, less the same turns plain)\n"
    )
    print("| journal | instructions per step |")
    print("| --- | --- |")
    figures = {}
    for kind in kinds:
        spent = counted(kind, many, args.steps, args.postgres) - counted(kind, few, args.steps, args.postgres)
        figures[kind] = (spent - plain) / ((many - few) * recorded)
        note = " (the client's side: Postgres's own work is another process)" if kind == "dbos-postgres" else ""
        print(f"| {kind}{note} | {figures[kind]:,.0f} |")
    for kind in kinds[1:]:
        print(f"\n{kind}: {figures[kind] / figures['imp']:.0f}x imp's SQLite journal per step (instructions)")


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
    parser.add_argument("--count", action="store_true", help="count instructions per recorded step (callgrind)")
    parser.add_argument("--child", choices=["dbos-sqlite", "dbos-postgres"], help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.instructions is not None:
        instructions(args.instructions)
    elif args.count:
        count_per_step(args)
    else:
        anyio.run(measure, args)


if __name__ == "__main__":
    main()
