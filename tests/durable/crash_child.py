"""Runs of a crash-test scenario, in their own process (the test kills it, then runs them again).

    python crash_child.py SCENARIO BASE_URL JOURNAL RUN_IDS TOOL_LOG OUT_DIR [dbos-sqlite|dbos-postgres URL]

RUN_IDS is a comma-separated list of `run_id@delay`: the runs go concurrently, each started `delay`
seconds in, so one kill of the process lands at a different point of each run. Scenarios: `react`
(a turn of three steps of three concurrent tool calls), `composite` (a program calling predict,
imp.parallel and react), `evaluate` (imp.evaluate over 1,000 rows), `approve` (a react turn that
pauses twice on a refund awaiting approval, each resumed by its run id with edited arguments).
Each tool run appends its idempotency key (and a refund its arguments) to TOOL_LOG; each run's
result goes to OUT_DIR/<run id>.json.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import imp
import imp.durable
import imp.evaluation
import imp.models.openai  # imported before a run starts (the test's forkserver preloads this module)

ROWS = 1000


def _append(path: str, line: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(fd, f"{line}\n".encode())  # one write: a kill never leaves half a line
    finally:
        os.close(fd)


def tool_log(path: str) -> imp.Tool:
    @imp.tool
    async def lookup(order: str) -> str:
        """Look up an order's status."""
        await asyncio.sleep(0.002 * (1 + sum(map(ord, order)) % 5))
        _append(path, str(imp.idempotency_key()))
        return f"{order}: shipped"

    return lookup


def refund_log(path: str) -> imp.Tool:
    @imp.tool(requires_approval=True)
    async def refund(order: str, amount: float) -> str:
        """Refund part of an order."""
        await asyncio.sleep(0.003)
        _append(path, f"{imp.idempotency_key()} refund {json.dumps({'order': order, 'amount': amount})}")
        return f"refunded {amount:g} on {order}"

    return refund


def approve(pending: imp.Pending) -> dict[str, Any]:
    """The person's decisions: every refund approved at half the amount asked."""
    return {
        call.id: imp.Allow(arguments={**call.arguments, "amount": float(call.arguments["amount"]) / 2})
        for call in pending.calls
    }


def client(base_url: str, model: str) -> Any:
    return imp.lm(f"openai:{model}", base_url=base_url, api_key="sk-test-not-a-real-key-0000", timeout=30.0)


class Pipeline(imp.Program):
    """A composite program: a draft (predict), three checks of it (imp.parallel), an agent (react)."""

    def __init__(self, base_url: str, lookup: imp.Tool) -> None:
        self.signature = imp.signature("question -> answer")
        self.draft = imp.predict("question -> draft", lm=client(base_url, "predict-draft"))
        self.check = imp.predict("draft, angle -> verdict", lm=client(base_url, "predict-verdict"))
        self.agent = imp.react("draft, verdicts -> answer", tools=[lookup], lm=client(base_url, "react"))

    async def acall(self, inputs: dict[str, Any], **options: Any) -> imp.Prediction:
        draft = (await imp.call(self.draft, question=inputs["question"])).draft
        checks = await imp.parallel(self.check, [{"draft": draft, "angle": a} for a in ("tone", "facts", "length")])
        verdicts = "; ".join(c.verdict for c in checks)
        agent = await imp.call(self.agent, draft=draft, verdicts=verdicts)
        return imp.Prediction({"answer": agent.answer}, complete=agent.complete)


def exact(example: imp.Example, prediction: imp.Prediction) -> bool:
    return bool(prediction.answer.endswith(example.answer))


QUESTION = "where are the orders of customer 7?"


async def main(argv: list[str], started: Any = None) -> None:
    """Run the scenario's runs; `started.set()` (a multiprocessing Event) once they begin."""
    scenario, base_url, journal_path, run_ids, log_path, out_dir = argv[:6]
    journal: Any
    if len(argv) > 6:
        from dbos_child import dbos_journal  # the DBOS tier's own helper

        journal = dbos_journal(argv[6], argv[7])
    else:
        journal = imp.SQLiteJournal(journal_path)
    lookup = tool_log(log_path)
    # Everything is built (and every module imported) before the runs start: the kill lands in them.
    agent = imp.react("question -> answer", tools=[lookup], lm=client(base_url, "react"))
    gated = imp.react("question -> answer", tools=[lookup, refund_log(log_path)], lm=client(base_url, "approve"))
    pipeline = Pipeline(base_url, lookup)
    program = imp.predict("question -> answer", lm=client(base_url, "predict-answer"))
    rows = [imp.Example(question=f"q{i}", answer="0" if i % 3 else "x").with_inputs("question") for i in range(ROWS)]
    # One request first (not counted): the HTTP stack's first use imports and loads what it needs.
    await imp.call(imp.predict("question -> answer", lm=client(base_url, "warmup")), question="warm up")

    async def one(run_id: str, delay: float) -> None:
        await asyncio.sleep(delay)
        began = time.monotonic()
        result: dict[str, Any]
        if scenario in ("react", "composite"):
            p = await imp.call(
                agent if scenario == "react" else pipeline, question=QUESTION, run_id=run_id, journal=journal
            )
            result = {"fields": p.fields, "complete": p.complete}
        elif scenario == "approve":
            p = await imp.call(gated, question=QUESTION, run_id=run_id, journal=journal)
            pauses = 0
            while p.metadata.pending is not None:  # the run's pending turn, resumed by its run id alone
                pauses += 1
                p = await imp.call(gated, run_id=run_id, journal=journal, decisions=approve(p.metadata.pending))
            result = {"fields": p.fields, "complete": p.complete, "pauses": pauses}
        elif scenario == "evaluate":
            report = await imp.evaluate(
                program, rows, exact, concurrency=16, progress=False, run_id=run_id, journal=journal
            )
            result = {
                "score": report.score,
                "rows": [r.prediction.fields if r.prediction else None for r in report.rows],
            }
        else:
            raise SystemExit(f"unknown scenario {scenario}")
        result["elapsed"] = time.monotonic() - began
        Path(out_dir, f"{run_id}.json").write_text(json.dumps(result))  # noqa: ASYNC240 - the run is over

    planned = [(item.split("@")[0], float(item.split("@")[1]) if "@" in item else 0.0) for item in run_ids.split(",")]
    if started is not None:
        started.set()
    await asyncio.gather(*(one(run_id, delay) for run_id, delay in planned))


def run_in_process(argv: list[str], started: Any = None) -> None:
    """The entry point of a forked child."""
    asyncio.run(main(argv, started))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
