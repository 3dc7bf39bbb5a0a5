"""Running candidates over examples for an optimizer: one concurrency limit, every metric call counted."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import anyio

from imp.evaluation.metrics import Metric, run_metric
from imp.evaluation.parallel import raise_if_cut_by_deadline
from imp.prediction import Example, Prediction
from imp.programs._parameters import TraceEntry, tracing
from imp.programs.base import Program, call
from imp.records import NO_USAGE, Usage
from imp.runtime.budget import BudgetExceeded
from imp.runtime.deadline import time_left
from imp.runtime.journal import journal_position
from imp.runtime.usage import track_usage

__all__ = ["Budget", "Row", "Runner"]


@dataclass(frozen=True)
class Row:
    """One example run through one candidate: the prediction (None when the program failed), score, feedback."""

    example: Example
    prediction: Prediction | None
    score: float
    feedback: str | None = None
    error: BaseException | None = None
    trace: tuple[TraceEntry, ...] = ()
    """Each predictor's call during the run, when the run was traced."""


class BudgetSpent(Exception):
    """The optimization's budget (metric calls, reflection tokens or cost, time) is spent."""


@dataclass
class Budget:
    """What an optimization may spend and what it has spent."""

    max_metric_calls: int | None = None
    max_reflection_tokens: int | None = None
    max_reflection_cost: float | None = None
    ends_at: float | None = None
    metric_calls: int = 0
    student_usage: Usage = NO_USAGE
    reflection_usage: Usage = NO_USAGE

    def left(self) -> int | None:
        """Metric calls left (None: no limit on them)."""
        return None if self.max_metric_calls is None else self.max_metric_calls - self.metric_calls

    def out_of_time(self) -> bool:
        """True once the optimization's timeout has passed."""
        return self.ends_at is not None and time.monotonic() >= self.ends_at

    def reflection_spent(self) -> bool:
        """True once the reflection LM has used its ceiling of tokens or cost."""
        used = self.reflection_usage
        if (
            self.max_reflection_tokens is not None
            and used.input_tokens + used.output_tokens >= self.max_reflection_tokens
        ):
            return True
        return self.max_reflection_cost is not None and (used.cost or 0.0) >= self.max_reflection_cost

    def can_run(self, n: int) -> bool:
        """Whether `n` more metric calls fit the budget and time is left."""
        left = self.left()
        if self.out_of_time():
            return False
        deadline_left = time_left()
        if deadline_left is not None and deadline_left <= 0:
            return False
        return left is None or n <= left


@dataclass
class Runner:
    """Runs a candidate on examples under the optimization's one concurrency limit, counting metric calls."""

    metric: Metric
    concurrency: int
    budget: Budget = field(default_factory=Budget)
    failure_score: float = 0.0
    _limiter: anyio.CapacityLimiter | None = None

    @property
    def limiter(self) -> anyio.CapacityLimiter:
        """The one limit on calls in flight for the whole optimization (made in the running loop)."""
        if self._limiter is None:
            self._limiter = anyio.CapacityLimiter(self.concurrency)
        return self._limiter

    async def run(
        self, program: Program, examples: Sequence[Example], *, traced: bool = False, **overrides: object
    ) -> list[Row]:
        """Every example through `program` (and the metric), concurrently; rows in the examples' order
        (with `traced`, each row holds every predictor's inputs and outputs)."""
        rows: list[Row | None] = [None] * len(examples)
        self.budget.metric_calls += len(examples)

        async def one(index: int, example: Example) -> None:
            async with self.limiter:
                with tracing() as trace, journal_position(f"i{index}"):
                    try:
                        prediction = await call(program, {**example.inputs(), **overrides})
                    except Exception as exc:
                        rows[index] = Row(example, None, self.failure_score, None, exc)
                        return
                kept = tuple(trace) if traced else ()
                try:
                    score = await run_metric(self.metric, example, prediction)
                except Exception as exc:
                    rows[index] = Row(example, prediction, self.failure_score, None, exc)
                    return
                rows[index] = Row(example, prediction, score.value, score.feedback, trace=kept)

        with track_usage() as usage, journal_position():
            async with anyio.create_task_group() as group:
                for i, example in enumerate(examples):
                    group.start_soon(one, i, example)
        self.budget.student_usage = self.budget.student_usage + usage.total
        done = [r for r in rows if r is not None]
        # Calls the caller's deadline cut short are not failed examples: the optimization stops there
        # (`imp.DeadlineExceeded`) rather than go on to build a program from what the deadline cut.
        raise_if_cut_by_deadline([r.error for r in done])
        for row in done:  # a refused request is not a failed example: the optimization stops there
            if isinstance(row.error, BudgetExceeded):
                raise row.error
        return done
