"""Wall time and metric calls of imp's optimizers on LMs that each take 50 ms.

The task: a student that is right only when its instruction says to answer in uppercase, and a
reflection LM that says so once the metric's feedback names it. Both sleep 50 ms per request.

    .venv/bin/python benchmarks/optimize.py                 # GEPA at 300 metric calls, BootstrapFewShot over 200
    .venv/bin/python benchmarks/optimize.py --calls 100     # a smaller GEPA budget

DSPy's side (`dspy.GEPA` and `dspy.BootstrapFewShot` on the same LMs) is not in this file yet.
"""

from __future__ import annotations

import argparse
import re
import time
from typing import Any

import anyio

import imp
from imp.models.base import LMResponse

RULE = "Answer with the word in UPPERCASE."
LATENCY = 0.05


def _word(messages: list[Any]) -> str:
    return str(re.findall(r"\[\[ ## word ## \]\]\n(\S+)", messages[-1]["content"])[-1])


async def _student(messages: list[Any], options: dict[str, Any]) -> dict[str, Any]:
    await anyio.sleep(LATENCY)
    word = _word(messages)
    return {"answer": word.upper() if "UPPERCASE" in messages[0]["content"] else word}


async def _reflect(messages: list[Any], options: dict[str, Any]) -> LMResponse:
    await anyio.sleep(LATENCY)
    proposal = RULE if "must be uppercase" in messages[-1]["content"] else "Answer carefully."
    return LMResponse(text=f"```\n{proposal}\n```")


def _metric(example: imp.Example, prediction: imp.Prediction) -> imp.Score:
    if prediction.answer == example.answer:
        return imp.Score(1.0)
    return imp.Score(0.0, feedback="The answer must be uppercase.")


def _data(n: int, tag: str) -> list[imp.Example]:
    return [imp.Example(word=f"w{i}{tag}", answer=f"W{i}{tag}".upper()).with_inputs("word") for i in range(n)]


async def main(calls: int, bootstrap: int, concurrency: int) -> None:
    program = imp.predict("word -> answer", lm=imp.StaticLM(_student))
    gepa = imp.GEPA(
        _metric,
        reflection_lm=imp.StaticLM(_reflect),
        max_metric_calls=calls,
        concurrency=concurrency,
        skip_perfect_score=False,
        progress=False,
    )
    started = time.perf_counter()
    await gepa.compile(program, trainset=_data(20, "t"), valset=_data(20, "v"))
    assert gepa.result is not None
    took = time.perf_counter() - started
    print(
        f"imp GEPA              {took:6.2f} s  {gepa.result.metric_calls} metric calls "
        f"(budget {calls}), best {gepa.result.best_score:.2f}, {len(gepa.result.candidates)} candidates"
    )
    boot = imp.BootstrapFewShot(_metric, concurrency=concurrency)
    started = time.perf_counter()
    await boot.compile(program, trainset=_data(bootstrap, "b"))
    took = time.perf_counter() - started
    serial = bootstrap * LATENCY
    print(f"imp BootstrapFewShot  {took:6.2f} s  over {bootstrap} examples (one at a time: {serial:.1f} s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    anyio.run(main, args.calls, args.bootstrap, args.concurrency)
