"""Optimizers and evaluations under an `imp.Budget`: one account for the whole run, a refusal that
stops it (never a row scored as a failure), and what finished kept."""

from __future__ import annotations

import pytest
from helpers import examples, metric, reflection, student

import imp
from imp.optimize import GEPA, BootstrapFewShot


async def test_an_evaluation_stops_at_its_budget_and_keeps_the_report_of_what_finished() -> None:
    program = imp.predict("word -> answer", lm=student())
    devset = examples()
    budget = imp.Budget(requests=5)
    with pytest.raises(imp.BudgetExceeded) as caught:
        await imp.evaluate(program, devset, metric, concurrency=1, progress=False, budget=budget)
    report = caught.value.report
    assert report is not None and len(report.rows) == 5
    assert not any(row.error for row in report.rows), "a refused row is not scored as a failure"
    assert budget.spent.requests == 5


async def test_an_evaluation_within_its_budget_runs_every_row() -> None:
    program = imp.predict("word -> answer", lm=student())
    devset = examples()
    budget = imp.Budget(requests=len(devset))
    report = await imp.evaluate(program, devset, metric, progress=False, budget=budget)
    assert len(report.rows) == len(devset) and budget.spent.requests == len(devset)


async def test_bootstrap_stops_when_its_budget_refuses_a_request() -> None:
    program = imp.predict("word -> answer", lm=student())
    budget = imp.Budget(requests=3)
    with pytest.raises(imp.BudgetExceeded):
        await BootstrapFewShot(metric).compile(program, trainset=examples(), budget=budget)
    assert budget.spent.requests == 3


async def test_gepa_returns_its_best_so_far_when_the_budget_stops_it() -> None:
    program = imp.predict("word -> answer", lm=student())
    data = examples()
    optimizer = GEPA(metric, reflection_lm=reflection(), max_metric_calls=200, progress=False)
    budget = imp.Budget(requests=len(data[6:]) + 4)  # the valset once, then a few more
    made = await optimizer.compile(program, trainset=data[:6], valset=data[6:], budget=budget)
    assert isinstance(made, imp.Program)
    assert optimizer.result is not None and optimizer.result.stop_reason == "budget_exceeded"
    assert budget.spent.requests <= len(data[6:]) + 4


async def test_gepa_refused_before_its_first_score_raises() -> None:
    program = imp.predict("word -> answer", lm=student())
    data = examples()
    optimizer = GEPA(metric, reflection_lm=reflection(), max_metric_calls=200, progress=False)
    with pytest.raises(imp.BudgetExceeded):
        await optimizer.compile(program, trainset=data[:6], valset=data[6:], budget=imp.Budget(requests=1))
