"""What an optimization reports: every candidate, its parents and scores, the budget spent."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from imp._jsondata import JSONObject
from imp.programs.base import Program
from imp.records import NO_USAGE, Usage

__all__ = ["Candidate", "OptimizationResult", "Origin", "StopReason"]

StopReason = Literal[
    "budget", "reflection_budget", "budget_exceeded", "timeout", "deadline", "cancelled", "no_improvement", "done"
]


type Origin = Literal["seed", "reflection", "merge", "fewshot"]
"""How a candidate came to be: the program given, a reflection, a merge of two, or a demo optimizer."""


@dataclass(frozen=True)
class Candidate:
    """One program an optimizer tried: its instructions, parents, score per validation example, and mean."""

    index: int
    program: Program
    instructions: Mapping[str, str]
    parents: tuple[int, ...]
    val_scores: tuple[float, ...]
    metric_calls_at_discovery: int = 0
    origin: Origin = "seed"

    @property
    def score(self) -> float:
        """The mean score over the validation examples (0.0 with none)."""
        return sum(self.val_scores) / len(self.val_scores) if self.val_scores else 0.0


@dataclass
class OptimizationResult:
    """The details of one `compile`: candidates, the best one, metric calls, usage of student and reflection LMs."""

    optimizer: str
    candidates: list[Candidate] = field(default_factory=list)
    best_index: int = 0
    metric_calls: int = 0
    student_usage: Usage = NO_USAGE
    reflection_usage: Usage = NO_USAGE
    stop_reason: StopReason = "done"
    elapsed: float = 0.0
    iterations: int = 0
    log: list[str] = field(default_factory=list)

    @property
    def best(self) -> Candidate:
        """The candidate with the best mean validation score (the earliest among equals)."""
        return self.candidates[self.best_index]

    @property
    def best_program(self) -> Program:
        """The best candidate's program."""
        return self.best.program

    @property
    def best_score(self) -> float:
        """The best candidate's mean validation score."""
        return self.best.score

    def summary(self) -> JSONObject:
        """A JSON-safe account of the run (saved beside the optimized program)."""
        return {
            "candidates": len(self.candidates),
            "best_index": self.best_index,
            "metric_calls": self.metric_calls,
            "iterations": self.iterations,
            "stop_reason": self.stop_reason,
            "reflection_usage": self.reflection_usage.dump(),
        }
