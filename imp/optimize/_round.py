"""One round of GEPA: several proposals run at once under the optimization's one concurrency limit, each
drawn before the round starts and each given its share of the metric calls in order, so that what the
round finds does not depend on which call returns first."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import anyio

from imp.errors import DeadlineExceeded
from imp.models.base import LM
from imp.optimize._pareto import accepts
from imp.optimize._reflect import proposed_instruction, reflection_messages
from imp.optimize._result import Candidate, StopReason
from imp.optimize._scoring import Row, Runner
from imp.prediction import Example
from imp.programs.base import Program
from imp.records import NO_USAGE, Usage
from imp.runtime.budget import BudgetExceeded
from imp.runtime.deadline import self_ending, time_left
from imp.runtime.journal import current_journal_scope, journal_position

__all__ = ["Ledger", "Merge", "Outcome", "Plan", "Proposals", "Reflect", "run_round"]


@dataclass(frozen=True)
class Reflect:
    """A reflective proposal as drawn before its round: its iteration, parent, training minibatch and predictor."""

    iteration: int
    parent: int
    batch: tuple[int, ...]
    predictor: str


@dataclass(frozen=True)
class Merge:
    """A merge as drawn before its round: the two parents, their ancestor, the merged texts, the examples to try."""

    iteration: int
    pair: tuple[int, int]
    ancestor: int
    components: Mapping[str, str]
    subsample: tuple[int, ...]


Plan = Reflect | Merge

Ending = Literal["cancelled", "perfect", "unchanged", "rejected", "duplicate", "accepted", "stopped", "failed"]
"""How a proposal ended: `stopped` when the budget or the time ran out, `cancelled` when its round was cut."""


@dataclass
class Outcome:
    """What one proposal did, folded back into the run in the round's order."""

    plan: Plan
    ending: Ending = "cancelled"
    reflected: bool = False
    """The reflection LM was asked (the parent's predictor turn is then used)."""
    log: str | None = None
    components: dict[str, str] | None = None
    program: Program | None = None
    val_scores: tuple[float, ...] = ()
    reflection_usage: Usage = NO_USAGE
    stop: StopReason | None = None
    error: Exception | None = None
    calls_through: int = 0
    """The round's metric calls up to and with this proposal's (where a run one at a time would stand)."""


class Ledger:
    """The metric calls a round may spend: each proposal reserves, in order, what it spends on minibatches; one
    that needs more (an accepted child's valset) waits for the earlier ones to finish and takes what they left.
    So every share is decided by the plan order, never by which call returned first."""

    def __init__(self, left: int | None, wants: Sequence[int]) -> None:
        self.left = left
        self.granted: list[int] = []
        rest = left
        for want in wants:
            share = want if rest is None else max(0, min(want, rest))
            self.granted.append(share)
            if rest is not None:
                rest -= share
        self.spent = [0] * len(wants)
        self.done = [anyio.Event() for _ in wants]

    async def take(self, slot: int, n: int) -> bool:
        """Whether proposal `slot` may make `n` more metric calls (counted as spent when it may)."""
        if self.left is None or self.spent[slot] + n <= self.granted[slot]:
            self.spent[slot] += n
            return True
        for earlier in self.done[:slot]:
            await earlier.wait()
        # The earlier proposals are done (their spending is final); the later ones keep their whole share.
        free = self.left - sum(self.spent[:slot]) - sum(self.granted[slot + 1 :]) - self.spent[slot]
        if n > free:
            return False
        self.spent[slot] += n
        self.granted[slot] = self.spent[slot]
        return True

    def calls_through(self, slot: int) -> int:
        """The metric calls the round's proposals up to `slot` spent (as if they had run one after another)."""
        return sum(self.spent[: slot + 1])


@dataclass
class Proposals:
    """What a round's proposals share: the runner, the reflection LM, the data and the candidates so far."""

    runner: Runner
    reflection_lm: LM
    train: Sequence[Example]
    val: Sequence[Example]
    candidates: Sequence[Candidate]
    with_components: Callable[[Program, Mapping[str, str]], Program]
    components: Callable[[Program], dict[str, str]]
    skip_perfect_score: bool = True
    perfect_score: float = 1.0
    decided: list[anyio.Event] = field(default_factory=list)
    accepted: list[dict[str, str] | None] = field(default_factory=list)

    def stop_reason(self) -> StopReason | None:
        """Why the run must stop now (the optimizer's timeout, an `imp.deadline` passed), or None."""
        if self.runner.budget.out_of_time():
            return "timeout"
        left = time_left()
        return "deadline" if left is not None and left <= 0 else None

    async def score(
        self, ledger: Ledger, slot: int, out: Outcome, program: Program, examples: Sequence[Example]
    ) -> list[Row] | None:
        """The rows, or None (with `out.stop` set) when the budget or the time does not allow the whole run."""
        out.stop = self.stop_reason()
        if out.stop is not None:
            return None
        if not await ledger.take(slot, len(examples)):
            out.stop = "budget"
            return None
        rows = await self.runner.run(program, examples)
        out.stop = self.stop_reason()  # rows cut short by the deadline are not a score
        return None if out.stop is not None else rows


def _want(plan: Plan, minibatch: int) -> int:
    # Only the minibatches: reserving the valset too would leave the last proposals of a round nearly nothing
    # once the budget runs low, and an accepted child (the rare case) can wait for the earlier proposals.
    return len(plan.subsample) if isinstance(plan, Merge) else 2 * minibatch


