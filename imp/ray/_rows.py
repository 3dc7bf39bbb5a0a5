"""What a worker sends back: plain records per row (no example, no live objects), and the batch's usage."""

from __future__ import annotations

import pickle
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from imp.errors import ImpError
from imp.evaluation.report import ErrorStage, EvaluationRow
from imp.prediction import Example, Prediction
from imp.records import Usage

__all__ = [
    "BatchResult",
    "OutcomeRecord",
    "RemoteError",
    "RowRecord",
    "WorkerLost",
    "WorkerStartError",
    "portable_error",
    "usage_of",
]


class WorkerStartError(ImpError, RuntimeError):
    """A Ray worker could not start: loading the program (or the LM) on it raised; the message says what."""


class WorkerLost(ImpError):
    """A row's Ray worker died while running its batch, and died again when the batch was retried."""


class RemoteError(ImpError):
    """An exception raised on a worker that could not travel back as itself (it does not pickle)."""

    def __init__(self, message: str, *, type_name: str) -> None:
        super().__init__(message)
        self.type_name = type_name


def portable_error(value: object) -> Exception | None:
    """The exception itself when it survives pickling (its traceback does not travel), else a `RemoteError`."""
    if not isinstance(value, Exception):
        return None
    try:
        copy = pickle.loads(pickle.dumps(value))
    except Exception:
        copy = None
    if isinstance(copy, Exception) and type(copy) is type(value) and str(copy) == str(value):
        return value
    name = type(value).__name__
    return RemoteError(f"{name}: {value}", type_name=name)


@dataclass(frozen=True, slots=True)
class RowRecord:
    """One evaluated row, as it travels: everything of an `EvaluationRow` but its example."""

    index: int
    prediction: Prediction | None
    score: float
    feedback: str | None
    error: Exception | None
    stage: ErrorStage | None

    @classmethod
    def of(cls, row: EvaluationRow) -> RowRecord:
        """The record of a row a worker scored."""
        return cls(row.index, row.prediction, row.score, row.feedback, portable_error(row.error), row.stage)

    def row(self, example: Example) -> EvaluationRow:
        """The row again, with the example the driver kept."""
        return EvaluationRow(self.index, example, self.prediction, self.score, self.feedback, self.error, self.stage)


@dataclass(frozen=True, slots=True)
class OutcomeRecord:
    """One mapped item, as it travels: its prediction or its error."""

    index: int
    prediction: Prediction | None
    error: Exception | None

    @property
    def outcome(self) -> Prediction | Exception:
        """What `imp.parallel` would hold in this item's slot."""
        if self.prediction is not None:
            return self.prediction
        assert self.error is not None
        return self.error


@dataclass(frozen=True, slots=True)
class BatchResult:
    """A batch's records (rows a stop left unstarted are absent), its usage as dumps, and whether it was stopped."""

    rows: tuple[RowRecord, ...]
    outcomes: tuple[OutcomeRecord, ...]
    usage: Mapping[str, Any]
    usage_by_model: Mapping[str, Mapping[str, Any]]
    stopped: bool

    @classmethod
    def of(
        cls,
        rows: tuple[RowRecord, ...],
        outcomes: tuple[OutcomeRecord, ...],
        total: Usage,
        by_model: Mapping[str, Usage],
        *,
        stopped: bool,
    ) -> BatchResult:
        """A result with its usage written as plain dicts."""
        return cls(rows, outcomes, total.dump(), {k: v.dump() for k, v in by_model.items()}, stopped)


def usage_of(dump: Mapping[str, Any]) -> Usage:
    """A `Usage` from its dump."""
    return Usage(**dump)
