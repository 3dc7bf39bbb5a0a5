"""One run of a crash-test scenario, in its own process (the test kills it, then runs it again).

    python crash_child.py SCENARIO BASE_URL JOURNAL RUN_ID TOOL_LOG OUT [dbos-sqlite|dbos-postgres URL]

Scenarios: `react` (a turn of three steps of three concurrent tool calls), `composite` (a program
calling predict, imp.parallel and react), `evaluate` (imp.evaluate over 1,000 rows). Each tool run
appends its idempotency key to TOOL_LOG; the result goes to OUT as JSON.
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


def tool_log(path: str) -> imp.Tool:
    @imp.tool
    async def lookup(order: str) -> str:
        """Look up an order's status."""
        await asyncio.sleep(0.002 * (1 + sum(map(ord, order)) % 5))
        line = f"{imp.idempotency_key()}\n".encode()
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
        try:
            os.write(fd, line)  # one write: a kill never leaves half a line
        finally:
            os.close(fd)
        return f"{order}: shipped"

    return lookup


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
    """Run one scenario; `started.set()` (a multiprocessing Event) once the run begins."""
    scenario, base_url, journal_path, run_id, log_path, out = argv[:6]
    journal: Any
    if len(argv) > 6:
        from dbos_child import dbos_journal  # the DBOS tier's own helper

        journal = dbos_journal(argv[6], argv[7])
    else:
        journal = imp.SQLiteJournal(journal_path)
    lookup = tool_log(log_path)
    # Everything is built (and every module imported) before the run starts: the kill lands in the run.
    agent = imp.react("question -> answer", tools=[lookup], lm=client(base_url, "react"))
    pipeline = Pipeline(base_url, lookup)
    program = imp.predict("question -> answer", lm=client(base_url, "predict-answer"))
    rows = [imp.Example(question=f"q{i}", answer="0" if i % 3 else "x").with_inputs("question") for i in range(ROWS)]
    # One request first (not counted): the HTTP stack's first use imports and loads what it needs.
    await imp.call(imp.predict("question -> answer", lm=client(base_url, "warmup")), question="warm up")
    if started is not None:
        started.set()
    began = time.monotonic()
    result: dict[str, Any]
    if scenario == "react":
        p = await imp.call(agent, question=QUESTION, run_id=run_id, journal=journal)
        result = {"fields": p.fields, "complete": p.complete, "replayed": p.metadata.replayed}
    elif scenario == "composite":
        p = await imp.call(pipeline, question=QUESTION, run_id=run_id, journal=journal)
        result = {"fields": p.fields, "complete": p.complete, "replayed": p.metadata.replayed}
    elif scenario == "evaluate":
        report = await imp.evaluate(
            program, rows, exact, concurrency=16, progress=False, run_id=run_id, journal=journal
        )
        result = {"score": report.score, "rows": [r.prediction.fields if r.prediction else None for r in report.rows]}
    else:
        raise SystemExit(f"unknown scenario {scenario}")
    result["elapsed"] = time.monotonic() - began
    Path(out).write_text(json.dumps(result))  # noqa: ASYNC240 - the run is over


def run_in_process(argv: list[str], started: Any = None) -> None:
    """The entry point of a forked child."""
    asyncio.run(main(argv, started))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1:]))
