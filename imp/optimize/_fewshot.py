"""LabeledFewShot (demos from labelled examples) and BootstrapFewShot (demos from the teacher's passing runs)."""

from __future__ import annotations

import random
import time
from collections.abc import Iterable
from typing import Any

from imp.evaluation.metrics import Metric
from imp.optimize._base import OptimizationError, Optimizer, check_positive, mark
from imp.optimize._result import Candidate, OptimizationResult
from imp.optimize._scoring import Row, Runner
from imp.prediction import Example
from imp.programs.base import Program
from imp.runtime.budget import Budget, budget_scope

__all__ = ["BootstrapFewShot", "LabeledFewShot"]


class LabeledFewShot(Optimizer):
    """Demos from labelled examples, no LM call: `k` of the trainset, sampled with `seed` (or the first `k`)."""

    def __init__(self, k: int = 16, *, sample: bool = True, seed: int = 0) -> None:
        check_positive(k, "k")
        if not isinstance(sample, bool):
            raise TypeError(f"sample is True or False, got {sample!r}")
        self.k, self.sample, self.seed = k, sample, seed

    async def compile(
        self,
        program: Program,
        *,
        trainset: Iterable[Example],
        valset: Iterable[Example] | None = None,
        budget: Budget | None = None,
    ) -> Program:
        """Every predictor that shows demos gets `k` examples of the trainset (all their fields)."""
        if budget is not None:
            with budget_scope(budget):
                return await self.compile(program, trainset=trainset, valset=valset)
        self.check_program(program)
        examples = self.examples(trainset, "trainset")
        rng = random.Random(self.seed)
        demos: dict[str, list[dict[str, Any]]] = {}
        for predictor in program.parameters().predictors:
            if not predictor.takes_demos:
                continue
            chosen = rng.sample(examples, min(self.k, len(examples))) if self.sample else examples[: self.k]
            demos[predictor.name] = [e.to_dict() for e in chosen]
        made = program.with_parameters(demos=demos)
        result = OptimizationResult("LabeledFewShot")
        result.candidates.append(Candidate(0, made, made.parameters().instructions, (), (), 0, "fewshot"))
        self.result = result
        return mark(made, "LabeledFewShot", None, result)


class BootstrapFewShot(Optimizer):
    """Demos from the teacher's own runs over the trainset that pass the metric, then labelled ones."""

    def __init__(
        self,
        metric: Metric,
        *,
        metric_threshold: float | None = None,
        max_bootstrapped_demos: int = 4,
        max_labeled_demos: int = 16,
        max_rounds: int = 1,
        max_errors: int | None = None,
        teacher: Program | None = None,
        concurrency: int = 16,
        seed: int = 0,
    ) -> None:
        if not callable(metric):
            raise TypeError(f"metric is a function metric(example, prediction), got {type(metric).__name__}")
        check_positive(max_bootstrapped_demos, "max_bootstrapped_demos", allow_zero=True)
        check_positive(max_labeled_demos, "max_labeled_demos", allow_zero=True)
        check_positive(max_rounds, "max_rounds")
        check_positive(max_errors, "max_errors", allow_none=True)
        check_positive(concurrency, "concurrency")
        if metric_threshold is not None and (
            isinstance(metric_threshold, bool) or not isinstance(metric_threshold, int | float)
        ):
            raise TypeError(f"metric_threshold is a number or None, got {metric_threshold!r}")
        if teacher is not None:
            self.check_program(teacher)
        self.metric = metric
        self.metric_threshold = metric_threshold
        self.max_bootstrapped_demos = max_bootstrapped_demos
        self.max_labeled_demos = max_labeled_demos
        self.max_rounds = max_rounds
        self.max_errors = max_errors
        self.teacher = teacher
        self.concurrency = concurrency
        self.seed = seed

    def passes(self, row: Row) -> bool:
        """A run is kept when it did not fail and its score reaches the threshold (any positive score without one)."""
        if row.error is not None or row.prediction is None:
            return False
        if self.metric_threshold is None:
            return row.score > 0
        return row.score >= self.metric_threshold

    async def compile(
        self,
        program: Program,
        *,
        trainset: Iterable[Example],
        valset: Iterable[Example] | None = None,
        budget: Budget | None = None,
    ) -> Program:
        """Run the teacher over the trainset at once; keep passing runs (intermediate outputs such as
        `reasoning` included) as demos, later rounds at temperature 1.0 past the cache; fill up with labelled ones."""
        if budget is not None:
            with budget_scope(budget):
                return await self.compile(program, trainset=trainset, valset=valset)
        self.check_program(program)
        examples = self.examples(trainset, "trainset")
        teacher = self.teacher or program
        names = {id(p): n for n, p in teacher.predictor_programs()}
        wanted = [p.name for p in program.parameters().predictors if p.takes_demos]
        unknown = [n for n in wanted if n not in names.values()]
        if unknown:
            raise ValueError(
                f"BootstrapFewShot: the teacher has no predictor named {unknown}; a teacher has the student's "
                f"predictors ({wanted}), by the same names"
            )
        runner = Runner(self.metric, self.concurrency)
        started = time.monotonic()
        kept: dict[int, dict[str, list[dict[str, Any]]]] = {}
        errors = 0
        waiting = list(range(len(examples)))
        for round_ in range(self.max_rounds):
            if not waiting or len(kept) >= self.max_bootstrapped_demos:
                break
            overrides: dict[str, object] = {}
            if round_ > 0:  # a fresh sample: another temperature, and a rollout id the cache has not seen
                overrides["config"] = {"temperature": 1.0, "rollout_id": round_}
            rows = await runner.run(teacher, [examples[i] for i in waiting], traced=True, **overrides)
            still: list[int] = []
            for index, row in zip(waiting, rows, strict=True):
                if row.error is not None:
                    errors += 1
                    if self.max_errors is not None and errors >= self.max_errors:
                        raise OptimizationError(
                            f"BootstrapFewShot stopped: max_errors={self.max_errors} reached; last error: "
                            f"{type(row.error).__name__}: {row.error}",
                            max_errors=self.max_errors,
                        ) from row.error
                if self.passes(row):
                    per_predictor: dict[str, list[dict[str, Any]]] = {}
                    for entry in row.trace:
                        name = names.get(id(entry.program))
                        if name is not None:  # each predictor's own inputs and outputs, `reasoning` included
                            per_predictor.setdefault(name, []).append({**entry.inputs, **entry.outputs})
                    kept[index] = per_predictor
                else:
                    still.append(index)
            waiting = still
        chosen = sorted(kept)[: self.max_bootstrapped_demos]
        rest = [e for i, e in enumerate(examples) if i not in kept]
        random.Random(self.seed).shuffle(rest)
        demos: dict[str, list[dict[str, Any]]] = {}
        for name in wanted:
            booted = [demo for i in chosen for demo in kept[i].get(name, [])[:1]]
            labelled = [e.to_dict() for e in rest[: max(0, self.max_labeled_demos - len(booted))]]
            demos[name] = booted + labelled
        made = program.with_parameters(demos=demos)
        result = OptimizationResult("BootstrapFewShot", metric_calls=runner.budget.metric_calls)
        result.student_usage = runner.budget.student_usage
        result.elapsed = time.monotonic() - started
        result.candidates.append(Candidate(0, made, made.parameters().instructions, (), (), 0, "fewshot"))
        result.log.append(f"kept the runs of {len(chosen)} of {len(examples)} examples as demos")
        self.result = result
        return mark(made, "BootstrapFewShot", None, result)
