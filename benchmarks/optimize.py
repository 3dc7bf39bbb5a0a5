"""Wall time of imp's optimizers beside DSPy's, on LMs that each take 50 ms, doing the same work.

The task: a student that is right only when its instruction says to answer in uppercase (or, for
the bootstrap, on every fourth word), and a reflection LM that says so once the metric's feedback
names it. Both LMs sleep 50 ms per request and answer in the format each request asks for (the
ChatAdapter's `[[ ## field ## ]]` sections, a JSON object for a JSON adapter, a fenced block for a
plain reflection prompt), so no side pays for a parse failure and a fallback the other does not.

    .venv/bin/python benchmarks/optimize.py                 # GEPA at 298 metric calls, BootstrapFewShot over 200
    .venv/bin/python benchmarks/optimize.py --calls 100     # a smaller GEPA budget
    .venv-bench/bin/python benchmarks/optimize.py           # beside dspy.GEPA and dspy.BootstrapFewShot

With DSPy installed (`make bench` builds `.venv-bench`), the same task runs through `dspy.GEPA`
(`num_threads` as imp's concurrency) and `dspy.BootstrapFewShot` on `dspy.BaseLM`s that sleep the
same 50 ms in `forward`; without it imp runs alone and says so. Before a ratio is printed, the
sides' work is compared (benchmarks/_same_work.py) and the run stops if it differs:

- GEPA, one proposal at a time (imp's `proposals_at_once=1`, the `gepa` package's own loop, which
  DSPy drives): the same metric calls, proposals, candidates accepted and best score. The budget
  is 298 because the two stop differently: imp never starts an iteration the budget cannot pay
  for, the `gepa` package starts one while any budget is left, so at 300 it spends 304 (the seed's
  and the accepted child's valsets, 20 each, then 6 calls an iteration: 298 is where both stop).
- GEPA, imp's default rounds (several proposals at once): the same metric budget spent and the same
  best score reached; its proposals are more, and are counted and shown, not compared.
- BootstrapFewShot over the whole trainset (`max_bootstrapped_demos` as large as it, one round, no
  labelled demos, so DSPy does not stop early): the same student calls and the same demos found.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # this checkout's imp, whatever the venv holds

from _same_work import Calls, Side, reply_as_asked, same_work

import imp
from imp.models.base import LMResponse

RULE = "Answer with the word in UPPERCASE."
LATENCY = 0.05
FEEDBACK = "The answer must be uppercase."


def _word(messages: list[Any]) -> str:
    return str(re.findall(r"\[\[ ## word ## \]\]\n(\S+)", messages[-1]["content"])[-1])


def _right(word: str, instruction: str) -> str:
    """The student's answer: right (uppercase) under the rule, or for every fourth word of the bootstrap set."""
    lucky = word.endswith("b") and int(re.sub(r"\D", "", word) or 1) % 4 == 0
    return word.upper() if "UPPERCASE" in instruction or lucky else word


def _proposal(text: str) -> str:
    return RULE if "must be uppercase" in text else "Answer carefully."


def _data(n: int, tag: str) -> list[imp.Example]:
    return [imp.Example(word=f"w{i}{tag}", answer=f"W{i}{tag}".upper()).with_inputs("word") for i in range(n)]


# --- imp ------------------------------------------------------------------------------------------


def _metric(example: imp.Example, prediction: imp.Prediction) -> imp.Score:
    if prediction.answer == example.answer:
        return imp.Score(1.0)
    return imp.Score(0.0, feedback=FEEDBACK)


def _imp_lms(student_calls: Calls, reflections: Calls) -> tuple[imp.StaticLM, imp.StaticLM]:
    async def student(messages: list[Any], options: dict[str, Any]) -> LMResponse:
        student_calls.add()
        await anyio.sleep(LATENCY)
        answer = _right(_word(messages), str(messages[0]["content"]))
        return LMResponse(text=reply_as_asked(messages, {"answer": answer}))

    async def reflect(messages: list[Any], options: dict[str, Any]) -> LMResponse:
        reflections.add()
        await anyio.sleep(LATENCY)
        return LMResponse(text=f"```\n{_proposal(str(messages[-1]['content']))}\n```")

    return imp.StaticLM(student), imp.StaticLM(reflect)


