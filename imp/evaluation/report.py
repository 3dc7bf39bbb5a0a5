"""The result of `imp.evaluate`: rows, the mean score, errors, usage; saved as JSON or CSV, shown as a table."""

from __future__ import annotations

import csv
import dataclasses
import datetime as _dt
import enum
import html
import io
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from imp._jsondata import JSONObject
from imp._redact import redact, redact_text
from imp.errors import ImpError
from imp.models.base import Usage
from imp.observe.report_html import save_report_html
from imp.prediction import Example, Prediction

__all__ = ["EvaluationError", "EvaluationReport", "EvaluationRow", "ErrorStage", "jsonable"]

ErrorStage = Literal["program", "metric"]
"""Where a row failed: the program (including its timeout) or the metric."""

_CELL = 48
_TABLE_ROWS = 20


def jsonable(value: object) -> object:
    """A JSON-safe copy of a value: pydantic models dumped, dates as ISO text, unknown objects as repr."""
    if value is None or isinstance(value, bool | int | str):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, Prediction):
        return jsonable(value.fields)
    if isinstance(value, Example):
        return jsonable(value.to_dict())
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [jsonable(v) for v in value]
    if isinstance(value, enum.Enum):
        return jsonable(value.value)
    if isinstance(value, _dt.datetime | _dt.date | _dt.time):
        return value.isoformat()
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return jsonable(dump(mode="json"))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return jsonable(dataclasses.asdict(value))
    return repr(value)


def describe_error(error: BaseException) -> str:
    """`Type: message`, redacted."""
    return redact_text(f"{type(error).__name__}: {error}")


@dataclass(frozen=True, slots=True)
class EvaluationRow:
    """One example's outcome: the prediction (or the error), its score and the metric's feedback."""

    index: int
    example: Example
    prediction: Prediction | None
    score: float
    feedback: str | None = None
    error: Exception | None = None
    stage: ErrorStage | None = None

    @property
    def outcome(self) -> Prediction | Exception:
        """The prediction, or the exception the program raised (a metric error keeps the prediction)."""
        if self.prediction is not None:
            return self.prediction
        assert self.error is not None
        return self.error

    def to_dict(self) -> dict[str, Any]:
        """A JSON-safe, redacted record of the row."""
        out = {
            "index": self.index,
            "inputs": jsonable(self.example.inputs()),
            "labels": jsonable(self.example.labels()),
            "prediction": jsonable(self.prediction) if self.prediction is not None else None,
            "score": self.score,
            "feedback": self.feedback,
            "error": describe_error(self.error) if self.error is not None else None,
            "error_stage": self.stage,
        }
        redacted: dict[str, Any] = redact(out)
        return redacted


class EvaluationError(ImpError):
    """An evaluation stopped because it reached `max_errors`; it has no score, only what finished."""

    def __init__(self, message: str, *, rows: tuple[EvaluationRow, ...], max_errors: int) -> None:
        self.rows = rows
        self.errors = tuple(row for row in rows if row.error is not None)
        self.max_errors = max_errors
        super().__init__(message)


