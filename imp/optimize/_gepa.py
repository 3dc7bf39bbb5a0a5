"""GEPA: reflective instruction evolution over a per-example Pareto front, on imp's concurrent runtime."""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterable, Mapping
from typing import Unpack

import anyio

from imp._jsondata import JSONObject
from imp.errors import DeadlineExceeded
from imp.evaluation.metrics import Metric
from imp.models.base import LM
from imp.optimize._base import Optimizer, mark
from imp.optimize._checkpoint import Checkpoint, read_checkpoint, write_checkpoint
from imp.optimize._gepa_options import AUTO_CANDIDATES, AutoBudget, GEPAOptions, checked_options
from imp.optimize._merge import dominators, merge_subsample, propose_merge
from imp.optimize._pareto import Front, select_parent
from imp.optimize._result import Candidate, OptimizationResult, StopReason
from imp.optimize._round import Ledger, Merge, Outcome, Plan, Proposals, Reflect, run_round
from imp.optimize._scoring import Budget, Runner
from imp.optimize._state import State
from imp.prediction import Example
from imp.programs.base import Program
from imp.runtime.budget import Budget as RunBudget
from imp.runtime.budget import BudgetExceeded, budget_scope
from imp.runtime.deadline import time_left
from imp.runtime.journal import Journal
from imp.runtime.logging import get_logger, logs_enabled
from imp.settings import settings

__all__ = ["GEPA", "AutoBudget", "GEPAOptions"]

_TOOL = "tool:"


