"""An evaluation report as one self-contained HTML page, each row linked to its run's own page.

The page is drawn from what a report holds (`Report`, `Row`: `imp.EvaluationReport` and its rows
have that shape), so this room needs nothing of `imp.evaluation`, which sits above it and calls it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Protocol

from imp._jsondata import JSONObject
from imp.models.base import Usage
from imp.observe._page import esc, page
from imp.observe.trace_html import render_trace
from imp.prediction import Prediction

__all__ = ["Report", "Row", "render_report", "save_report_html"]

_BINS = 10
_CELL = 160


class Row(Protocol):
    """What the page reads of one evaluated example (an `imp.EvaluationRow`)."""

    @property
    def index(self) -> int: ...
    @property
    def score(self) -> float: ...
    @property
    def prediction(self) -> Prediction | None: ...
    @property
    def error(self) -> Exception | None: ...
    def to_dict(self) -> JSONObject: ...


class Report(Protocol):
    """What the page reads of an evaluation (an `imp.EvaluationReport`)."""

    @property
    def rows(self) -> Sequence[Row]: ...
    @property
    def errors(self) -> Sequence[Row]: ...
    @property
    def usage(self) -> Usage: ...
    @property
    def usage_by_model(self) -> Mapping[str, Usage]: ...
    @property
    def elapsed(self) -> float: ...
    @property
    def score(self) -> float: ...
    @property
    def percent(self) -> float: ...


def save_report_html(report: Report, path: str | Path) -> Path:
    """Write the report's page, and each row's run page into `<name>.runs/` beside it; returns the path."""
    target = Path(path)
    runs = target.with_name(target.stem + ".runs")
    links: dict[int, str] = {}
    for row in report.rows:
        if row.prediction is None:
            continue
        runs.mkdir(exist_ok=True)
        name = f"row-{row.index:04d}.html"
        (runs / name).write_text(render_trace(row.prediction, title=f"row {row.index}"), encoding="utf-8")
        links[row.index] = f"./{runs.name}/{name}"  # "./": a folder named "javascript:..." stays a path
    target.write_text(render_report(report, links), encoding="utf-8")
    return target


def _ordered(rows: Sequence[Row]) -> list[Row]:
    """Errors first, then the lowest scores, each in devset order."""
    return sorted(rows, key=lambda r: (r.error is None, r.score, r.index))


def _histogram(scores: list[float]) -> tuple[list[int], float, float]:
    low, high = (min(scores), max(scores)) if scores else (0.0, 1.0)
    if low >= 0.0 and high <= 1.0:
        low, high = 0.0, 1.0
    width = (high - low) or 1.0
    counts = [0] * _BINS
    for score in scores:
        counts[min(_BINS - 1, max(0, math.floor((score - low) / width * _BINS)))] += 1
    return counts, low, high


def _chart(report: Report) -> str:
    counts, low, high = _histogram([row.score for row in report.rows])
    top = max(counts) or 1
    step = (high - low) / _BINS
    cols = "".join(
        f"<div class='col' title='{esc(f'{low + i * step:g} to {low + (i + 1) * step:g}: {n} rows')}'>"
        f"<span>{n}</span><div class='fill' style='height:{80 * n / top:.1f}%'></div>"
        f"<span>{low + i * step:g}</span></div>"
        for i, n in enumerate(counts)
    )
    return f"<h2>Distribution of scores</h2><div class='chart' id='distribution'>{cols}</div>"


def _cell(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, default=str)
    text = " ".join(text.split())
    return esc(text if len(text) <= _CELL else text[: _CELL - 1] + "…")


def render_report(report: Report, links: dict[int, str] | None = None) -> str:
    """The report's page as text; `links` maps a row's index to its run page's relative address."""
    links = links or {}
    usage = report.usage
    totals = [
        ("score", f"{report.score:.3f}"),
        ("rows", str(len(report.rows))),
        ("errors", str(len(report.errors))),
        ("LM requests", str(usage.requests)),
        ("tokens in", str(usage.input_tokens)),
        ("tokens out", str(usage.output_tokens)),
        ("duration", f"{report.elapsed:.2f} s"),
    ]
    if usage.cost is not None:
        totals.append(("cost", f"{usage.cost:.4f}"))
    cells = "".join(f"<div class='total'><span class='meta'>{k}</span><b>{esc(v)}</b></div>" for k, v in totals)
    by_model = "".join(
        f"<li>{esc(model)}: {u.requests} requests, {u.input_tokens} in, {u.output_tokens} out</li>"
        for model, u in report.usage_by_model.items()
    )
    lines = []
    for row in _ordered(report.rows):
        record = row.to_dict()
        note = record["error"] if record["error"] is not None else (record["feedback"] or "")
        stage = f"{record['error_stage']}: " if record["error_stage"] else ""
        link = links.get(row.index)
        run = f"<a href='{esc(link)}'>run</a>" if link else "<span class='meta'>no run</span>"
        failed = row.error is not None
        lines.append(
            f"<tr class='row{' failed' if failed else ''}' data-search data-index='{row.index}'>"
            f"<td>{row.index}</td><td>{_cell(record['inputs'])}</td>"
            f"<td>{_cell(record['prediction']) if record['prediction'] is not None else '(failed)'}</td>"
            f"<td>{_cell(record['labels'])}</td><td class='score'>{row.score:g}</td>"
            f"<td class='{'error' if failed else ''}'>{esc(stage)}{_cell(note)}</td><td>{run}</td></tr>"
        )
    table = (
        "<h2>Rows (errors and lowest scores first)</h2><div class='controls'><input id='search' type='search' "
        "placeholder='Search rows'><span id='shown' class='meta'></span></div>"
        "<table id='rows'><thead><tr><th>#</th><th>inputs</th><th>prediction</th><th>labels</th><th>score</th>"
        f"<th>feedback / error</th><th>run</th></tr></thead><tbody>{''.join(lines)}</tbody></table>"
    )
    body = (
        f"<header><h1>Evaluation: score <span id='score'>{report.score:.3f}</span> ({report.percent:g}%)</h1>"
        f"<div class='totals' id='totals'>{cells}</div>"
        f"{f'<ul class=meta>{by_model}</ul>' if by_model else ''}</header>"
        f"<main>{_chart(report)}{table}</main>"
    )
    return page(f"imp evaluation: {report.score:.3f}", body)
