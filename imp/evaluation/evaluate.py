"""`imp.evaluate`: run a program over a devset, score each row with a metric, report the mean."""

from __future__ import annotations

import functools
import sys
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from imp.evaluation.metrics import Metric, run_metric, to_number
from imp.evaluation.parallel import check_concurrency, check_timeout, raise_if_cut_by_deadline, run_jobs
from imp.evaluation.progress import Progress
from imp.evaluation.report import EvaluationError, EvaluationReport, EvaluationRow, describe_error
from imp.prediction import Example
from imp.programs.base import Program, call
from imp.runtime.budget import Budget, BudgetExceeded, budget_scope
from imp.runtime.journal import Journal
from imp.runtime.usage import track_usage
from imp.settings import settings

__all__ = ["check_devset", "check_max_errors", "evaluate", "row_job"]


def check_devset(devset: Iterable[Any]) -> list[Example]:
    """Every item an `imp.Example` with declared inputs, checked before any call."""
    if isinstance(devset, Mapping | str | bytes):
        raise TypeError(f"a devset is a list of imp.Example, got {type(devset).__name__}")
    examples = list(devset)
    for i, item in enumerate(examples):
        if isinstance(item, Mapping):
            raise TypeError(
                f"devset item {i} is a {type(item).__name__}; evaluation takes imp.Example items with declared "
                "inputs, e.g. imp.Example(question=..., answer=...).with_inputs('question')"
            )
        if not isinstance(item, Example):
            raise TypeError(f"devset item {i} is a {type(item).__name__}, not an imp.Example")
        try:
            item.inputs()
        except ValueError:
            raise ValueError(
                f"devset item {i} has no declared inputs; mark them with .with_inputs('field', ...)"
            ) from None
    return examples


def check_max_errors(max_errors: int | None) -> int | None:
    """Refuse a max_errors that is not a positive integer (None is no limit)."""
    if max_errors is None:
        return None
    if isinstance(max_errors, bool) or not isinstance(max_errors, int) or max_errors < 1:
        raise ValueError(f"max_errors is a positive integer or None (no limit), got {max_errors!r}")
    return max_errors


def row_job(
    program: Program, metric: Metric, index: int, example: Example, failure_score: float
) -> Callable[[], Awaitable[EvaluationRow]]:
    """One row's work: the program on the example's inputs, then the metric; a failure becomes the row."""

    async def job() -> EvaluationRow:
        try:
            prediction = await call(program, example.inputs())
        except Exception as exc:
            return EvaluationRow(index, example, None, failure_score, error=exc, stage="program")
        try:
            score = await run_metric(metric, example, prediction)
        except Exception as exc:
            return EvaluationRow(index, example, prediction, failure_score, error=exc, stage="metric")
        return EvaluationRow(index, example, prediction, score.value, score.feedback)

    return job


