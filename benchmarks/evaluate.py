"""A 2,000-example evaluation at concurrency 64 against a 20 ms LM: `imp.evaluate` and `dspy.Evaluate`.

The program is `question -> answer` (predict), the model sleeps 20 ms and then answers the
question upper-cased (three rows in four correctly, so the score is 0.75), and the metric
compares the answer with the label. With 64 rows in flight at all times the ideal wall time is
2,000 / 64 x 20 ms = 0.625 s; the table shows each runner's wall time (median of the rounds),
its multiple of that ideal, and its score (which must be 0.75 for both).

    .venv-bench/bin/python benchmarks/evaluate.py               # the table
    .venv-bench/bin/python benchmarks/evaluate.py --rounds 1    # one round each

- imp: `await imp.evaluate(program, devset, metric, concurrency=64, progress=False)` on an
  `imp.LM` whose `request` does `await asyncio.sleep(0.02)` (one event loop, 64 worker tasks).
- DSPy: `dspy.Evaluate(devset=..., metric=..., num_threads=64, display_progress=False)(program)` on
  a `dspy.BaseLM` whose `forward` does `time.sleep(0.02)` (DSPy evaluates on 64 threads).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import math
import os
import platform
import statistics
import sys
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))
sys.path.append(str(_HERE))  # benchmarks/_same_work.py, after imp

from _same_work import Calls, Side, reply_as_asked, same_work  # noqa: E402

import imp  # noqa: E402  (after the sys.path fix above)

SENT = Calls()
"""The fake models' requests, counted: each runner must make one per row."""
EXAMPLES = 2_000
CONCURRENCY = 64
LATENCY = 0.02
IDEAL = math.ceil(EXAMPLES / CONCURRENCY) * LATENCY
EXPECTED_SCORE = 0.75


def rows() -> list[tuple[str, str]]:
    """(question, label): every fourth label is wrong on purpose, so the score is 0.75."""
    return [(f"q{i}", f"Q{i}" if i % 4 else f"wrong{i}") for i in range(EXAMPLES)]


def reply_for(messages: Sequence[dict[str, Any]]) -> str:
    """The question upper-cased, in the format the request asks for (each framework's own adapter)."""
    SENT.add()
    question = str(messages[-1]["content"]).split("[[ ## question ## ]]\n", 1)[1].split("\n", 1)[0]
    return reply_as_asked(messages, {"answer": question.upper()})


def imp_runner() -> Callable[[], float]:
    class SleepLM(imp.LM):
        provider = "bench"
        model = "sleep20"

        async def request(self, messages: Sequence[dict[str, Any]], **options: Any) -> imp.LMResponse:
            await asyncio.sleep(LATENCY)
            return imp.LMResponse(
                text=reply_for(messages), usage=imp.Usage(input_tokens=20, output_tokens=4, requests=1)
            )

    program = imp.predict("question -> answer", lm=SleepLM())
    devset = [imp.Example(question=q, answer=a).with_inputs("question") for q, a in rows()]

    def metric(example: imp.Example, prediction: imp.Prediction) -> bool:
        return bool(example.answer == prediction.answer)

    def run() -> float:
        async def main() -> float:
            report = await imp.evaluate(program, devset, metric, concurrency=CONCURRENCY, progress=False)
            if report.errors:
                raise SystemExit(f"imp: {len(report.errors)} row errors, first {report.errors[0].error!r}")
            return float(report.score)

        return asyncio.run(main())

    return run


def dspy_runner() -> tuple[Callable[[], float] | None, str]:
    try:
        import dspy
        from dspy.dsp.utils.utils import dotdict
    except ImportError as exc:
        return None, f"DSPy is not importable here ({exc}); `make .venv-bench/.installed` installs it"

    class SleepDSPyLM(dspy.BaseLM):  # type: ignore[misc]
        forward_contract = "legacy"

        def __init__(self) -> None:
            super().__init__(model="bench/sleep20", model_type="chat", temperature=0.0, max_tokens=1000, cache=False)

        def forward(self, prompt: Any = None, messages: Any = None, **kwargs: Any) -> Any:
            time.sleep(LATENCY)
            message = dotdict(content=reply_for(messages), tool_calls=None)
            return dotdict(
                choices=[dotdict(message=message, finish_reason="stop")],
                usage=dotdict(prompt_tokens=20, completion_tokens=4, total_tokens=24),
                model="bench/sleep20",
            )

    dspy.configure(adapter=dspy.ChatAdapter())
    logging.getLogger("dspy").setLevel(logging.WARNING)  # its "Average Metric" line after every round
    program = dspy.Predict("question -> answer")
    program.lm = SleepDSPyLM()
    devset = [dspy.Example(question=q, answer=a).with_inputs("question") for q, a in rows()]

    def metric(example: Any, prediction: Any, trace: Any = None) -> bool:
        return bool(example.answer == prediction.answer)

    evaluate = dspy.Evaluate(devset=devset, metric=metric, num_threads=CONCURRENCY, display_progress=False)

    def run() -> float:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            result = evaluate(program)
        return float(getattr(result, "score", result)) / 100.0  # DSPy reports a percentage

    return run, ""


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--rounds", type=int, default=3, help="timed rounds per runner (default 3)")
    args = parser.parse_args(argv)
    print(f"{platform.python_implementation()} {platform.python_version()}, {os.cpu_count()} CPUs")
    print(
        f"{EXAMPLES} examples, concurrency {CONCURRENCY}, LM latency {LATENCY * 1000:.0f} ms; "
        f"ideal {IDEAL:.3f} s (ceil({EXAMPLES}/{CONCURRENCY}) x {LATENCY * 1000:.0f} ms)\n"
    )
    runners: list[tuple[str, Callable[[], float]]] = [(f"imp {imp.__version__}  imp.evaluate", imp_runner())]
    dspy_run, skipped = dspy_runner()
    if dspy_run is not None:
        import dspy

        runners.append((f"DSPy {dspy.__version__}  dspy.Evaluate (64 threads)", dspy_run))
    width = max(len(label) for label, _ in runners)
    head = f"  {'runner':<{width}}  {'wall s':>7}  {'x ideal':>7}  {'rows/s':>7}  {'score':>6}  rounds"
    print(head)
    print("  " + "-" * (len(head) + 12))
    walls: dict[str, float] = {}
    sides: list[Side] = []
    for label, run in runners:
        SENT.take()
        run()  # warm-up round, not timed
        warm = SENT.take()
        times: list[float] = []
        score = float("nan")
        for _ in range(args.rounds):
            started = time.perf_counter()
            score = run()
            times.append(time.perf_counter() - started)
        if abs(score - EXPECTED_SCORE) > 1e-9:
            raise SystemExit(f"{label}: score {score}, expected {EXPECTED_SCORE}: the benchmark is wrong")
        wall = statistics.median(times)
        walls[label] = wall
        sides.append(Side(label, {"LM requests per round": warm, "score": f"{score:.2f}"}))
        print(
            f"  {label:<{width}}  {wall:>7.3f}  {wall / IDEAL:>7.2f}  {EXAMPLES / wall:>7.0f}  {score:>6.2f}  "
            + " ".join(f"{t:.3f}" for t in times),
            flush=True,
        )
    same_work(f"{EXAMPLES} rows", sides)
    if skipped:
        print(f"  (DSPy skipped: {skipped})")
    if len(walls) == 2:
        imp_wall, dspy_wall = walls.values()
        print(f"\n  => imp.evaluate takes {imp_wall / dspy_wall:.2f}x the time of dspy.Evaluate")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
