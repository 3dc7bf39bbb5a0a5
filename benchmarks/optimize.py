"""Wall time and metric calls of imp's optimizers on LMs that each take 50 ms.

The task: a student that is right only when its instruction says to answer in uppercase, and a
reflection LM that says so once the metric's feedback names it. Both sleep 50 ms per request.

    .venv/bin/python benchmarks/optimize.py                 # GEPA at 300 metric calls, BootstrapFewShot over 200
    .venv/bin/python benchmarks/optimize.py --calls 100     # a smaller GEPA budget
    .venv/bin/python benchmarks/optimize.py --at-once 1     # GEPA one proposal at a time (gepa's loop)
    .venv-bench/bin/python benchmarks/optimize.py           # beside dspy.GEPA and dspy.BootstrapFewShot

With DSPy installed (`make bench` builds `.venv-bench`), the same task runs through `dspy.GEPA`
(`num_threads` as imp's concurrency) and `dspy.BootstrapFewShot` on `dspy.BaseLM`s that sleep the
same 50 ms in `forward`; without it imp runs alone and says so.
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


async def main(calls: int, bootstrap: int, concurrency: int, at_once: int | None = None) -> None:
    program = imp.predict("word -> answer", lm=imp.StaticLM(_student))
    gepa = imp.GEPA(
        _metric,
        reflection_lm=imp.StaticLM(_reflect),
        max_metric_calls=calls,
        concurrency=concurrency,
        proposals_at_once=at_once,
        skip_perfect_score=False,
        progress=False,
    )
    started = time.perf_counter()
    await gepa.compile(program, trainset=_data(20, "t"), valset=_data(20, "v"))
    assert gepa.result is not None
    took = time.perf_counter() - started
    print(
        f"imp GEPA              {took:6.2f} s  {gepa.result.metric_calls} metric calls "
        f"(budget {calls}), best {gepa.result.best_score:.2f}, {len(gepa.result.candidates)} candidates, "
        f"{gepa.result.iterations} iterations, {gepa.proposals_at_once} proposals at once"
    )
    boot = imp.BootstrapFewShot(_metric, concurrency=concurrency)
    started = time.perf_counter()
    await boot.compile(program, trainset=_data(bootstrap, "b"))
    took = time.perf_counter() - started
    serial = bootstrap * LATENCY
    print(f"imp BootstrapFewShot  {took:6.2f} s  over {bootstrap} examples (one at a time: {serial:.1f} s)")


def dspy_side(calls: int, bootstrap: int, threads: int) -> None:
    """The same budgets through DSPy's optimizers, on LMs that sleep as long."""
    try:
        import dspy
        from dspy.dsp.utils.utils import dotdict
    except ImportError:
        print("DSPy is not installed here: imp alone (make bench builds .venv-bench with DSPy)")
        return

    def reply(content: str) -> Any:
        return dotdict(
            choices=[dotdict(message=dotdict(content=content, tool_calls=None), finish_reason="stop")],
            usage=dotdict(prompt_tokens=20, completion_tokens=4, total_tokens=24),
            model="bench/sleep",
        )

    class Student(dspy.BaseLM):  # type: ignore[misc]
        forward_contract = "legacy"

        def __init__(self) -> None:
            super().__init__(model="bench/student", model_type="chat", temperature=0.0, max_tokens=1000, cache=False)

        def forward(self, prompt: Any = None, messages: Any = None, **kwargs: Any) -> Any:
            time.sleep(LATENCY)
            word = _word(messages)
            answer = word.upper() if "UPPERCASE" in str(messages[0]["content"]) else word
            return reply(f"[[ ## answer ## ]]\n{answer}\n\n[[ ## completed ## ]]")

    class Reflect(dspy.BaseLM):  # type: ignore[misc]
        forward_contract = "legacy"

        def __init__(self) -> None:
            super().__init__(model="bench/reflect", model_type="chat", temperature=0.0, max_tokens=1000, cache=False)

        def forward(self, prompt: Any = None, messages: Any = None, **kwargs: Any) -> Any:
            time.sleep(LATENCY)
            text = str(prompt or "") + "".join(str(m.get("content", "")) for m in messages or [])
            proposal = RULE if "must be uppercase" in text else "Answer carefully."
            return reply(f"```\n{proposal}\n```")

    def feedback_metric(gold: Any, pred: Any, trace: Any = None, pred_name: Any = None, pred_trace: Any = None) -> Any:
        right = pred.answer == gold.answer
        return dspy.Prediction(score=1.0 if right else 0.0, feedback="" if right else "The answer must be uppercase.")

    def data(n: int, tag: str) -> list[Any]:
        return [dspy.Example(word=f"w{i}{tag}", answer=f"W{i}{tag}".upper()).with_inputs("word") for i in range(n)]

    dspy.configure(lm=Student(), adapter=dspy.ChatAdapter())
    gepa = dspy.GEPA(
        metric=feedback_metric,
        reflection_lm=Reflect(),
        max_metric_calls=calls,
        num_threads=threads,
        track_stats=True,
        skip_perfect_score=False,
    )
    started = time.perf_counter()
    made = gepa.compile(dspy.Predict("word -> answer"), trainset=data(20, "t"), valset=data(20, "v"))
    took = time.perf_counter() - started
    used = getattr(getattr(made, "detailed_results", None), "total_metric_calls", None)
    print(f"DSPy dspy.GEPA        {took:6.2f} s  {used} metric calls (budget {calls})")
    boot = dspy.BootstrapFewShot(metric=lambda g, p, t=None: p.answer == g.answer)
    started = time.perf_counter()
    boot.compile(dspy.Predict("word -> answer"), trainset=data(bootstrap, "b"))
    print(f"DSPy BootstrapFewShot {time.perf_counter() - started:6.2f} s  over {bootstrap} examples")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=300)
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--at-once", type=int, default=None, help="GEPA's proposals_at_once (default: GEPA's)")
    args = parser.parse_args()
    anyio.run(main, args.calls, args.bootstrap, args.concurrency, args.at_once)
    dspy_side(args.calls, args.bootstrap, args.concurrency)
