"""GEPA: reflective instruction evolution over a per-example Pareto front, on imp's concurrent runtime."""

from __future__ import annotations

import os
import random
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Literal

import anyio

from imp.errors import DeadlineExceeded
from imp.evaluation.metrics import Metric
from imp.models.base import LM
from imp.optimize._base import Optimizer, check_positive, mark
from imp.optimize._checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from imp.optimize._merge import MergeLog, dominators, merge_subsample, propose_merge
from imp.optimize._pareto import Front, MinibatchSampler, accepts, select_parent
from imp.optimize._reflect import proposed_instruction, reflection_messages
from imp.optimize._result import Candidate, OptimizationResult
from imp.optimize._scoring import Budget, Row, Runner
from imp.prediction import Example
from imp.programs.base import Program
from imp.runtime.deadline import time_left

__all__ = ["GEPA", "AutoBudget"]

AutoBudget = Literal["light", "medium", "heavy"]
_TOOL = "tool:"
_AUTO_CANDIDATES: dict[str, int] = {"light": 6, "medium": 12, "heavy": 18}


@dataclass
class _Merges:
    """Merge bookkeeping: merges due, tried, and whether the last iteration found a new program."""

    log: MergeLog
    due: int = 0
    tested: int = 0
    found_new: bool = False