async def imp_gepa(calls: int, concurrency: int, at_once: int | None) -> tuple[float, Side]:
    student_calls, reflections = Calls(), Calls()
    student, reflect = _imp_lms(student_calls, reflections)
    gepa = imp.GEPA(
        _metric,
        reflection_lm=reflect,
        max_metric_calls=calls,
        concurrency=concurrency,
        proposals_at_once=at_once,
        skip_perfect_score=False,
        progress=False,
    )
    started = time.perf_counter()
    await gepa.compile(imp.predict("word -> answer", lm=student), trainset=_data(20, "t"), valset=_data(20, "v"))
    took = time.perf_counter() - started
    result = gepa.result
    assert result is not None
    side = Side(
        f"imp GEPA ({gepa.proposals_at_once} at once)",
        {
            "metric calls": result.metric_calls,
            "proposals": reflections.count,
            "candidates": len(result.candidates),
            "best score": f"{result.best_score:.2f}",
        },
    )
    return took, side


async def imp_bootstrap(n: int, concurrency: int) -> tuple[float, Side]:
    student_calls, reflections = Calls(), Calls()
    student, _ = _imp_lms(student_calls, reflections)
    boot = imp.BootstrapFewShot(
        _metric, max_bootstrapped_demos=n, max_labeled_demos=0, max_rounds=1, concurrency=concurrency
    )
    started = time.perf_counter()
    made = await boot.compile(imp.predict("word -> answer", lm=student), trainset=_data(n, "b"))
    took = time.perf_counter() - started
    return took, Side("imp BootstrapFewShot", {"student calls": student_calls.count, "demos found": len(made.demos)})


# --- DSPy -----------------------------------------------------------------------------------------


def dspy_sides(calls: int, bootstrap: int, threads: int) -> tuple[str, Any, Any] | None:
    """Runners of the same budgets through DSPy's optimizers, on LMs that sleep as long, or None."""
    try:
        import dspy
        from dspy.dsp.utils.utils import dotdict
    except ImportError:
        return None

    def reply(content: str) -> Any:
        return dotdict(
            choices=[dotdict(message=dotdict(content=content, tool_calls=None), finish_reason="stop")],
            usage=dotdict(prompt_tokens=20, completion_tokens=4, total_tokens=24),
            model="bench/sleep",
        )

    class Student(dspy.BaseLM):  # type: ignore[misc]
        forward_contract = "legacy"

        def __init__(self, counted: Calls) -> None:
            super().__init__(model="bench/student", model_type="chat", temperature=0.0, max_tokens=1000, cache=False)
            self.counted = counted

        def forward(self, prompt: Any = None, messages: Any = None, **kwargs: Any) -> Any:
            self.counted.add()
            time.sleep(LATENCY)
            answer = _right(_word(messages), str(messages[0]["content"]))
            return reply(reply_as_asked(messages, {"answer": answer}))

    class Reflect(dspy.BaseLM):  # type: ignore[misc]
        forward_contract = "legacy"

        def __init__(self, counted: Calls) -> None:
            super().__init__(model="bench/reflect", model_type="chat", temperature=0.0, max_tokens=1000, cache=False)
            self.counted = counted

        def forward(self, prompt: Any = None, messages: Any = None, **kwargs: Any) -> Any:
            self.counted.add()
            time.sleep(LATENCY)
            text = str(prompt or "") + "".join(str(m.get("content", "")) for m in messages or [])
            proposal = _proposal(text)
            asked = reply_as_asked(messages, {"new_instruction": proposal}, prompt)
            # A plain reflection prompt (the gepa package's) takes the instruction in a fenced block.
            return reply(asked if asked != proposal else f"```\n{proposal}\n```")

    def feedback_metric(gold: Any, pred: Any, trace: Any = None, pred_name: Any = None, pred_trace: Any = None) -> Any:
        right = pred.answer == gold.answer
        return dspy.Prediction(score=1.0 if right else 0.0, feedback="" if right else FEEDBACK)

    def data(n: int, tag: str) -> list[Any]:
        return [dspy.Example(word=f"w{i}{tag}", answer=f"W{i}{tag}".upper()).with_inputs("word") for i in range(n)]

    def gepa() -> tuple[float, Side]:
        student_calls, reflections = Calls(), Calls()
        dspy.configure(lm=Student(student_calls), adapter=dspy.ChatAdapter())
        optimizer = dspy.GEPA(
            metric=feedback_metric,
            reflection_lm=Reflect(reflections),
            max_metric_calls=calls,
            num_threads=threads,
            track_stats=True,
            skip_perfect_score=False,
        )
        started = time.perf_counter()
        made = optimizer.compile(dspy.Predict("word -> answer"), trainset=data(20, "t"), valset=data(20, "v"))
        took = time.perf_counter() - started
        results = made.detailed_results
        best = max(results.val_aggregate_scores)
        side = Side(
            f"DSPy {dspy.__version__} dspy.GEPA",
            {
                "metric calls": results.total_metric_calls,
                "proposals": reflections.count,
                "candidates": len(results.candidates),
                "best score": f"{best:.2f}",
            },
        )
        return took, side

    def boot() -> tuple[float, Side]:
        student_calls = Calls()
        dspy.configure(lm=Student(student_calls), adapter=dspy.ChatAdapter())
        optimizer = dspy.BootstrapFewShot(
            metric=lambda g, p, t=None: p.answer == g.answer,
            max_bootstrapped_demos=bootstrap,
            max_labeled_demos=0,
            max_rounds=1,
        )
        started = time.perf_counter()
        made = optimizer.compile(dspy.Predict("word -> answer"), trainset=data(bootstrap, "b"))
        took = time.perf_counter() - started
        side = Side(
            f"DSPy {dspy.__version__} BootstrapFewShot",
            {"student calls": student_calls.count, "demos found": len(made.demos)},
        )
        return took, side

    return str(dspy.__version__), gepa, boot


