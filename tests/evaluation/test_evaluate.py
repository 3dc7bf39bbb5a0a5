"""imp.evaluate: scores, failure rows, max_errors, usage, progress, and the report's outputs."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from imp_backends import both_backends
from runtime_lms import Tracker, answering_lm, echo, raises_interrupt

import imp
from imp.evaluation import EvaluationError, EvaluationReport, Score, evaluate, exact_match

QA = imp.signature("question -> answer")


def devset(*pairs: tuple[str, str]) -> list[imp.Example]:
    return [imp.Example(question=q, answer=a).with_inputs("question") for q, a in pairs]


def right(example: imp.Example, prediction: imp.Prediction) -> bool:
    return bool(example.answer == prediction.answer)


@both_backends
async def test_a_bool_metric_gives_the_mean_of_the_rows() -> None:
    program = imp.predict(QA, lm=answering_lm(echo, delay=0.01))
    report = await evaluate(program, devset(("a", "A"), ("b", "B"), ("c", "C"), ("d", "wrong")), right, progress=False)
    assert report.score == 0.75 and report.percent == 75.0
    assert [row.score for row in report.rows] == [1.0, 1.0, 1.0, 0.0]
    assert [row.index for row in report.rows] == [0, 1, 2, 3]
    assert report.errors == ()


@both_backends
async def test_numbers_and_scores_with_feedback() -> None:
    program = imp.predict(QA, lm=answering_lm(echo))

    def graded(example: imp.Example, prediction: imp.Prediction) -> Score:
        ok = example.answer == prediction.answer
        return Score(1.0 if ok else 0.25, feedback="exact" if ok else f"expected {example.answer}")

    report = await evaluate(program, devset(("a", "A"), ("b", "x")), graded, progress=False)
    assert report.score == pytest.approx(0.625)
    assert [row.feedback for row in report.rows] == ["exact", "expected x"]

    report = await evaluate(program, devset(("a", "A"), ("b", "x")), lambda e, p: 0.5, progress=False)
    assert report.score == 0.5


@both_backends
async def test_an_async_metric_is_awaited() -> None:
    async def slow_right(example: imp.Example, prediction: imp.Prediction) -> bool:
        await anyio.sleep(0.001)
        return right(example, prediction)

    program = imp.predict(QA, lm=answering_lm(echo))
    report = await evaluate(program, devset(("a", "A"), ("b", "x")), slow_right, progress=False)
    assert report.score == 0.5


@both_backends
async def test_a_failing_program_is_a_row_scored_failure_score() -> None:
    program = imp.predict(QA, lm=answering_lm(echo))
    report = await evaluate(
        program, devset(("a", "A"), ("boom", "B"), ("c", "C")), right, failure_score=0.1, progress=False
    )
    assert report.score == pytest.approx((1 + 0.1 + 1) / 3)
    (failed,) = report.errors
    assert failed.index == 1 and failed.stage == "program" and failed.prediction is None
    assert isinstance(failed.error, ValueError) and failed.outcome is failed.error
    assert isinstance(report.predictions[1], ValueError)


@both_backends
async def test_a_raising_or_malformed_metric_is_a_metric_error() -> None:
    program = imp.predict(QA, lm=answering_lm(echo))

    def broken(example: imp.Example, prediction: imp.Prediction) -> bool:
        if example.question == "b":
            raise KeyError("gold")
        return True

    report = await evaluate(program, devset(("a", "A"), ("b", "B")), broken, progress=False)
    (failed,) = report.errors
    assert failed.stage == "metric" and isinstance(failed.error, KeyError) and failed.prediction is not None
    assert report.score == 0.5

    report = await evaluate(program, devset(("a", "A")), lambda e, p: "yes", progress=False)  # type: ignore[arg-type,return-value]
    (failed,) = report.errors
    assert isinstance(failed.error, TypeError) and "imp.Score" in str(failed.error)


@both_backends
async def test_reaching_max_errors_raises_and_gives_no_score() -> None:
    tracker = Tracker()
    program = imp.predict(QA, lm=answering_lm(echo, tracker=tracker))
    rows = devset(*[("boom", "x")] * 10)
    with pytest.raises(EvaluationError, match="max_errors=2") as caught:
        await evaluate(program, rows, right, concurrency=1, max_errors=2, progress=False)
    assert caught.value.max_errors == 2 and len(caught.value.errors) == 2
    assert len(caught.value.rows) == 2
    assert len(program.lm.requests) == 2  # type: ignore[union-attr]  # it stopped, it did not run the rest

    report = await evaluate(program, devset(("boom", "x"), ("a", "A")), right, max_errors=2, progress=False)
    assert isinstance(report, EvaluationReport) and len(report.errors) == 1


@both_backends
async def test_max_errors_cancels_rows_in_flight() -> None:
    tracker = Tracker()
    lm = answering_lm(echo, delay=lambda i: 0.0 if "boom" in i["question"] else 10.0, tracker=tracker)
    rows = devset(("slow1", "x"), ("slow2", "x"), ("boom", "x"))
    with anyio.fail_after(2), pytest.raises(EvaluationError):
        await evaluate(imp.predict(QA, lm=lm), rows, right, max_errors=1, progress=False)
    assert tracker.in_flight == 0 and tracker.cancelled == 2


@both_backends
async def test_the_devset_is_checked_before_any_call() -> None:
    lm = answering_lm(echo)
    program = imp.predict(QA, lm=lm)
    with pytest.raises(TypeError, match=r"with_inputs\('question'\)"):
        await evaluate(program, [{"question": "a", "answer": "A"}], right)  # type: ignore[list-item]
    with pytest.raises(ValueError, match="no declared inputs"):
        await evaluate(program, [*devset(("a", "A")), imp.Example(question="b")], right)
    with pytest.raises(ValueError, match="max_errors"):
        await evaluate(program, devset(("a", "A")), right, max_errors=0)
    with pytest.raises(TypeError, match="metric"):
        await evaluate(program, devset(("a", "A")), "exact")  # type: ignore[arg-type]
    assert lm.requests == []


@both_backends
async def test_usage_totals_every_concurrent_row() -> None:
    program = imp.predict(QA, lm=answering_lm(echo, delay=0.01, model="m1"))
    report = await evaluate(program, devset(*[(f"q{i}", "x") for i in range(30)]), right, concurrency=8, progress=False)
    assert report.usage.input_tokens == 300 and report.usage.output_tokens == 60 and report.usage.requests == 30
    assert set(report.usage_by_model) == {"scripted:m1"}


@both_backends
async def test_a_row_timeout_fails_only_that_row() -> None:
    lm = answering_lm(echo, delay=lambda i: 5.0 if i["question"] == "slow" else 0.0)
    report = await evaluate(
        imp.predict(QA, lm=lm), devset(("a", "A"), ("slow", "SLOW")), right, timeout=0.1, progress=False
    )
    (failed,) = report.errors
    assert failed.index == 1 and isinstance(failed.error, imp.DeadlineExceeded)
    assert report.score == 0.5


@both_backends
async def test_settings_reach_the_rows() -> None:
    with imp.context(lm=answering_lm(echo)):
        report = await evaluate(imp.predict(QA), devset(("a", "A")), exact_match, progress=False)
    assert report.score == 1.0


@both_backends
async def test_an_empty_devset_scores_zero() -> None:
    report = await evaluate(imp.predict(QA, lm=answering_lm(echo)), [], right, progress=False)
    assert report.score == 0.0 and report.rows == ()


@both_backends
async def test_progress_is_plain_lines_when_stderr_is_not_a_terminal(capsys: pytest.CaptureFixture[str]) -> None:
    program = imp.predict(QA, lm=answering_lm(echo))
    await evaluate(program, devset(*[(f"q{i}", f"Q{i}") for i in range(20)]), right)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert 2 <= len(lines) <= 12 and "\r" not in err
    assert lines[-1].startswith("imp.evaluate: 100% 20/20") and "score 1.000" in lines[-1]

    await evaluate(program, devset(("a", "A")), right, progress=False)
    assert capsys.readouterr().err == ""


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


@both_backends
async def test_progress_is_a_bar_on_a_terminal(monkeypatch: pytest.MonkeyPatch) -> None:
    terminal = FakeTerminal()
    monkeypatch.setattr("sys.stderr", terminal)
    program = imp.predict(QA, lm=answering_lm(echo))
    await evaluate(program, devset(("a", "A"), ("b", "x")), right)
    shown = terminal.getvalue()
    assert shown.startswith("\rimp.evaluate █") and shown.endswith("\n")
    assert "2/2  score 0.500  errors 0" in shown


@both_backends
async def test_progress_says_when_it_stopped(capsys: pytest.CaptureFixture[str]) -> None:
    program = imp.predict(QA, lm=answering_lm(echo))
    with pytest.raises(EvaluationError):
        await evaluate(program, devset(("boom", "x")), right, max_errors=1)
    assert "imp.evaluate: stopped: max_errors=1 reached; last error: ValueError" in capsys.readouterr().err


@both_backends
async def test_the_report_saves_json_and_csv_redacted(tmp_path: Path) -> None:
    program = imp.predict(QA, lm=answering_lm(echo))
    secret = "sk-abcdefghijklmnopqrstuvwxyz123456"
    report = await evaluate(program, devset(("a", "A"), (f"key {secret}", "x"), ("boom", "x")), right, progress=False)

    data = json.loads(report.save_json(tmp_path / "report.json").read_text())
    assert data["score"] == pytest.approx(1 / 3) and data["count"] == 3 and data["errors"] == 1
    assert data["usage"]["requests"] == 2  # the failed request reported no usage
    assert data["rows"][0] == {
        "index": 0,
        "inputs": {"question": "a"},
        "labels": {"answer": "A"},
        "prediction": {"answer": "A"},
        "score": 1.0,
        "feedback": None,
        "error": None,
        "error_stage": None,
    }
    assert data["rows"][2]["error"].startswith("ValueError: cannot answer") and data["rows"][2]["prediction"] is None

    path = report.save_csv(tmp_path / "report.csv")
    lines = list(csv.DictReader(path.open(newline="")))
    assert list(lines[0]) == [
        "index",
        "input.question",
        "label.answer",
        "pred.answer",
        "score",
        "feedback",
        "error",
        "error_stage",
    ]
    assert lines[0]["input.question"] == "a" and lines[0]["pred.answer"] == "A" and lines[0]["score"] == "1.0"
    assert lines[2]["error_stage"] == "program"
    for text in ((tmp_path / "report.json").read_text(), path.read_text()):
        assert secret not in text and "[REDACTED]" in text


@both_backends
async def test_the_report_reads_as_a_table() -> None:
    program = imp.predict(QA, lm=answering_lm(echo))
    rows = devset(("<b>a</b>", "<B>A</B>"), ("boom", "x"), *[(f"q{i}", "x") for i in range(25)])
    report = await evaluate(program, rows, right, progress=False)
    text = str(report)
    lines = text.splitlines()
    assert lines[0].startswith("score 0.037 (3.7%) over 27 rows, 1 error;")
    assert lines[2].split() == ["#", "inputs", "prediction", "score", "feedback", "/", "error"]
    assert "ValueError: cannot answer 'boom'" in text
    assert lines[-1].startswith("... 7 more rows")
    assert "rows=27" in repr(report)
    page = report._repr_html_()
    assert "<table>" in page and "&lt;b&gt;a&lt;/b&gt;" in page and "<b>a</b>" not in page


@both_backends
async def test_a_deadline_passing_mid_evaluation_raises_and_gives_no_score() -> None:
    program = imp.predict(QA, lm=answering_lm(echo, delay=0.02))
    with pytest.raises(imp.DeadlineExceeded), imp.deadline(0.1):
        await evaluate(program, devset(*[(f"q{i}", "x") for i in range(50)]), right, concurrency=1, progress=False)


def test_a_ctrl_c_inside_a_row_surfaces_as_itself(run: Any) -> None:
    """Under trio a task group wraps it in a BaseExceptionGroup, which `except KeyboardInterrupt` misses."""

    def interrupting(inputs: dict[str, str]) -> dict[str, str]:
        if inputs["question"] == "c":
            raise KeyboardInterrupt
        return echo(inputs)

    program = imp.predict(QA, lm=answering_lm(interrupting, delay=0.01))

    async def body() -> None:
        await evaluate(program, devset(("a", "A"), ("b", "B"), ("c", "C"), ("d", "D")), right, progress=False)

    assert type(raises_interrupt(run, body)) is KeyboardInterrupt


def test_a_ctrl_c_inside_a_metric_surfaces_as_itself(run: Any) -> None:
    def metric(example: imp.Example, prediction: imp.Prediction) -> bool:
        if example.question == "b":
            raise KeyboardInterrupt
        return True

    program = imp.predict(QA, lm=answering_lm(echo, delay=0.01))

    async def body() -> None:
        await evaluate(program, devset(("a", "A"), ("b", "B"), ("c", "C")), metric, progress=False)

    raises_interrupt(run, body)
