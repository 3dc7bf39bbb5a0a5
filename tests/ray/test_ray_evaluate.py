"""imp.ray.evaluate and imp.ray.map on two workers give what imp.evaluate and imp.parallel give in one process."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from fake_provider import FakeProvider
from ray_support import (
    comparable,
    crash_always,
    crash_once,
    devset,
    metric,
    metric_failing_on_5,
    program_for,
    refusing_some,
    slow_on_3,
)

import imp


async def test_rows_scores_failures_and_usage_equal_imp_evaluate(cluster: Any, fake: FakeProvider) -> None:
    fake.responder = refusing_some
    program, data = program_for(fake), devset(60)
    one = await imp.evaluate(program, data, metric_failing_on_5, progress=False)
    many = await imp.ray.evaluate(program, data, metric_failing_on_5, batch_size=7, progress=False)
    assert comparable(many) == comparable(one)
    assert [row.index for row in many.rows] == list(range(60))
    stages = {row.index: row.stage for row in many.errors}
    assert stages == {5: "metric", 10: "program", 20: "program", 30: "program", 40: "program", 50: "program"}
    assert isinstance(many.rows[10].error, imp.BadRequest) and many.rows[10].error.status == 400
    assert many.usage == one.usage and many.usage.requests == 55  # the five refused rows bring no usage
    assert many.usage_by_model == one.usage_by_model
    assert many.score == one.score == pytest.approx(25 / 60)


async def test_a_ray_dataset_and_a_plain_list_give_the_same_report(cluster: Any, fake: FakeProvider) -> None:
    program, data = program_for(fake), devset(24)
    listed = await imp.ray.evaluate(program, data, metric, batch_size=5, progress=False)
    rows = cluster.data.from_items([example.to_dict() for example in data])
    from_columns = await imp.ray.evaluate(program, rows, metric, batch_size=5, input_keys=("question",), progress=False)
    from_examples = await imp.ray.evaluate(program, cluster.data.from_items(data), metric, progress=False)
    assert comparable(from_columns) == comparable(listed) == comparable(from_examples)
    assert listed.score == 0.5


async def test_map_equals_imp_parallel(cluster: Any, fake: FakeProvider) -> None:
    fake.responder = refusing_some
    program = program_for(fake)
    inputs = [{"question": f"What is twice {n}?"} for n in range(30)]
    one = await imp.parallel(program, inputs)
    many = await imp.ray.map(program, inputs, batch_size=4)
    assert len(many) == 30
    for a, b in zip(one, many, strict=True):
        assert type(a) is type(b)
        if isinstance(a, imp.Prediction):
            assert a.fields == b.fields
        else:
            assert str(a) == str(b)
    from_rows = await imp.ray.map(program, cluster.data.from_items(inputs))
    assert [_shown(o) for o in from_rows] == [_shown(o) for o in one]
    assert sum(isinstance(o, imp.BadRequest) for o in from_rows) == 2  # questions 10 and 20


def _shown(outcome: imp.Prediction | Exception) -> object:
    return outcome.fields if isinstance(outcome, imp.Prediction) else f"{type(outcome).__name__}: {outcome}"


async def test_the_report_saves_as_json_csv_and_html(cluster: Any, fake: FakeProvider, tmp_path: Path) -> None:
    report = await imp.ray.evaluate(program_for(fake), devset(6), metric, progress=False)
    assert isinstance(report, imp.EvaluationReport)
    assert '"score": 0.5' in report.save_json(tmp_path / "r.json").read_text()
    assert report.save_csv(tmp_path / "r.csv").read_text().count("\n") == 7
    assert "<html" in report.save_html(tmp_path / "r.html").read_text().lower()


async def test_progress_is_shown_per_batch(
    cluster: Any, fake: FakeProvider, capsys: pytest.CaptureFixture[str]
) -> None:
    await imp.ray.evaluate(program_for(fake), devset(20), metric, batch_size=5)
    err = capsys.readouterr().err
    assert "imp.ray.evaluate: 100% 20/20" in err and "score 0.500" in err


async def test_a_worker_that_dies_once_loses_no_row(cluster: Any, fake: FakeProvider, tmp_path: Path) -> None:
    program, data = program_for(fake), devset(30)
    once = functools.partial(crash_once, str(tmp_path / "crashed"))
    report = await imp.ray.evaluate(program, data, once, batch_size=5, progress=False)
    assert (tmp_path / "crashed").exists()  # the worker did die
    assert comparable(report)["rows"] == comparable(await imp.evaluate(program, data, metric, progress=False))["rows"]


async def test_a_batch_whose_worker_dies_twice_fails_its_rows_with_the_reason(cluster: Any, fake: FakeProvider) -> None:
    report = await imp.ray.evaluate(program_for(fake), devset(30), crash_always, batch_size=5, progress=False)
    assert len(report.rows) == 30
    failed = [row.index for row in report.errors]
    assert failed == [5, 6, 7, 8, 9]  # the batch holding row 7, and only it
    error = report.rows[7].error
    assert isinstance(error, imp.ray.WorkerLost) and "died, twice" in str(error)
    assert report.rows[7].stage == "program" and report.rows[7].score == 0.0
    assert all(row.error is None for row in report.rows if row.index not in failed)
    mapped = await imp.ray.map(program_for(fake), [{"question": f"What is twice {n}?"} for n in range(10)])
    assert all(isinstance(p, imp.Prediction) for p in mapped)


async def test_max_errors_counts_across_every_worker(cluster: Any, fake: FakeProvider) -> None:
    fake.responder = refusing_some  # rows 10, 20, ... fail: spread over both workers' batches
    with pytest.raises(imp.EvaluationError, match=r"max_errors=3 reached; last error: BadRequest") as caught:
        await imp.ray.evaluate(
            program_for(fake), devset(200), metric, batch_size=10, concurrency=2, max_errors=3, progress=False
        )
    assert len(caught.value.errors) >= 3
    assert len(caught.value.rows) < 200  # the workers stopped


async def test_bad_input_is_refused_before_any_worker_starts(cluster: Any, fake: FakeProvider) -> None:
    program, data = program_for(fake), devset(3)
    with pytest.raises(ValueError, match="workers is a positive integer"):
        await imp.ray.evaluate(program, data, metric, workers=0)
    with pytest.raises(ValueError, match="batch_size is a positive integer"):
        await imp.ray.evaluate(program, data, metric, batch_size=0)
    with pytest.raises(ValueError, match="concurrency is a positive integer"):
        await imp.ray.map(program, [{"question": "q"}], concurrency=0)
    with pytest.raises(ValueError, match="max_errors is a positive integer"):
        await imp.ray.evaluate(program, data, metric, max_errors=0)
    with pytest.raises(ValueError, match="requests_per_second is a positive number"):
        imp.ray.Limits(requests_per_second=-1)
    with pytest.raises(ValueError, match="max_in_flight is a positive integer"):
        imp.ray.Limits(max_in_flight=0)
    with pytest.raises(TypeError, match=r"limits is an imp\.ray\.Limits"):
        await imp.ray.evaluate(program, data, metric, limits={"requests_per_second": 5})  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="runs an imp program"):
        await imp.ray.evaluate(metric, data, metric)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="input_keys=\\('question',\\)"):
        await imp.ray.evaluate(program, cluster.data.from_items([{"question": "q", "answer": "a"}]), metric)
    with pytest.raises(TypeError, match="devset item 0 is a dict"):
        await imp.ray.evaluate(program, [{"question": "q"}], metric)
    with pytest.raises(TypeError, match="lm_factory is a picklable function"):
        await imp.ray.evaluate(program, data, metric, lm_factory=program.lm)  # type: ignore[arg-type]
    lock = __import__("threading").Lock()
    with pytest.raises(TypeError, match="the metric must pickle to travel to Ray workers"):
        await imp.ray.evaluate(program, data, lambda e, p, lock=lock: True)


def test_import_imp_does_not_import_ray() -> None:
    code = "import sys, imp; assert 'ray' not in sys.modules; imp.ray; assert 'ray' in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


async def test_a_row_past_its_timeout_is_a_failed_row_as_in_one_process(cluster: Any, fake: FakeProvider) -> None:
    fake.responder = slow_on_3
    program, data = program_for(fake), devset(8)
    one = await imp.evaluate(program, data, metric, timeout=1.5, progress=False)
    # (1.5 s, not less: a fresh worker's first request opens its HTTP client, slow on a loaded machine)
    many = await imp.ray.evaluate(program, data, metric, timeout=1.5, batch_size=3, progress=False)
    assert [row.index for row in many.errors] == [row.index for row in one.errors] == [3]
    assert isinstance(many.rows[3].error, imp.DeadlineExceeded)
    assert comparable(many)["rows"] == comparable(one)["rows"]
    inputs = [example.inputs() for example in data]
    mapped, parallel = (
        await imp.ray.map(program, inputs, timeout=1.5, batch_size=3),
        await imp.parallel(program, inputs, timeout=1.5),
    )
    assert isinstance(mapped[3], imp.DeadlineExceeded) and str(mapped[3]) == str(parallel[3])


async def test_an_empty_devset_gives_an_empty_report(cluster: Any, fake: FakeProvider) -> None:
    report = await imp.ray.evaluate(program_for(fake), [], metric, progress=False)
    assert report.rows == () and report.score == 0.0
    assert await imp.ray.map(program_for(fake), []) == []


def test_the_driver_runs_under_trio(cluster: Any, fake: FakeProvider) -> None:
    import anyio

    async def body() -> imp.EvaluationReport:
        return await imp.ray.evaluate(program_for(fake), devset(6), metric, progress=False)

    assert anyio.run(body, backend="trio").score == 0.5


async def test_a_worker_that_cannot_start_is_a_clear_error(cluster: Any, fake: FakeProvider) -> None:
    from ray_support import broken_lm

    with pytest.raises(
        imp.ray.WorkerStartError,
        match=r"a worker could not start: .*RuntimeError: OPENAI_API_KEY is not set on this worker",
    ):
        await imp.ray.evaluate(program_for(fake), devset(4), metric, lm_factory=broken_lm, progress=False)