@dataclass(frozen=True)
class EvaluationReport:
    """Every row of an evaluation, in devset order, with the mean score, the errors and the usage."""

    rows: tuple[EvaluationRow, ...]
    usage: Usage = field(default_factory=Usage)
    usage_by_model: Mapping[str, Usage] = field(default_factory=dict)
    elapsed: float = 0.0

    @property
    def score(self) -> float:
        """The mean row score (failures count at `failure_score`); 0.0 for an empty devset."""
        return sum(row.score for row in self.rows) / len(self.rows) if self.rows else 0.0

    @property
    def percent(self) -> float:
        """The score as a percentage, as DSPy's `Evaluate` reports it (for scores in 0..1)."""
        return round(self.score * 100, 2)

    @property
    def errors(self) -> tuple[EvaluationRow, ...]:
        """The rows whose program or metric raised."""
        return tuple(row for row in self.rows if row.error is not None)

    @property
    def predictions(self) -> list[Prediction | Exception]:
        """Each row's prediction, or the exception its program raised, in devset order."""
        return [row.outcome for row in self.rows]

    def to_dict(self) -> JSONObject:
        """A JSON-safe, redacted record of the whole report."""
        return {
            "score": self.score,
            "count": len(self.rows),
            "errors": len(self.errors),
            "elapsed_seconds": round(self.elapsed, 3),
            "usage": self.usage.dump(),
            "usage_by_model": {k: v.dump() for k, v in self.usage_by_model.items()},
            "rows": [row.to_dict() for row in self.rows],
        }

    def save_json(self, path: str | Path) -> Path:
        """Write the report (redacted) as pretty JSON; returns the path."""
        target = Path(path)
        target.write_text(json.dumps(self.to_dict(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
        return target

    def save_csv(self, path: str | Path) -> Path:
        """Write one CSV line per row (redacted): index, `input.*`, `label.*`, `pred.*`, score, feedback, error."""
        records = [row.to_dict() for row in self.rows]
        groups = (("input", "inputs"), ("label", "labels"), ("pred", "prediction"))
        columns = ["index"]
        for prefix, key in groups:
            seen: dict[str, None] = {}
            for record in records:
                seen.update(dict.fromkeys(record[key] or {}))
            columns += [f"{prefix}.{name}" for name in seen]
        columns += ["score", "feedback", "error", "error_stage"]
        buffer = io.StringIO()
        writer = csv.DictWriter(buffer, fieldnames=columns)
        writer.writeheader()
        for record in records:
            line: dict[str, object] = {k: record[k] for k in ("index", "score", "feedback", "error", "error_stage")}
            for prefix, key in groups:
                for name, value in (record[key] or {}).items():
                    line[f"{prefix}.{name}"] = _cell_text(value)
            writer.writerow(line)
        target = Path(path)
        target.write_text(buffer.getvalue(), encoding="utf-8", newline="")
        return target

    def save_html(self, path: str | Path) -> Path:
        """Write a self-contained page (redacted): the score, the distribution of scores, errors and
        the lowest scores first, usage and duration totals, each row linked to its run's page (written
        into `<name>.runs/` beside it); returns the path."""
        return save_report_html(self, path)

    def summary(self) -> str:
        """One line: score, rows, errors, tokens and time."""
        usage = self.usage
        errors = len(self.errors)
        return (
            f"score {self.score:.3f} ({self.percent:g}%) over {len(self.rows)} rows, "
            f"{errors} error{'' if errors == 1 else 's'}; "
            f"{usage.input_tokens} tokens in, {usage.output_tokens} out, {usage.requests} requests; "
            f"{self.elapsed:.2f}s"
        )

    def table(self, max_rows: int = _TABLE_ROWS) -> str:
        """A plain-text table of the first `max_rows` rows, under the summary line."""
        header = ["#", "inputs", "prediction", "score", "feedback / error"]
        body = [_row_cells(row) for row in self.rows[:max_rows]]
        widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]
        lines = [self.summary(), ""]
        lines.append("  ".join(cell.ljust(widths[i]) for i, cell in enumerate(header)).rstrip())
        lines.append("  ".join("-" * w for w in widths))
        lines += ["  ".join(cell.ljust(widths[i]) for i, cell in enumerate(line)).rstrip() for line in body]
        if len(self.rows) > max_rows:
            lines.append(f"... {len(self.rows) - max_rows} more rows (report.table(max_rows=...) shows more)")
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.table()

    def __repr__(self) -> str:
        return f"EvaluationReport(score={self.score:.4f}, rows={len(self.rows)}, errors={len(self.errors)})"

    def _repr_html_(self) -> str:
        """The table for notebooks."""
        head = "".join(f"<th>{h}</th>" for h in ("#", "inputs", "prediction", "score", "feedback / error"))
        rows = "".join(
            "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in _row_cells(row, width=200)) + "</tr>"
            for row in self.rows[:100]
        )
        more = f"<p>... {len(self.rows) - 100} more rows</p>" if len(self.rows) > 100 else ""
        return (
            f"<div><p><b>{html.escape(self.summary())}</b></p>"
            f"<table><thead><tr>{head}</tr></thead><tbody>{rows}</tbody></table>{more}</div>"
        )


def _cell_text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def _clip(text: str, width: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _fields_text(fields: Mapping[str, object], width: int) -> str:
    return _clip(", ".join(f"{k}={_cell_text(v)}" for k, v in fields.items()), width)


def _row_cells(row: EvaluationRow, width: int = _CELL) -> list[str]:
    record = row.to_dict()
    prediction = _fields_text(record["prediction"], width) if record["prediction"] is not None else "(failed)"
    note = record["error"] if record["error"] is not None else (record["feedback"] or "")
    if record["error_stage"] == "metric":
        note = "metric: " + note
    return [str(row.index), _fields_text(record["inputs"], width), prediction, f"{row.score:g}", _clip(note, width)]
