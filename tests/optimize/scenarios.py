"""GEPA runs on scripted LMs whose every decision shows in the report: used to pin that one proposal at a
time reproduces the sequential loop (`sequential_runs.json` holds what that loop gave on them)."""

from __future__ import annotations

import re
import zlib
from typing import Any

import imp
from imp.optimize import GEPA


class Steps(imp.Program):
    """Two predictors: `upper` and `plain` examples go to the first, `bang` ones to the second."""

    def __init__(self, lm: imp.LM) -> None:
        self.first = imp.predict("word -> answer", lm=lm)
        self.second = imp.predict("word -> answer", lm=lm)
        self.signature = imp.signature("word, kind -> answer")

    async def acall(self, inputs: dict[str, Any], **call_options: Any) -> imp.Prediction:
        step = self.second if inputs["kind"] == "bang" else self.first
        return await step.acall({"word": inputs["word"]})


def steps_handler(messages: list[Any], options: dict[str, Any]) -> dict[str, Any]:
    system = "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")
    word = re.findall(r"\[\[ ## word ## \]\]\n(\S+)", str(messages[-1]["content"]))[-1]
    word = word.upper() if "UPPER" in system else word
    return {"answer": word + "!" if "BANG" in system else word}


def exact_metric(example: imp.Example, prediction: imp.Prediction) -> imp.Score:
    right = prediction.answer == example.answer
    return imp.Score(float(right), feedback=None if right else "wrong")


def partial_metric(example: imp.Example, prediction: imp.Prediction) -> imp.Score:
    got = str(prediction.answer or "")
    value = sum(a == b for a, b in zip(got, example.answer, strict=False)) / len(example.answer)
    return imp.Score(value, feedback=None if value == 1 else "wrong")


def proposal(n: int, messages: list[Any]) -> imp.LMResponse:
    shown = str(messages[-1]["content"]).split("```")[1]
    text = f"{'BANG' if 'Two' in shown or 'BANG' in shown else 'UPPER'} {n % 5}"
    return imp.LMResponse(text=f"```\n{text}\n```", usage=imp.Usage(input_tokens=7, output_tokens=n % 4))


def ordered_reflection() -> imp.StaticLM:
    """A reflection LM whose proposals follow the order of the requests (as the sequential loop makes them)."""
    counter = iter(range(100_000))
    return imp.StaticLM(lambda messages, options: proposal(next(counter), messages))


def keyed_reflection(messages: list[Any], options: dict[str, Any]) -> imp.LMResponse:
    """A reflection whose proposal depends on the request alone, not on when it comes."""
    return proposal(zlib.crc32(str(messages[-1]["content"]).encode()), messages)


def data() -> list[imp.Example]:
    """Twelve examples of three kinds, each with the answer its kind needs."""
    words = ["ab", "cd", "ef", "gh", "ij", "kl", "mn", "op", "qr", "st", "uv", "wx"]
    made = []
    for i, w in enumerate(words):
        kind = ("upper", "bang", "plain")[i % 3]
        answer = {"upper": w.upper(), "bang": w + "!", "plain": w}[kind]
        made.append(imp.Example(word=w, kind=kind, answer=answer).with_inputs("word", "kind"))
    return made


SCENARIOS: list[dict[str, Any]] = [
    {"budget": budget, "seed": seed, "partial": partial}
    for budget in (9, 60, 250)
    for seed in (0, 1, 4)
    for partial in (False, True)
] + [
    {"budget": 10_000, "seed": 2, "partial": True, "no_improvement_iterations": 6},
    {"budget": 10_000, "seed": 3, "partial": False, "max_reflection_tokens": 60},
    {"budget": 200, "seed": 5, "partial": True, "skip_perfect_score": False},
]


async def run(scenario: dict[str, Any], **options: Any) -> dict[str, Any]:
    """One scenario's run, as JSON-safe data: every candidate, the log, the counters."""
    extra = {k: v for k, v in scenario.items() if k not in ("budget", "seed", "partial")}
    optimizer = GEPA(
        partial_metric if scenario["partial"] else exact_metric,
        reflection_lm=ordered_reflection(),
        max_metric_calls=scenario["budget"],
        seed=scenario["seed"],
        progress=False,
        concurrency=4,
        **extra,
        **options,
    )
    program = Steps(imp.StaticLM(steps_handler)).with_parameters(
        instructions={"first.predict": "One.", "second.predict": "Two."}
    )
    examples = data()
    await optimizer.compile(program, trainset=examples[:6], valset=examples[6:])
    result = optimizer.result
    assert result is not None
    return {
        "candidates": [
            [dict(c.instructions), list(c.parents), list(c.val_scores), c.metric_calls_at_discovery, c.origin]
            for c in result.candidates
        ],
        "log": list(result.log),
        "metric_calls": result.metric_calls,
        "iterations": result.iterations,
        "stop_reason": result.stop_reason,
        "best_index": result.best_index,
        "reflection_usage": result.reflection_usage.dump(),
    }
