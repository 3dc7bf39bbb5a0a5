"""`EvaluationReport.save_html`: a self-contained page, failures first, each row linked to its run."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import imp
from imp.observe.report_html import render_report

SECRET = "sk-test-abcdefghijklmnopqrstuvwx0123456789"


def _answer(messages: list[dict[str, Any]], options: dict[str, Any]) -> dict[str, Any]:
    question = messages[-1]["content"].split("\n")[1]
    if question == "boom":
        raise RuntimeError(f"the model is down, key {SECRET}")
    return {"answer": question.upper() if question != "wrong" else "nope"}


def _report() -> imp.EvaluationReport:
    qa = imp.predict("question -> answer", lm=imp.StaticLM(_answer))
    devset = [
        imp.Example(question=q, answer=q.upper()).with_inputs("question")
        for q in ("a", "b", "wrong", "boom", f"c {SECRET}")
    ]

    async def main() -> imp.EvaluationReport:
        return await imp.evaluate(qa, devset, imp.exact_match, progress=False)

    import anyio

    return anyio.run(main)


def test_the_page_has_the_score_the_chart_failures_first_and_links(tmp_path: Path) -> None:
    report = _report()
    assert report.score == 0.6
    path = report.save_html(tmp_path / "eval.html")
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>") and not re.search(r"(src|href)\s*=\s*['\"]?(https?:)?//", page)
    assert "<span id='score'>0.600</span>" in page and "(60%)" in page
    assert page.count("class='col'") == 10
    assert "title='0 to 0.1: 2 rows'" in page and "title='0.9 to 1: 3 rows'" in page
    order = [int(i) for i in re.findall(r"data-index='(\d+)'", page)]
    assert order == [3, 2, 0, 1, 4]  # the error, then the wrong answer, then the passing rows
    assert "class='row failed'" in page and "program: RuntimeError: the model is down" in page
    links = re.findall(r"<a href='([^']+)'>run</a>", page)
    assert links == [
        "./eval.runs/row-0002.html",
        "./eval.runs/row-0000.html",
        "./eval.runs/row-0001.html",
        "./eval.runs/row-0004.html",
    ]
    for link in links:
        run = (tmp_path / link).read_text(encoding="utf-8")
        assert "id='reason'" in run and SECRET not in run
    assert "nope" in (tmp_path / links[0]).read_text(encoding="utf-8")
    assert SECRET not in page and "[REDACTED]" in page
    for total in ("LM requests", "tokens in", "tokens out", "duration"):
        assert f"<span class='meta'>{total}</span>" in page
    assert "<b>4</b>" in page  # four LM requests answered (the fifth raised)


def test_scores_outside_zero_to_one_get_their_own_range() -> None:
    report = _report()
    from dataclasses import replace

    rows = tuple(replace(row, score=float(i * 10)) for i, row in enumerate(report.rows))
    page = render_report(replace(report, rows=rows))
    assert "title='0 to 4: 1 rows'" in page and "title='36 to 40: 1 rows'" in page
