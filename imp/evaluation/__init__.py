"""Parallel runs and evaluation: `imp.parallel`, `imp.evaluate`, metrics and reports."""

from imp.evaluation.evaluate import evaluate
from imp.evaluation.metrics import Metric, Score, exact_match
from imp.evaluation.parallel import parallel
from imp.evaluation.report import EvaluationError, EvaluationReport, EvaluationRow

__all__ = [
    "EvaluationError",
    "EvaluationReport",
    "EvaluationRow",
    "Metric",
    "Score",
    "evaluate",
    "exact_match",
    "parallel",
]