async def evaluate(
    program: Program,
    devset: Iterable[Example],
    metric: Metric,
    *,
    concurrency: int = 16,
    max_errors: int | None = None,
    failure_score: float = 0.0,
    timeout: float | None = None,  # noqa: ASYNC109 - per row, applied as an imp.deadline
    progress: bool = True,
    run_id: str | None = None,
    journal: Journal | None = None,
    budget: Budget | None = None,
) -> EvaluationReport:
    """Run `program` on every example's inputs, score it with `metric(example, prediction)`, and report.

    The score is the mean row score (a number in 0..1 for bool metrics; `report.percent` gives
    DSPy's percentage). A row whose program or metric raises scores `failure_score` and is listed in
    `report.errors`; reaching `max_errors` raises `EvaluationError` instead of returning a score.
    `timeout` bounds each row. Progress goes to stderr: a bar on a terminal, plain lines otherwise.
    With `run_id` and a `journal` (or `imp.configure(journal=...)`) the evaluation is a journaled run:
    called again after a crash, finished rows are answered from the journal and the rest run live.
    Under `budget=imp.Budget(...)` (one account for the whole evaluation) a row the budget refuses
    stops the evaluation: no further row starts, and `imp.BudgetExceeded` is raised with `report`,
    the report of the rows that finished (the refused rows are not scored).
    """
    if budget is not None:
        with budget_scope(budget):
            return await evaluate(
                program,
                devset,
                metric,
                concurrency=concurrency,
                max_errors=max_errors,
                failure_score=failure_score,
                timeout=timeout,
                progress=progress,
                run_id=run_id,
                journal=journal,
            )
    if not isinstance(program, Program):
        raise TypeError(f"imp.evaluate runs an imp program, got {type(program).__name__}")
    if not callable(metric):
        raise TypeError(f"a metric is a function metric(example, prediction), got {type(metric).__name__}")
    examples = check_devset(devset)
    check_concurrency(concurrency)
    limit = check_max_errors(max_errors)
    row_timeout = check_timeout(timeout)
    failure = to_number(failure_score, "failure_score")
    if journal is None and run_id is not None:
        journal = settings().journal
        if journal is None:
            raise TypeError(
                "imp.evaluate was given run_id without a journal: pass journal=imp.SQLiteJournal(path), "
                "or set one with imp.configure(journal=...)"
            )
    if journal is not None:
        if run_id is None:
            raise TypeError("imp.evaluate was given a journal without run_id: a journaled run is named by its run_id")
        rows_inputs = {"rows": [example.inputs() for example in examples]}
        body = functools.partial(
            _evaluate, program, examples, metric, concurrency, limit, failure, row_timeout, progress
        )
        report = await journal.run(run_id, f"evaluate:{type(program).__name__}", rows_inputs, body)
        if not isinstance(report, EvaluationReport):
            raise TypeError(f"{journal!r} returned {type(report).__name__} for an evaluation, not a report")
        return report
    return await _evaluate(program, examples, metric, concurrency, limit, failure, row_timeout, progress)


async def _evaluate(
    program: Program,
    examples: list[Example],
    metric: Metric,
    concurrency: int,
    limit: int | None,
    failure: float,
    row_timeout: float | None,
    progress: bool,
) -> EvaluationReport:

    rows: list[EvaluationRow | None] = [None] * len(examples)
    display = Progress(len(examples), sys.stderr if progress else None)
    errors = 0
    stop_reason: str | None = None

    refused: list[BudgetExceeded] = []

    def on_done(index: int, outcome: EvaluationRow | Exception) -> bool:
        nonlocal errors, stop_reason
        row = outcome
        if isinstance(row, Exception):  # the row's timeout (or an error outside the row's own handling)
            row = EvaluationRow(index, examples[index], None, failure, error=row, stage="program")
        if isinstance(row.error, BudgetExceeded) and row.stage == "program":
            refused.append(row.error)  # not the program's failure: the row is left unscored, and no row starts
            return True
        rows[index] = row
        display.update(row.score, error=row.error is not None)
        if row.error is None:
            return False
        errors += 1
        if limit is not None and errors >= limit:
            stop_reason = f"max_errors={limit} reached; last error: {describe_error(row.error)}"
            return True
        return False

    jobs = [row_job(program, metric, i, ex, failure) for i, ex in enumerate(examples)]
    started = time.monotonic()
    try:
        with track_usage() as usage:
            await run_jobs(jobs, concurrency=concurrency, timeout=row_timeout, on_done=on_done)
    finally:
        display.close(stopped=stop_reason)
    finished = tuple(row for row in rows if row is not None)
    if refused:
        refused[0].report = EvaluationReport(finished, usage.total, usage.by_model, time.monotonic() - started)
        raise refused[0]
    raise_if_cut_by_deadline([row.error for row in finished])
    if stop_reason is not None:
        assert limit is not None
        raise EvaluationError(
            f"evaluation stopped after {len(finished)} of {len(examples)} rows: {stop_reason}",
            rows=finished,
            max_errors=limit,
        )
    return EvaluationReport(finished, usage.total, usage.by_model, time.monotonic() - started)
