"""Metrics: `imp.Score`, and how a metric's answer (bool, number, Score) becomes a row's score."""

from __future__ import annotations

import inspect
import math
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from imp.prediction import Example, Prediction

__all__ = ["Metric", "MetricResult", "Score", "exact_match", "run_metric"]

type MetricResult = bool | int | float | Score
"""What a metric may return."""

type Metric = Callable[[Example, Prediction], MetricResult | Awaitable[MetricResult]]
"""`metric(example, prediction)`: sync or async, returning a bool, a number, or an `imp.Score`."""


@dataclass(frozen=True, slots=True)
class Score:
    """A metric's score with feedback (read by reflective optimizers such as GEPA)."""

    value: float
    feedback: str | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", to_number(self.value, "Score.value"))
        if self.feedback is not None and not isinstance(self.feedback, str):
            raise TypeError(f"Score.feedback is a string, got {type(self.feedback).__name__}")


def to_number(value: object, what: str) -> float:
    """A finite float from a bool or a real number; anything else is refused."""
    if isinstance(value, bool):
        return 1.0 if value else 0.0
    if isinstance(value, int | float) and not isinstance(value, complex):
        number = float(value)
        if math.isfinite(number):
            return number
        raise ValueError(f"{what} must be a finite number, got {value!r}")
    raise TypeError(f"{what} must be a bool, a number or an imp.Score, got {type(value).__name__}: {value!r:.80}")


def as_score(result: object) -> Score:
    """Normalise a metric's answer: True is 1.0, False 0.0, a number itself, a Score as it is."""
    if isinstance(result, Score):
        return result
    return Score(to_number(result, "a metric's result"))


async def run_metric(metric: Metric, example: Example, prediction: Prediction) -> Score:
    """Call a metric (awaiting it if it is async) and normalise its answer."""
    result: object = metric(example, prediction)
    if inspect.isawaitable(result):
        result = await result
    return as_score(result)


def exact_match(example: Example, prediction: Prediction) -> bool:
    """True when every label of the example equals the prediction's field of that name (strings compared trimmed, case-folded)."""
    labels = example.labels()
    if not labels:
        raise ValueError("exact_match needs an example with labels (fields that are not inputs)")
    for name, expected in labels.items():
        actual = prediction.get(name)
        if isinstance(expected, str) and isinstance(actual, str):
            if expected.strip().casefold() != actual.strip().casefold():
                return False
        elif expected != actual:
            return False
    return True