class GEPA(Optimizer):
    """Reflective prompt evolution (arXiv 2507.19457): a reflection LM rewrites one predictor's instruction
    at a time from the runs' feedback; children that beat their parent on a minibatch join the Pareto front.

    `imp.GEPA(metric, reflection_lm=lm, auto="light")`, then `await optimizer.compile(program,
    trainset=..., valset=...)`.

    Args:
        metric: `metric(example, prediction)`, sync or async, returning a bool, a number or
            `imp.Score(value, feedback=...)`. A metric without feedback optimizes poorly: the
            reflection LM then sees only the score.
        reflection_lm: the LM that reads a parent's runs and proposes a new instruction.
        **options: the budget (exactly one of `auto`, `max_metric_calls`, `max_full_evals`) and the
            rest of `GEPAOptions`, each documented there with its default. A name GEPA does not
            know is refused, with the closest one (and DSPy's names with imp's).

    Raises:
        TypeError: a metric or LM that cannot be called, an unknown option, a wrong option type.
        ValueError: no budget or more than one, a number out of its range.
    """

    def __init__(self, metric: Metric, *, reflection_lm: LM, **options: Unpack[GEPAOptions]) -> None:
        if not callable(metric):
            raise TypeError(f"metric is a function metric(example, prediction), got {type(metric).__name__}")
        if not callable(getattr(reflection_lm, "request", None)):
            raise TypeError(f"reflection_lm is an LM client such as imp.lm('openai:gpt-5'), got {reflection_lm!r}")
        self.metric = metric
        self.reflection_lm = reflection_lm
        self.options = checked_options(options)
        """Every option as this optimizer uses it: the given ones, the defaults, and `proposals_at_once`
        worked out when it was left to GEPA (see `GEPAOptions` for what each does)."""
        self.proposals_at_once: int = self.options["proposals_at_once"] or 1
        """How many proposals a round starts together (`options["proposals_at_once"]`, worked out)."""
        self._budget: int | None = None

    def metric_budget(self, n_train: int, n_val: int) -> int:
        """The metric calls this run may make: given, or from full evaluations, or from `auto`'s candidate count."""
        if self.options["max_metric_calls"] is not None:
            return self.options["max_metric_calls"]
        if self.options["max_full_evals"] is not None:
            return self.options["max_full_evals"] * (n_train + n_val)
        assert self.options["auto"] is not None
        return n_val + AUTO_CANDIDATES[self.options["auto"]] * (2 * self.options["reflection_minibatch_size"] + n_val)

    async def compile(
        self,
        program: Program,
        *,
        trainset: Iterable[Example],
        valset: Iterable[Example] | None = None,
        run_id: str | None = None,
        journal: Journal | None = None,
        budget: RunBudget | None = None,
    ) -> Program:
        """Evolve the program's instructions; returns the best candidate on the valset (the trainset if none).

        With `run_id` and a `journal` (or `imp.configure(journal=...)`) the optimization is a journaled
        run: called again after a crash, every LM exchange it recorded (the student's and the
        reflection LM's) is answered from the journal, and the run goes on live from there. Under
        `budget=imp.Budget(...)` (the student's and the reflection LM's requests alike) the optimization
        stops when the budget refuses a request, and returns the best candidate so far
        (`result.stop_reason == "budget_exceeded"`).
        """
        if budget is not None:
            with budget_scope(budget):
                return await self.compile(program, trainset=trainset, valset=valset, run_id=run_id, journal=journal)
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
        budget = Budget(
            self.metric_budget(len(train), len(val)),
            self.options["max_reflection_tokens"],
            self.options["max_reflection_cost"],
        )
        self._budget = budget.max_metric_calls
        if self.options["timeout"] is not None:
            budget.ends_at = time.monotonic() + self.options["timeout"]
        runner = Runner(self.metric, self.options["concurrency"], budget, self.options["failure_score"])
        result = OptimizationResult("GEPA")
        self.result = result  # kept up to date: a cancelled run's best so far is here
        started = time.monotonic()
        with anyio.move_on_after(self.options["timeout"]) as scope:
            try:
                await self._loop(program, train, val, runner, result, names)
            except DeadlineExceeded:
                result.stop_reason = "deadline"
            except BudgetExceeded:
                if not result.candidates:
                    raise
                result.stop_reason = "budget_exceeded"
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
        if self.options["optimize_tool_descriptions"]:
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
        if self.options["progress"] and logs_enabled():  # one line per new candidate
            get_logger().info(
                "gepa_candidate",
                candidate=candidate.index,
                origin=candidate.origin,
                score=round(candidate.score, 3),
                best=round(result.best_score, 3),
                metric_calls=candidate.metric_calls_at_discovery,
                budget=self._budget,
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
        state = State(random.Random(self.options["seed"]), Front(len(val))).start(
            self.options["reflection_minibatch_size"]
        )
        saved = read_checkpoint(self.options["log_dir"]) if self.options["log_dir"] is not None else None
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
            if self.options["log_dir"] is not None:
                budget = runner.budget
                sizes = (len(train), len(val))
                write_checkpoint(
                    self.options["log_dir"],
                    state.checkpoint(self.options["seed"], sizes, result, budget.metric_calls, budget.reflection_usage),
                )
            plans = self._plan(state, result, names, len(train), runner.budget.left(), len(val))
            if isinstance(plans, str):
                result.stop_reason = plans
                return
            ctx = self._proposals(runner, train, val, result)
            before = runner.budget.metric_calls
            outcomes = await run_round(ctx, plans, runner.budget.left(), self.options["reflection_minibatch_size"])
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
        if saved.seed != self.options["seed"] or saved.sizes != (n_train, n_val):
            raise ValueError(
                f"the log directory {self.options['log_dir']} holds a run with seed {saved.seed} on "
                f"{saved.sizes[0]} training and {saved.sizes[1]} validation examples; this one has seed "
                f"{self.options['seed']} on {n_train} and {n_val}: give another log_dir"
            )
        state = State.resumed(saved, self.options["reflection_minibatch_size"], n_val)
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
            self.options["skip_perfect_score"],
            self.options["perfect_score"],
        )

    def _slots(self, state: State) -> int:
        """How many reflective proposals the next round may start: up to `proposals_at_once`, fewer when the
        stall limit or the reflection ceiling could be reached within the round."""
        slots = self.proposals_at_once
        if self.options["no_improvement_iterations"] is not None:
            slots = min(slots, self.options["no_improvement_iterations"] - state.stale)
        for ceiling, used, largest in (
            (self.options["max_reflection_tokens"], state.reflection_tokens, state.largest_tokens),
            (self.options["max_reflection_cost"], state.reflection_cost, state.largest_cost),
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
        if self.options["use_merge"] and merges.due > 0 and merges.found_new:
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
                pair = 2 * self.options["reflection_minibatch_size"]
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
        tokens, cost = self.options["max_reflection_tokens"], self.options["max_reflection_cost"]
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
                if state.merges.tested < self.options["max_merge_invocations"]:
                    state.merges.due += 1
            else:
                state.merges.due -= 1
                state.merges.tested += 1
        return stop

    def describe(self) -> JSONObject:
        """The options that shaped a run (for logs)."""
        return {
            "auto": self.options["auto"],
            "max_metric_calls": self.options["max_metric_calls"],
            "seed": self.options["seed"],
        }
