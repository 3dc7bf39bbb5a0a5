"""GEPA as a journaled run: several proposals at once with random latencies, crashed mid-way, resumed
without repeating a recorded LM exchange, ending with the uncrashed run's program."""

from __future__ import annotations

import random
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

sys.path.insert(0, str(Path(__file__).parents[1] / "optimize"))

import scenarios

import imp
from imp.optimize import GEPA


class Crash(BaseException):
    pass


class Counted(imp.StaticLM):
    """A handler behind random latencies that counts requests and may crash at one of them."""

    def __init__(self, handler: Any, crash_at: int | None = None) -> None:
        self.sent = 0
        self.crash_at = crash_at
        jitter = random.Random()

        async def answer(messages: list[Any], options: dict[str, Any]) -> Any:
            self.sent += 1
            if self.sent == self.crash_at:
                raise Crash
            await anyio.sleep(jitter.random() * 0.005)
            return handler(messages, options)

        super().__init__(answer)


def optimize(student: imp.LM, reflection: imp.LM) -> tuple[GEPA, imp.Program]:
    optimizer = GEPA(
        scenarios.partial_metric,
        reflection_lm=reflection,
        max_metric_calls=150,
        proposals_at_once=3,
        seed=5,
        progress=False,
        concurrency=4,
    )
    program = scenarios.Steps(student).with_parameters(instructions={"first.predict": "One.", "second.predict": "Two."})
    return optimizer, program


@pytest.mark.parametrize("crash_at", [7, 40, 90])
async def test_a_crashed_optimization_resumes_from_its_journal(tmp_path: Path, crash_at: int) -> None:
    data = scenarios.data()
    student, reflection = Counted(scenarios.steps_handler), Counted(scenarios.keyed_reflection)
    optimizer, program = optimize(student, reflection)
    reference = await optimizer.compile(program, trainset=data[:6], valset=data[6:])
    total = student.sent + reflection.sent

    journal = imp.SQLiteJournal(tmp_path / "gepa.db")
    crashing = Counted(scenarios.steps_handler, crash_at=crash_at)
    optimizer, program = optimize(crashing, Counted(scenarios.keyed_reflection))
    with pytest.raises(BaseException):  # noqa: B017 - the Crash, maybe in a task group's exception group
        await optimizer.compile(program, trainset=data[:6], valset=data[6:], run_id="gepa-1", journal=journal)
    recorded = sum(1 for s in journal.steps("gepa-1") if s.kind == "lm")
    assert recorded >= crash_at - 1 - 4  # all but the calls in flight at the crash

    student, reflection = Counted(scenarios.steps_handler), Counted(scenarios.keyed_reflection)
    optimizer, program = optimize(student, reflection)
    resumed = await optimizer.compile(program, trainset=data[:6], valset=data[6:], run_id="gepa-1", journal=journal)
    assert resumed.parameters().instructions == reference.parameters().instructions
    assert resumed.optimized is not None and reference.optimized is not None
    assert resumed.optimized.score == reference.optimized.score
    assert student.sent + reflection.sent == total - recorded  # nothing recorded was sent again