async def _reflect(ctx: Proposals, ledger: Ledger, slot: int, out: Outcome, plan: Reflect) -> None:
    parent = ctx.candidates[plan.parent]
    batch = [ctx.train[i] for i in plan.batch]
    before = await ctx.score(ledger, slot, out, parent.program, batch)
    if before is None:
        out.ending = "stopped"
        return
    if ctx.skip_perfect_score and all(r.score >= ctx.perfect_score for r in before):
        out.ending = "perfect"
        return
    current = dict(parent.instructions)
    messages = reflection_messages(parent.program.parameters(), plan.predictor, current[plan.predictor], before)
    out.reflected = True
    # Not under the evaluations' limit (as DSPy's num_threads): a round has at most one reflection per proposal
    # in flight, and the reflection LM is most often another model, with limits of its own.
    journal = current_journal_scope.get()
    if journal is None:
        response = await ctx.reflection_lm.request(messages)
    else:
        response = await journal.exchange(ctx.reflection_lm, messages, {}, lambda lm: lm.request(messages))
    out.reflection_usage = response.usage
    ctx.runner.budget.reflection_usage = ctx.runner.budget.reflection_usage + response.usage
    out.log = f"iteration {plan.iteration}: parent {plan.parent}, rewrote {plan.predictor!r}"
    proposal = proposed_instruction(response.text)
    if not proposal or proposal == current[plan.predictor]:
        out.ending = "unchanged"
        return
    child = ctx.with_components(parent.program, {**current, plan.predictor: proposal})
    after = await ctx.score(ledger, slot, out, child, batch)
    if after is None:
        out.ending = "stopped"
        return
    if not accepts([r.score for r in before], [r.score for r in after]):
        out.ending = "rejected"
        return
    out.components = ctx.components(child)
    ctx.accepted[slot] = out.components
    ctx.decided[slot].set()
    for earlier in range(slot):  # the same child accepted earlier in the round is one candidate, scored once
        await ctx.decided[earlier].wait()
        if ctx.accepted[earlier] == out.components:
            out.ending = "duplicate"
            return
    full = await ctx.score(ledger, slot, out, child, ctx.val)
    if full is None:
        out.ending = "stopped"
        return
    out.program, out.val_scores, out.ending = child, tuple(r.score for r in full), "accepted"


async def _merge(ctx: Proposals, ledger: Ledger, slot: int, out: Outcome, plan: Merge) -> None:
    i, j = plan.pair
    one, two = ctx.candidates[i], ctx.candidates[j]
    program = ctx.with_components(ctx.candidates[plan.ancestor].program, plan.components)
    rows = await ctx.score(ledger, slot, out, program, [ctx.val[k] for k in plan.subsample])
    if rows is None:
        out.ending = "stopped"
        return
    before = max(sum(one.val_scores[k] for k in plan.subsample), sum(two.val_scores[k] for k in plan.subsample))
    out.log = f"iteration {plan.iteration}: merged {i} and {j} over ancestor {plan.ancestor}"
    if sum(r.score for r in rows) < before:  # kept if it does at least as well as the better parent there
        out.ending = "rejected"
        return
    full = await ctx.score(ledger, slot, out, program, ctx.val)
    if full is None:
        out.ending = "stopped"
        return
    out.components, out.program = dict(plan.components), program
    out.val_scores, out.ending = tuple(r.score for r in full), "accepted"


async def _run(ctx: Proposals, ledger: Ledger, slot: int, out: Outcome, scope: anyio.CancelScope) -> None:
    try:
        if isinstance(out.plan, Merge):
            await _merge(ctx, ledger, slot, out, out.plan)
        else:
            await _reflect(ctx, ledger, slot, out, out.plan)
    except DeadlineExceeded:
        out.ending, out.stop = "stopped", "deadline"
    except BudgetExceeded:  # the run's imp.Budget refused a request: no proposal can go on
        out.ending, out.stop = "stopped", "budget_exceeded"
    except Exception as exc:  # raised when the round is folded, in order, as a run one at a time would
        out.ending, out.error = "failed", exc
    finally:
        ctx.decided[slot].set()
        ledger.done[slot].set()
    if out.ending == "stopped" and out.stop != "budget":
        scope.cancel()  # out of time: the round's other proposals stop too


async def _run_at(ctx: Proposals, ledger: Ledger, slot: int, out: Outcome, scope: anyio.CancelScope) -> None:
    with journal_position(f"s{slot}"):  # a journaled run keys each proposal by its slot, whatever the timing
        await _run(ctx, ledger, slot, out, scope)


async def run_round(ctx: Proposals, plans: Sequence[Plan], left: int | None, minibatch: int) -> list[Outcome]:
    """Run the plans at once; their outcomes in plan order (`cancelled` for those a deadline cut short)."""
    ledger = Ledger(left, [_want(p, minibatch) for p in plans])
    ctx.decided = [anyio.Event() for _ in plans]
    ctx.accepted = [None] * len(plans)
    outcomes = [Outcome(p) for p in plans]
    until = time_left()
    # At an `imp.deadline` the round stops its own calls, and the deadline's backstop waits for it: cancelling
    # the whole optimization would lose the best program so far.
    with self_ending(), anyio.move_on_after(math.inf if until is None else until), journal_position():
        async with anyio.create_task_group() as group:
            for slot, out in enumerate(outcomes):
                group.start_soon(_run_at, ctx, ledger, slot, out, group.cancel_scope)
    for slot, out in enumerate(outcomes):
        out.calls_through = ledger.calls_through(slot)
    return outcomes
