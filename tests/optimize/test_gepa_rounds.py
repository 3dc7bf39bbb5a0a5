"""GEPA with several proposals at once: the same run for the same seed whatever the timing, exact budgets,
a deadline in the middle of a round, and one proposal at a time reproducing the sequential loop."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import anyio
import pytest
import scenarios
from helpers import RULE, examples, metric, student_handler
from imp_backends import both_backends

import imp
from imp.models.base import LMResponse
from imp.optimize import GEPA


def _jittered(handler: Any, jitter: random.Random, in_flight: list[int] | None = None) -> imp.StaticLM:
    """The handler behind a latency drawn anew for every call (from a generator the run's seed does not touch)."""

    async def slow(messages: list[Any], options: dict[str, Any]) -> Any:
        if in_flight is not None:
            in_flight[0] += 1
        try:
            await anyio.sleep(jitter.random() * 0.01)
            return handler(messages, options)
        finally:
            if in_flight is not None:
                in_flight[0] -= 1

    return imp.StaticLM(slow)


def _reflection_handler() -> Any:
    def handler(messages: list[Any], options: dict[str, Any]) -> LMResponse:
        text = str(messages[-1]["content"])
        proposal = RULE if "must be uppercase" in text else "Answer carefully."
        return LMResponse(text=f"```\n{proposal}\n```", usage=imp.Usage(input_tokens=10, output_tokens=2))

    return handler


def test_one_proposal_at_a_time_reproduces_the_sequential_loop() -> None:
    """`sequential_runs.json` holds what GEPA's loop gave, one iteration after another, before rounds
    existed: the same candidates, scores, merges, log, metric calls and stop reasons."""
    pinned = json.loads((Path(__file__).parent / "sequential_runs.json").read_text())

    async def main() -> list[dict[str, Any]]:
        return [await scenarios.run(s, proposals_at_once=1) for s in scenarios.SCENARIOS]

    runs = anyio.run(main)
    assert len(runs) == len(pinned) == len(scenarios.SCENARIOS)
    for scenario, got, want in zip(scenarios.SCENARIOS, runs, pinned, strict=True):
        assert got == want, scenario
    assert any(c[4] == "merge" for run in runs for c in run["candidates"])  # merges are among what is pinned


@pytest.mark.parametrize("at_once", [2, 4, 10])
async def test_several_at_once_still_find_the_rule_within_the_budget(at_once: int) -> None:
    optimizer = GEPA(
        metric,
        reflection_lm=_jittered(_reflection_handler(), random.Random()),
        max_metric_calls=60,
        proposals_at_once=at_once,
        progress=False,
    )
    program = imp.predict("word -> answer", lm=_jittered(student_handler, random.Random()))
    made = await optimizer.compile(program, trainset=examples()[:6], valset=examples()[6:])
    assert made.signature.instructions.startswith(RULE)
    assert optimizer.result is not None and optimizer.result.best_score == 1.0
    assert optimizer.result.metric_calls <= 60


@pytest.mark.parametrize("at_once", [2, 3, 7])
@pytest.mark.parametrize("budget", [7, 11, 17, 40, 83])
async def test_budgets_are_exact_ceilings_counted_at_the_metric(at_once: int, budget: int) -> None:
    calls = 0

    def counted(example: imp.Example, prediction: imp.Prediction) -> imp.Score:
        nonlocal calls
        calls += 1
        return scenarios.partial_metric(example, prediction)

    optimizer = GEPA(
        counted,
        reflection_lm=scenarios.ordered_reflection(),
        max_metric_calls=budget,
        proposals_at_once=at_once,
        progress=False,
        seed=at_once,
    )
    program = scenarios.Steps(_jittered(scenarios.steps_handler, random.Random())).with_parameters(
        instructions={"first.predict": "One.", "second.predict": "Two."}
    )
    data = scenarios.data()
    await optimizer.compile(program, trainset=data[:6], valset=data[6:])
    assert optimizer.result is not None
    assert calls == optimizer.result.metric_calls <= budget
    if budget >= 40:  # the budget, not anything else, ended the run, and nearly all of it was used
        assert optimizer.result.stop_reason == "budget" and calls >= budget - 6


async def test_the_same_seed_gives_the_same_run_with_several_at_once_and_random_latencies() -> None:
    runs = []
    for _ in range(3):
        optimizer = GEPA(
            scenarios.partial_metric,
            reflection_lm=_jittered(scenarios.keyed_reflection, random.Random()),
            max_metric_calls=250,
            proposals_at_once=4,
            seed=11,
            progress=False,
            concurrency=5,
        )
        program = scenarios.Steps(_jittered(scenarios.steps_handler, random.Random())).with_parameters(
            instructions={"first.predict": "One.", "second.predict": "Two."}
        )
        data = scenarios.data()
        await optimizer.compile(program, trainset=data[:6], valset=data[6:])
        result = optimizer.result
        assert result is not None
        runs.append(
            (
                [
                    (dict(c.instructions), c.parents, c.val_scores, c.metric_calls_at_discovery)
                    for c in result.candidates
                ],
                result.log,
                result.metric_calls,
                result.iterations,
            )
        )
    assert runs[0] == runs[1] == runs[2]
    assert len(runs[0][0]) > 2


async def test_the_report_lists_every_candidate_with_its_parents_and_scores_per_example() -> None:
    optimizer = GEPA(
        scenarios.exact_metric,
        reflection_lm=_jittered(scenarios.keyed_reflection, random.Random()),
        max_metric_calls=400,
        proposals_at_once=4,
        seed=2,
    )
    program = scenarios.Steps(imp.StaticLM(scenarios.steps_handler)).with_parameters(
        instructions={"first.predict": "One.", "second.predict": "Two."}
    )
    data = scenarios.data()
    await optimizer.compile(program, trainset=data[:6], valset=data[6:])
    result = optimizer.result
    assert result is not None and len(result.candidates) >= 3
    assert [c.index for c in result.candidates] == list(range(len(result.candidates)))
    for c in result.candidates:
        assert len(c.val_scores) == 6 and all(p < c.index for p in c.parents)
        assert len(c.parents) == {"seed": 0, "reflection": 1, "merge": 2}[c.origin]
        assert c.program.parameters().instructions == dict(c.instructions)
    calls = [c.metric_calls_at_discovery for c in result.candidates]
    assert calls == sorted(calls) and calls[-1] <= result.metric_calls
    assert result.best_score == max(c.score for c in result.candidates)
    assert any(c.origin == "merge" for c in result.candidates)  # merges take part in rounds too


async def test_an_identical_child_accepted_twice_in_a_round_is_scored_once() -> None:
    optimizer = GEPA(
        metric, reflection_lm=imp.StaticLM(_reflection_handler()), max_metric_calls=60, proposals_at_once=4
    )
    program = imp.predict("word -> answer", lm=imp.StaticLM(student_handler))
    await optimizer.compile(program, trainset=examples()[:6], valset=examples()[6:])
    result = optimizer.result
    assert result is not None
    # four proposals of the seed all find the rule; one candidate, one valset evaluation
    found = [c for c in result.candidates if c.instructions["predict"] == RULE]
    assert len(found) == 1 and found[0].metric_calls_at_discovery == 4 + 3 + 3 + 4  # the seed's, then its own
    assert result.log[:4] == [f"iteration {i}: parent 0, rewrote 'predict'" for i in range(4)]


@both_backends
async def test_a_deadline_in_the_middle_of_a_round_returns_the_best_so_far_and_leaves_nothing_running() -> None:
    in_flight = [0]
    calls = [0]
    round_one = 4 + 4 * (3 + 3) + 4  # the seed's valset; four proposals' two minibatches; one child's valset

    async def student_lm(messages: list[Any], options: dict[str, Any]) -> Any:
        calls[0] += 1
        in_flight[0] += 1
        try:
            # the seed and round one answer at once; round two's calls hang until the deadline cuts them
            await anyio.sleep(0 if calls[0] <= round_one else 30)
            return student_handler(messages, options)
        finally:
            in_flight[0] -= 1

    program = imp.predict("word -> answer", lm=imp.StaticLM(student_lm))
    options: dict[str, Any] = {"max_metric_calls": 10_000, "proposals_at_once": 4, "progress": False}
    optimizer = GEPA(metric, reflection_lm=imp.StaticLM(_reflection_handler()), timeout=1.0, **options)
    made = await optimizer.compile(program, trainset=examples()[:6], valset=examples()[6:])
    assert in_flight == [0]
    result = optimizer.result
    assert result is not None and result.stop_reason == "timeout"
    assert made.signature.instructions == RULE and result.best_score == 1.0
    assert result.metric_calls > round_one and calls[0] > round_one  # round two had started

    calls[0] = 0
    with imp.deadline(1.0):
        again = GEPA(metric, reflection_lm=imp.StaticLM(_reflection_handler()), **options)
        made = await again.compile(program, trainset=examples()[:6], valset=examples()[6:])
    assert in_flight == [0] and made.signature.instructions == RULE and calls[0] > round_one
    assert again.result is not None and again.result.stop_reason == "deadline"


def test_proposals_at_once_is_checked_and_defaults_from_the_concurrency() -> None:
    with pytest.raises(ValueError, match="proposals_at_once"):
        GEPA(metric, reflection_lm=imp.StaticLM(_reflection_handler()), auto="light", proposals_at_once=0)
    default = GEPA(metric, reflection_lm=imp.StaticLM(_reflection_handler()), auto="light")
    assert default.proposals_at_once == 2 * 16 // 3
    small = GEPA(metric, reflection_lm=imp.StaticLM(_reflection_handler()), auto="light", concurrency=1)
    assert small.proposals_at_once == 1


async def test_every_proposal_of_a_round_shares_the_one_concurrency_limit() -> None:
    in_flight = peak = 0

    async def counted(messages: list[Any], options: dict[str, Any]) -> Any:
        nonlocal in_flight, peak
        in_flight += 1
        peak = max(peak, in_flight)
        await anyio.sleep(0.005)
        in_flight -= 1
        return student_handler(messages, options)

    optimizer = GEPA(
        metric,
        reflection_lm=imp.StaticLM(_reflection_handler()),
        max_metric_calls=80,
        proposals_at_once=5,
        concurrency=3,
        progress=False,
        skip_perfect_score=False,
    )
    await optimizer.compile(imp.predict("word -> answer", lm=imp.StaticLM(counted)), trainset=examples()[:6])
    assert peak == 3  # five proposals' minibatches at once, never more than three calls in flight