def _quiet_dspy() -> None:
    import logging

    for name in ("dspy", "gepa"):
        logging.getLogger(name).setLevel(logging.WARNING)


def main(calls: int, bootstrap: int, concurrency: int, at_once: int | None) -> None:
    sequential_took, sequential = anyio.run(imp_gepa, calls, concurrency, 1)
    rounds_took, rounds = anyio.run(imp_gepa, calls, concurrency, at_once)
    boot_took, boot = anyio.run(imp_bootstrap, bootstrap, concurrency)
    dspy = dspy_sides(calls, bootstrap, concurrency)
    if dspy is None:
        print("DSPy is not installed here: imp alone (make bench builds .venv-bench with DSPy)")
        print(f"imp GEPA, one proposal at a time   {sequential_took:6.2f} s  {sequential.work}")
        print(f"imp GEPA, in rounds                 {rounds_took:6.2f} s  {rounds.work}")
        print(f"imp BootstrapFewShot                {boot_took:6.2f} s  {boot.work}")
        return
    version, dspy_gepa, dspy_boot = dspy
    _quiet_dspy()
    gepa_took, gepa = dspy_gepa()
    dspy_boot_took, dspy_boot_side = dspy_boot()

    print(f"\nGEPA, max_metric_calls={calls}, concurrency (DSPy: num_threads) {concurrency}; DSPy {version}")
    print(f"  {sequential.label:<32} {sequential_took:6.2f} s   {sequential.work}")
    print(f"  {gepa.label:<32} {gepa_took:6.2f} s   {gepa.work}")
    same_work("GEPA one proposal at a time", [sequential, gepa])
    print(f"  => imp / DSPy = {sequential_took / gepa_took:.2f} ({gepa_took / sequential_took:.1f} times faster)")
    print(f"  {rounds.label:<32} {rounds_took:6.2f} s   {rounds.work}")
    spent = [
        Side(s.label, {"budget spent": _spent(s, calls), "best score": s.work["best score"]}) for s in (rounds, gepa)
    ]
    same_work("GEPA, the same budget and best score, imp in rounds", spent)
    print(f"  => imp in rounds / DSPy = {rounds_took / gepa_took:.2f} ({gepa_took / rounds_took:.1f} times faster)")

    print(f"\nBootstrapFewShot over {bootstrap} examples, all bootstrapped (none labelled); DSPy {version}")
    print(f"  {boot.label:<32} {boot_took:6.2f} s   {boot.work}   (one at a time: {bootstrap * LATENCY:.1f} s)")
    print(f"  {dspy_boot_side.label:<32} {dspy_boot_took:6.2f} s   {dspy_boot_side.work}")
    same_work("BootstrapFewShot", [boot, dspy_boot_side])
    print(f"  => imp / DSPy = {boot_took / dspy_boot_took:.2f} ({dspy_boot_took / boot_took:.1f} times faster)")


def _spent(side: Side, budget: int) -> str:
    """Whether a run spent its metric budget (to within one iteration's minibatches: 6 calls)."""
    used = int(str(side.work["metric calls"]))
    return "yes" if budget - 6 <= used <= budget + 6 else f"no ({used})"


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=298, help="GEPA's max_metric_calls (see above: why 298)")
    parser.add_argument("--bootstrap", type=int, default=200)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--at-once", type=int, default=None, help="GEPA's proposals_at_once in rounds (default: GEPA's)"
    )
    args = parser.parse_args()
    main(args.calls, args.bootstrap, args.concurrency, args.at_once)