class GEPA(Optimizer):
    """Reflective prompt evolution (arXiv 2507.19457): a reflection LM rewrites one predictor's instruction
    at a time from the runs' feedback; children that beat their parent on a minibatch join the Pareto front.

    A metric without feedback (`imp.Score(value, feedback=...)`) optimizes poorly: the reflection LM
    then sees only the score.
    """

    def __init__(
        self,
        metric: Metric,
        *,
        reflection_lm: LM,
        auto: AutoBudget | None = None,
        max_metric_calls: int | None = None,
        max_full_evals: int | None = None,
        reflection_minibatch_size: int = 3,
        max_reflection_tokens: int | None = None,
        max_reflection_cost: float | None = None,
        timeout: float | None = None,
        no_improvement_iterations: int | None = None,
        skip_perfect_score: bool = True,
        perfect_score: float = 1.0,
        optimize_tool_descriptions: bool = False,
        use_merge: bool = True,
        progress: bool = True,
        log_dir: str | os.PathLike[str] | None = None,
        max_merge_invocations: int = 5,
        concurrency: int = 16,
        failure_score: float = 0.0,
        seed: int = 0,
    ) -> None:
        if not callable(metric):
            raise TypeError(f"metric is a function metric(example, prediction), got {type(metric).__name__}")
        if not callable(getattr(reflection_lm, "request", None)):
            raise TypeError(f"reflection_lm is an LM client such as imp.lm('openai:gpt-5'), got {reflection_lm!r}")
        given = [
            n
            for n, v in (("auto", auto), ("max_metric_calls", max_metric_calls), ("max_full_evals", max_full_evals))
            if v is not None
        ]
        if len(given) != 1:
            raise ValueError(
                "GEPA needs exactly one budget: auto='light'|'medium'|'heavy', max_metric_calls=N or "
                f"max_full_evals=N; got {given or 'none'}"
            )
        if auto is not None and auto not in _AUTO_CANDIDATES:
            raise ValueError(f"auto is 'light', 'medium' or 'heavy', got {auto!r}")
        check_positive(max_metric_calls, "max_metric_calls", allow_none=True)
        check_positive(max_full_evals, "max_full_evals", allow_none=True)
        check_positive(reflection_minibatch_size, "reflection_minibatch_size")
        check_positive(max_reflection_tokens, "max_reflection_tokens", allow_none=True)
        check_positive(no_improvement_iterations, "no_improvement_iterations", allow_none=True)
        check_positive(concurrency, "concurrency")
        check_positive(max_merge_invocations, "max_merge_invocations", allow_zero=True)
        if not isinstance(use_merge, bool):
            raise TypeError(f"use_merge is True or False, got {use_merge!r}")
        self.use_merge, self.max_merge_invocations = use_merge, max_merge_invocations
        self.progress = bool(progress)
        self.log_dir = log_dir
        for name, value in (("max_reflection_cost", max_reflection_cost), ("timeout", timeout)):
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value <= 0):
                raise ValueError(f"{name} is a positive number or None, got {value!r}")
        self.metric = metric
        self.reflection_lm = reflection_lm
        self.auto, self.max_metric_calls, self.max_full_evals = auto, max_metric_calls, max_full_evals
        self.minibatch = reflection_minibatch_size
        self.max_reflection_tokens, self.max_reflection_cost = max_reflection_tokens, max_reflection_cost
        self.timeout = timeout
        self.no_improvement_iterations = no_improvement_iterations
        self.skip_perfect_score, self.perfect_score = skip_perfect_score, perfect_score
        self.optimize_tool_descriptions = optimize_tool_descriptions
        self.concurrency, self.failure_score, self.seed = concurrency, failure_score, seed
        self._budget: int | None = None

    def metric_budget(self, n_train: int, n_val: int) -> int:
        """The metric calls this run may make: given, or from full evaluations, or from `auto`'s candidate count."""
        if self.max_metric_calls is not None:
            return self.max_metric_calls
        if self.max_full_evals is not None:
            return self.max_full_evals * (n_train + n_val)
        assert self.auto is not None
        return n_val + _AUTO_CANDIDATES[self.auto] * (2 * self.minibatch + n_val)

    async def compile(
        self, program: Program, *, trainset: Iterable[Example], valset: Iterable[Example] | None = None
    ) -> Program:
        """Evolve the program's instructions; returns the best candidate on the valset (the trainset if none)."""
        self.check_program(program)
        train = self.examples(trainset, "trainset")
        val = self.examples(valset, "valset", required=False) or train
        names = list(self.components(program))
        if not names:
            raise ValueError("GEPA needs a program with at least one predictor; this one has none")
        budget = Budget(self.metric_budget(len(train), len(val)), self.max_reflection_tokens, self.max_reflection_cost)
        self._budget = budget.max_metric_calls
        if self.timeout is not None:
            budget.ends_at = time.monotonic() + self.timeout
        runner = Runner(self.metric, self.concurrency, budget, self.failure_score)
        result = OptimizationResult("GEPA")
        self.result = result  # kept up to date: a cancelled run's best so far is here
        started = time.monotonic()
        with anyio.move_on_after(self.timeout) as scope:
            try:
                await self._loop(program, train, val, runner, result, names)
            except DeadlineExceeded:
                result.stop_reason = "deadline"
            finally:
                result.metric_calls = budget.metric_calls
                result.student_usage, result.reflection_usage = budget.student_usage, budget.reflection_usage
                result.elapsed = time.monotonic() - started
        if scope.cancelled_caught:
            result.stop_reason = "timeout"
        if not result.candidates:
            raise DeadlineExceeded("GEPA stopped before it had scored the program on the valset")
        return mark(result.best_program, "GEPA", result.best_score, result)

    def components(self, program: Program) -> dict[str, str]:
        """What GEPA rewrites: each predictor's instructions, and with `optimize_tool_descriptions`
        each tool's description (as `tool:<name>`)."""
        params = program.parameters()
        found = dict(params.instructions)
        if self.optimize_tool_descriptions:
            found.update({f"{_TOOL}{t.name}": t.description for t in params.tools})
        return found

    @staticmethod
    def with_components(program: Program, components: dict[str, str]) -> Program:
        """The program with these instructions and tool descriptions."""
        tools = {k[len(_TOOL) :]: v for k, v in components.items() if k.startswith(_TOOL)}
        instructions = {k: v for k, v in components.items() if not k.startswith(_TOOL)}
        return program.with_parameters(instructions=instructions, tool_descriptions=tools or None)

    def _add(self, result: OptimizationResult, front: Front, candidate: Candidate) -> None:
        result.candidates.append(candidate)
        front.add(candidate.index, candidate.val_scores)
        if candidate.score > result.best_score:
            result.best_index = candidate.index
        if self.progress:  # one line per new candidate: its score, the best so far, the budget spent
            budget = "" if self._budget is None else f" of {self._budget}"
            print(
                f"GEPA: candidate {candidate.index} ({candidate.origin}) scored {candidate.score:.3f}; "
                f"best {result.best_score:.3f}; {candidate.metric_calls_at_discovery}{budget} metric calls",
                file=sys.stderr,
            )

    async def _score(self, runner: Runner, program: Program, examples: list[Example]) -> list[Row] | None:
        """The rows, or None when the budget or the deadline does not allow the whole run."""
        if not runner.budget.can_run(len(examples)):
            return None
        rows = await runner.run(program, examples)
        left = time_left()
        if (left is not None and left <= 0) or runner.budget.out_of_time():
            return None  # rows cut short by the deadline are not a score
        return rows

    async def _loop(
        self,
        seed_program: Program,
        train: list[Example],
        val: list[Example],
        runner: Runner,
        result: OptimizationResult,
        names: list[str],
    ) -> None:
        rng = random.Random(self.seed)
        sampler = MinibatchSampler(self.minibatch, rng)
        front = Front(len(val))
        next_predictor: dict[int, int] = {}
        stale = 0
        iteration = -1
        merges = _Merges(MergeLog())
        saved = read_checkpoint(self.log_dir) if self.log_dir is not None else None
        if saved is not None:  # resume where the run in this log directory stopped
            if saved.seed != self.seed or saved.sizes != (len(train), len(val)):
                raise ValueError(
                    f"the log directory {self.log_dir} holds a run with seed {saved.seed} on "
                    f"{saved.sizes[0]} training and {saved.sizes[1]} validation examples; this one has seed "
                    f"{self.seed} on {len(train)} and {len(val)}: give another log_dir"
                )
            rng = saved.random()
            sampler = MinibatchSampler(self.minibatch, rng)
            sampler.order, sampler.epoch = list(saved.sampler["order"]), int(saved.sampler["epoch"])
            for c in saved.candidates:
                program = self.with_components(seed_program, dict(c["components"]))
                self._add(
                    result,
                    front,
                    Candidate(
                        len(result.candidates),
                        program,
                        dict(c["components"]),
                        tuple(c["parents"]),
                        tuple(c["val_scores"]),
                        int(c["metric_calls"]),
                        c["origin"],
                    ),
                )
            result.best_index = saved.best_index
            runner.budget.metric_calls, runner.budget.reflection_usage = saved.metric_calls, saved.usage()
            next_predictor, stale, iteration = saved.next_predictor, saved.stale, saved.iteration
            merges = _Merges(MergeLog(), saved.merges["due"], saved.merges["tested"], saved.merges["found_new"])
            merges.log.triplets = [(a, b, c) for a, b, c in saved.merges["triplets"]]
            merges.log.descriptions = [(a, b, tuple(d)) for a, b, d in saved.merges["descriptions"]]
            result.log = list(saved.log)
        else:
            rows = await self._score(runner, seed_program, val)
            if rows is None:
                result.stop_reason = "budget" if not runner.budget.out_of_time() else "timeout"
                return
            seed = Candidate(
                0,
                seed_program,
                self.components(seed_program),
                (),
                tuple(r.score for r in rows),
                runner.budget.metric_calls,
            )
            self._add(result, front, seed)
        while True:
            if self.log_dir is not None:
                write_checkpoint(
                    self.log_dir,
                    Checkpoint(
                        self.seed,
                        (len(train), len(val)),
                        iteration,
                        [
                            {
                                "components": dict(c.instructions),
                                "parents": list(c.parents),
                                "val_scores": list(c.val_scores),
                                "metric_calls": c.metric_calls_at_discovery,
                                "origin": c.origin,
                            }
                            for c in result.candidates
                        ],
                        result.best_index,
                        runner.budget.metric_calls,
                        runner.budget.reflection_usage.dump(),
                        rng.getstate(),
                        {"order": sampler.order, "epoch": sampler.epoch},
                        {
                            "due": merges.due,
                            "tested": merges.tested,
                            "found_new": merges.found_new,
                            "triplets": merges.log.triplets,
                            "descriptions": merges.log.descriptions,
                        },
                        next_predictor,
                        stale,
                        list(result.log),
                    ),
                )
            iteration += 1
            result.iterations = iteration
            if self.use_merge and merges.due > 0 and merges.found_new:
                merges.found_new = False
                outcome = await self._merge(rng, runner, result, front, merges, len(val) >= 5, val)
                if outcome == "stop":
                    result.stop_reason = "budget" if not runner.budget.out_of_time() else "timeout"
                    return
                if outcome != "none":
                    continue  # a merge was tried: no reflection this iteration, as in gepa
            merges.found_new = False
            if runner.budget.reflection_spent():
                result.stop_reason = "reflection_budget"
                return
            if self.no_improvement_iterations is not None and stale >= self.no_improvement_iterations:
                result.stop_reason = "no_improvement"
                return
            scores = [c.score for c in result.candidates]
            parent_index = select_parent(front.members, scores, rng)
            parent = result.candidates[parent_index]
            batch = [train[i] for i in sampler.batch(iteration, len(train))]
            before = await self._score(runner, parent.program, batch)
            if before is None:
                result.stop_reason = "budget" if not runner.budget.out_of_time() else "timeout"
                return
            if self.skip_perfect_score and all(r.score >= self.perfect_score for r in before):
                stale += 1
                continue
            turn = next_predictor.get(parent_index, 0)
            predictor = names[turn % len(names)]
            next_predictor[parent_index] = turn + 1
            params = parent.program.parameters()
            current = dict(parent.instructions)
            messages = reflection_messages(params, predictor, current[predictor], before)
            response = await self.reflection_lm.request(messages)
            runner.budget.reflection_usage = runner.budget.reflection_usage + response.usage
            proposal = proposed_instruction(response.text)
            result.log.append(f"iteration {iteration}: parent {parent_index}, rewrote {predictor!r}")
            if not proposal or proposal == current[predictor]:
                stale += 1
                continue
            child_program = self.with_components(parent.program, {**current, predictor: proposal})
            after = await self._score(runner, child_program, batch)
            if after is None:
                result.stop_reason = "budget" if not runner.budget.out_of_time() else "timeout"
                return
            if not accepts([r.score for r in before], [r.score for r in after]):
                stale += 1
                continue
            full = await self._score(runner, child_program, val)
            if full is None:
                result.stop_reason = "budget" if not runner.budget.out_of_time() else "timeout"
                return
            best_before = result.best_score
            child = Candidate(
                len(result.candidates),
                child_program,
                self.components(child_program),
                (parent_index,),
                tuple(r.score for r in full),
                runner.budget.metric_calls,
                "reflection",
            )
            self._add(result, front, child)
            stale = 0 if result.best_score > best_before else stale + 1
            merges.found_new = True
            if merges.tested < self.max_merge_invocations:
                merges.due += 1

    async def _merge(
        self,
        rng: random.Random,
        runner: Runner,
        result: OptimizationResult,
        front: Front,
        merges: _Merges,
        overlap: bool,
        val: list[Example],
    ) -> Literal["none", "rejected", "accepted", "stop"]:
        """Try one merge of two descendants of a common ancestor; kept if it does as well as the better parent."""
        scores = [c.score for c in result.candidates]
        found = propose_merge(
            rng,
            scores,
            dominators(front.members, scores),
            merges.log,
            [dict(c.instructions) for c in result.candidates],
            [c.parents for c in result.candidates],
            overlap,
        )
        if found is None:
            return "none"
        merged, i, j, ancestor = found
        merges.log.triplets.append((i, j, ancestor))
        one, two = result.candidates[i], result.candidates[j]
        picked = merge_subsample(rng, one.val_scores, two.val_scores)
        program = self.with_components(result.candidates[ancestor].program, merged)
        rows = await self._score(runner, program, [val[k] for k in picked])
        if rows is None:
            return "stop"
        before = max(sum(one.val_scores[k] for k in picked), sum(two.val_scores[k] for k in picked))
        result.log.append(f"iteration {result.iterations}: merged {i} and {j} over ancestor {ancestor}")
        if sum(r.score for r in rows) < before:
            return "rejected"
        full = await self._score(runner, program, val)
        if full is None:
            return "stop"
        self._add(
            result,
            front,
            Candidate(
                len(result.candidates),
                program,
                dict(merged),
                (i, j),
                tuple(r.score for r in full),
                runner.budget.metric_calls,
                "merge",
            ),
        )
        merges.due -= 1
        merges.tested += 1
        return "accepted"

    def describe(self) -> dict[str, Any]:
        """The options that shaped a run (for logs)."""
        return {"auto": self.auto, "max_metric_calls": self.max_metric_calls, "seed": self.seed}
