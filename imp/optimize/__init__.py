"""Optimizers: programs that improve themselves (`LabeledFewShot`, `BootstrapFewShot`, `GEPA`).

Rooms: `_base` (what every optimizer shares), `_scoring` (running candidates under one concurrency
limit, counting metric calls), `_fewshot` (the two demo optimizers), `_pareto` (GEPA's selection,
minibatches and acceptance, decided as the `gepa` package decides them), `_merge` (GEPA's merge),
`_reflect` (what the reflection LM reads), `_round` (one round of proposals at once, the ledger of its
metric calls), `_state` (what the loop carries between rounds), `_checkpoint` (its file), `_gepa` (GEPA's
planning and folding of rounds), `_result` (the report).
"""

from imp.optimize._base import OptimizationError, Optimizer
from imp.optimize._fewshot import BootstrapFewShot, LabeledFewShot
from imp.optimize._gepa import GEPA, AutoBudget, GEPAOptions
from imp.optimize._result import Candidate, OptimizationResult, StopReason
from imp.programs._parameters import Optimized, Parameters, Predictor, ToolDescription

__all__ = [
    "GEPA",
    "AutoBudget",
    "BootstrapFewShot",
    "Candidate",
    "GEPAOptions",
    "LabeledFewShot",
    "OptimizationError",
    "OptimizationResult",
    "Optimized",
    "Optimizer",
    "Parameters",
    "Predictor",
    "StopReason",
    "ToolDescription",
]
