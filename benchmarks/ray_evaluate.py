"""20,000 examples against a 50 ms LM: `imp.evaluate` in one process, and `imp.ray.evaluate` on two Ray workers.

The program is `question -> answer` (predict); the model sleeps 50 ms and answers the question
upper-cased (three rows in four correctly: the score must be 0.75 everywhere). Each runner keeps
`--concurrency` rows in flight per process, so two workers have twice the rows in flight of one
process: that is what spreading the run buys. Printed: wall time, rows per second, the ideal wall
time (examples / rows in flight x 50 ms), and the start-up costs: `ray.init` of a local cluster,
and one `imp.ray.evaluate` call of two rows (starting the hub and two workers, loading the program).

    .venv-ray/bin/python benchmarks/ray_evaluate.py                      # the table
    .venv-ray/bin/python benchmarks/ray_evaluate.py --examples 2000      # a quicker run

On a shared machine, run it when it is quiet: two Ray workers, the raylet and the driver share its cores.
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import platform
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))

import imp  # noqa: E402  (after the sys.path fix above)

LATENCY = 0.05
EXPECTED_SCORE = 0.75


async def _answer(messages: Sequence[Any], options: dict[str, Any]) -> str:
    await asyncio.sleep(LATENCY)
    question = str(messages[-1]["content"]).split("[[ ## question ## ]]\n", 1)[1].split("\n", 1)[0]
    return f"[[ ## answer ## ]]\n{question.upper()}\n\n[[ ## completed ## ]]"


def sleep_lm() -> imp.LM:
    """The 50 ms model; each Ray worker builds its own (an `lm_factory`)."""
    return imp.StaticLM(_answer, model="sleep50")


def devset(count: int) -> list[imp.Example]:
    """Every fourth label is wrong on purpose, so the score is 0.75."""
    return [
        imp.Example(question=f"q{i}", answer=f"Q{i}" if i % 4 else f"wrong{i}").with_inputs("question")
        for i in range(count)
    ]


def metric(example: imp.Example, prediction: imp.Prediction) -> bool:
    return bool(example.answer == prediction.answer)


async def main(examples: int, concurrency: int, workers: int) -> None:
    import ray

    program = imp.predict("question -> answer", lm=sleep_lm())
    data = devset(examples)
    started = time.perf_counter()
    one = await imp.evaluate(program, data, metric, concurrency=concurrency, progress=False)
    single = time.perf_counter() - started
    assert one.score == EXPECTED_SCORE, one.score

    started = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    init = time.perf_counter() - started
    options: dict[str, Any] = {"lm_factory": sleep_lm, "concurrency": concurrency, "num_cpus": 0.5}
    started = time.perf_counter()
    await imp.ray.evaluate(program, data[:2], metric, workers=workers, progress=False, **options)
    spin_up = time.perf_counter() - started
    results: list[tuple[str, int, float]] = [("imp.evaluate, one process", concurrency, single)]
    for label, limits in (
        (f"imp.ray.evaluate, {workers} workers", None),
        (f"imp.ray.evaluate, {workers} workers, shared max_in_flight", imp.ray.Limits(max_in_flight=10 * examples)),
    ):
        started = time.perf_counter()
        report = await imp.ray.evaluate(
            program, data, metric, workers=workers, progress=False, limits=limits, batch_size=1000, **options
        )
        results.append((label, workers * concurrency, time.perf_counter() - started))
        assert report.score == EXPECTED_SCORE and len(report.rows) == examples, report
    ray.shutdown()

    print(f"{examples:,} examples, a {LATENCY * 1000:.0f} ms LM, concurrency {concurrency} per process")
    print(f"python {platform.python_version()}, ray {ray.__version__}, {os.cpu_count()} cores\n")
    print("| runner | rows in flight | wall time | rows/s | ideal | x ideal |")
    print("| --- | --- | --- | --- | --- | --- |")
    for label, in_flight, wall in results:
        ideal = math.ceil(examples / in_flight) * LATENCY
        print(f"| {label} | {in_flight} | {wall:.2f} s | {examples / wall:,.0f} | {ideal:.2f} s | {wall / ideal:.2f} |")
    print(f"\nstart-up: ray.init (a local cluster) {init:.2f} s; one imp.ray.evaluate call of 2 rows {spin_up:.2f} s")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=20_000)
    parser.add_argument("--concurrency", type=int, default=100)
    parser.add_argument("--workers", type=int, default=2)
    args = parser.parse_args()
    asyncio.run(main(args.examples, args.concurrency, args.workers))
