"""GEPA: reflective instruction evolution over a per-example Pareto front, on imp's concurrent runtime."""

from __future__ import annotations

import math
import os
import random
import sys
import time
from collections.abc import Iterable, Mapping
from typing import Any, Literal

import anyio

from imp.errors import DeadlineExceeded
from imp.evaluation.metrics import Metric
from imp.models.base import LM
from imp.optimize._base import Optimizer, check_positive, mark
from imp.optimize._checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from imp.optimize._merge import dominators, merge_subsample, propose_merge
from imp.optimize._pareto import Front, select_parent
from imp.optimize._result import Candidate, OptimizationResult, StopReason
from imp.optimize._round import Ledger, Merge, Outcome, Plan, Proposals, Reflect, run_round
from imp.optimize._scoring import Budget, Runner
from imp.optimize._state import State
from imp.prediction import Example
from imp.programs.base import Program
from imp.runtime.deadline import time_left
from imp.runtime.journal import Journal
from imp.settings import settings

__all__ = ["GEPA", "AutoBudget"]

AutoBudget = Literal["light", "medium", "heavy"]
_TOOL = "tool:"
_AUTO_CANDIDATES: dict[str, int] = {"light": 6, "medium": 12, "heavy": 18}


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
        proposals_at_once: int | None = None,
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
        check_positive(proposals_at_once, "proposals_at_once", allow_none=True)
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
        self.proposals_at_once = (
            max(1, 2 * concurrency // reflection_minibatch_size) if proposals_at_once is None else proposals_at_once
        )
        """How many proposals a round starts at once; 1 runs gepa's loop one iteration at a time. By default
        twice as many as the concurrency limit holds minibatches: a proposal waits on its reflection a third of
        its time, and a round lasts as long as its slowest proposal."""
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
        self,
        program: Program,
        *,
        trainset: Iterable[Example],
        valset: Iterable[Example] | None = None,
        run_id: str | None = None,
        journal: Journal | None = None,
    ) -> Program:
        """Evolve the program's instructions; returns the best candidate on the valset (the trainset if none).

        With `run_id` and a `journal` (or `imp.configure(journal=...)`) the optimization is a journaled
        run: called again after a crash, every LM exchange it recorded (the student's and the
        reflection LM's) is answered from the journal, and the run goes on live from there.
        """
        self.check_program(program)
        train = self.examples(trainset, "trainset")
        val = self.examples(valset, "valset", required=False) or train
        if journal is None and run_id is not None:
            journal = settings().journal
            if journal is None:
                raise TypeError("GEPA.compile was given run_id without a journal: pass journal=imp.SQLiteJournal(path)")
        if journal is not None:
            if run_id is None:
                raise TypeError(
                    "GEPA.compile was given a journal without run_id: a journaled run is named by its run_id"
                )
            given = {"trainset": [e.to_dict() for e in train], "valset": [e.to_dict() for e in val]}
            compiled = await journal.run(run_id, "GEPA", given, lambda: self._compile(program, train, val))
            if not isinstance(compiled, Program):
                raise TypeError(f"{journal!r} returned {type(compiled).__name__} for GEPA, not a program")
            return compiled
        return await self._compile(program, train, val)

    async def _compile(self, program: Program, train: list[Example], val: list[Example]) -> Program:
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
    def with_components(program: Program, components: Mapping[str, str]) -> Program:
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

    async def _loop(
        self,
        seed_program: Program,
        train: list[Example],
        val: list[Example],
        runner: Runner,
        result: OptimizationResult,
        names: list[str],
    ) -> None:
        state = State(random.Random(self.seed), Front(len(val))).start(self.minibatch)
        saved = read_checkpoint(self.log_dir) if self.log_dir is not None else None
        if saved is not None:  # resume where the run in this log directory stopped
            state = self._resume(saved, seed_program, len(train), len(val), runner, result)
        else:
            ctx = self._proposals(runner, train, val, result)
            out = Outcome(Reflect(-1, 0, (), ""))
            rows = await ctx.score(Ledger(runner.budget.left(), [len(val)]), 0, out, seed_program, val)
            if rows is None:
                result.stop_reason = out.stop or "budget"
                return
            seed = Candidate(
                0, seed_program, self.components(seed_program), (), tuple(r.score for r in rows), len(rows)
            )
            self._add(result, state.front, seed)
        while True:
            if self.log_dir is not None:
                budget = runner.budget
                sizes = (len(train), len(val))
                write_checkpoint(
                    self.log_dir,
                    state.checkpoint(self.seed, sizes, result, budget.metric_calls, budget.reflection_usage),
                )
            plans = self._plan(state, result, names, len(train), runner.budget.left(), len(val))
            if isinstance(plans, str):
                result.stop_reason = plans
                return
            ctx = self._proposals(runner, train, val, result)
            before = runner.budget.metric_calls
            outcomes = await run_round(ctx, plans, runner.budget.left(), self.minibatch)
            stop = self._fold(state, result, outcomes, before)
            if stop is not None:
                result.stop_reason = stop
                return

    def _resume(
        self,
        saved: Checkpoint,
        seed_program: Program,
        n_train: int,
        n_val: int,
        runner: Runner,
        result: OptimizationResult,
    ) -> State:
        if saved.seed != self.seed or saved.sizes != (n_train, n_val):
            raise ValueError(
                f"the log directory {self.log_dir} holds a run with seed {saved.seed} on "
                f"{saved.sizes[0]} training and {saved.sizes[1]} validation examples; this one has seed "
                f"{self.seed} on {n_train} and {n_val}: give another log_dir"
            )
        state = State.resumed(saved, self.minibatch, n_val)
        for c in saved.candidates:
            program = self.with_components(seed_program, dict(c["components"]))
            found = Candidate(
                len(result.candidates),
                program,
                dict(c["components"]),
                tuple(c["parents"]),
                tuple(c["val_scores"]),
                int(c["metric_calls"]),
                c["origin"],
            )
            self._add(result, state.front, found)
        result.best_index = saved.best_index
        runner.budget.metric_calls, runner.budget.reflection_usage = saved.metric_calls, saved.usage()
        result.log = list(saved.log)
        result.iterations = int(saved.counters.get("iterations", 0))
        return state

    def _proposals(
        self, runner: Runner, train: list[Example], val: list[Example], result: OptimizationResult
    ) -> Proposals:
        return Proposals(
            runner,
            self.reflection_lm,
            train,
            val,
            list(result.candidates),
            self.with_components,
            self.components,
            self.skip_perfect_score,
            self.perfect_score,
        )

    def _slots(self, state: State) -> int:
        """How many reflective proposals the next round may start: up to `proposals_at_once`, fewer when the
        stall limit or the reflection ceiling could be reached within the round."""
        slots = self.proposals_at_once
        if self.no_improvement_iterations is not None:
            slots = min(slots, self.no_improvement_iterations - state.stale)
        for ceiling, used, largest in (
            (self.max_reflection_tokens, state.reflection_tokens, state.largest_tokens),
            (self.max_reflection_cost, state.reflection_cost, state.largest_cost),
        ):
            if ceiling is None:
                continue
            if used >= ceiling:
                return 0
            if largest <= 0:  # how large a reflection is is not known yet: one at a time until it is
                slots = min(slots, 1) if state.reflections == 0 else slots
                continue
            # each proposal after the first starts only if the ones before it, at the largest reflection
            # seen, still leave the ceiling unreached
            slots = min(slots, math.ceil((ceiling - used) / largest))
        return slots

    def _plan(
        self,
        state: State,
        result: OptimizationResult,
        names: list[str],
        n_train: int,
        left: int | None = None,
        n_val: int = 0,
    ) -> list[Plan] | StopReason:
        """Draw every random choice of the next round, in order, before any of it runs."""
        plans: list[Plan] = []
        merges = state.merges
        if self.use_merge and merges.due > 0 and merges.found_new:
            merges.found_new = False
            scores = [c.score for c in result.candidates]
            found = propose_merge(
                state.rng,
                scores,
                dominators(state.front.members, scores),
                merges.log,
                [dict(c.instructions) for c in result.candidates],
                [c.parents for c in result.candidates],
                len(state.front.best) >= 5,
            )
            if found is not None:  # a merge takes one place of the round (with one at a time: the iteration)
                merged, i, j, ancestor = found
                merges.log.triplets.append((i, j, ancestor))
                one, two = result.candidates[i], result.candidates[j]
                picked = merge_subsample(state.rng, one.val_scores, two.val_scores)
                plans.append(Merge(state.iteration, (i, j), ancestor, merged, tuple(picked)))
                state.iteration += 1
        merges.found_new = False
        if len(plans) < self.proposals_at_once:
            slots = self._slots(state)
            if slots <= 0 and not plans:
                return "reflection_budget" if self._reflection_spent(state) else "no_improvement"
            if left is not None:
                # As many as leave room for one accepted child's valset after their minibatches (the earlier
                # proposals' children come first); once there is no such room, as many as the minibatches fit.
                pair = 2 * self.minibatch
                room = (left - n_val) // pair
                slots = min(slots, max(1, room if room > 0 else left // pair))
            scores = [c.score for c in result.candidates]
            taken: dict[int, int] = {}
            for _ in range(min(slots, self.proposals_at_once - len(plans))):
                parent = select_parent(state.front.members, scores, state.rng)
                batch = state.sampler.batch(state.iteration, n_train)
                turn = state.next_predictor.get(parent, 0) + taken.get(parent, 0)
                taken[parent] = taken.get(parent, 0) + 1
                plans.append(Reflect(state.iteration, parent, tuple(batch), names[turn % len(names)]))
                state.iteration += 1
        return plans

    def _reflection_spent(self, state: State) -> bool:
        tokens, cost = self.max_reflection_tokens, self.max_reflection_cost
        return (tokens is not None and state.reflection_tokens >= tokens) or (
            cost is not None and state.reflection_cost >= cost
        )

    def _fold(
        self, state: State, result: OptimizationResult, outcomes: list[Outcome], before: int
    ) -> StopReason | None:
        """Take the round's outcomes into the run in plan order; why the run stops, or None."""
        stop: StopReason | None = None
        for out in outcomes:
            if out.ending == "failed":
                assert out.error is not None
                raise out.error
            if out.ending == "cancelled":  # the round was cut short: what came before it is kept
                left = time_left()
                cut: StopReason = "deadline" if left is not None and left <= 0 else "timeout"
                return next((o.stop for o in outcomes if o.ending == "stopped" and o.stop != "budget"), cut)
            if out.log is not None:
                result.log.append(out.log)
            plan = out.plan
            if isinstance(plan, Reflect) and out.reflected:
                state.next_predictor[plan.parent] = state.next_predictor.get(plan.parent, 0) + 1
                state.count_reflection(out.reflection_usage)
            if out.ending == "stopped":
                stop = stop or out.stop or "budget"
                if out.stop != "budget":
                    return stop
                continue
            result.iterations += 1
            if out.ending != "accepted":
                if isinstance(plan, Reflect):
                    state.stale += 1
                continue
            assert out.program is not None and out.components is not None
            best_before = result.best_score
            reflective = isinstance(plan, Reflect)
            parents = (plan.parent,) if isinstance(plan, Reflect) else plan.pair
            child = Candidate(
                len(result.candidates),
                out.program,
                out.components,
                parents,
                out.val_scores,
                before + out.calls_through,
                "reflection" if reflective else "merge",
            )
            self._add(result, state.front, child)
            if reflective:
                state.stale = 0 if result.best_score > best_before else state.stale + 1
                state.merges.found_new = True
                if state.merges.tested < self.max_merge_invocations:
                    state.merges.due += 1
            else:
                state.merges.due -= 1
                state.merges.tested += 1
        return stop

    def describe(self) -> dict[str, Any]:
        """The options that shaped a run (for logs)."""
        return {"auto": self.auto, "max_metric_calls": self.max_metric_calls, "seed": self.seed}
