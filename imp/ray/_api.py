"""`imp.ray.evaluate` and `imp.ray.map`: `imp.evaluate` and `imp.parallel` spread over Ray workers."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from imp._jsondata import JSONObject
from imp.evaluation.evaluate import check_devset, check_max_errors
from imp.evaluation.metrics import Metric, to_number
from imp.evaluation.parallel import check_concurrency, check_timeout
from imp.evaluation.progress import Progress
from imp.evaluation.report import EvaluationError, EvaluationReport, EvaluationRow, describe_error
from imp.models.base import LM
from imp.prediction import Example, Prediction
from imp.programs.base import Program
from imp.ray._limits import Limits
from imp.ray._rows import BatchResult, WorkerLost, usage_of
from imp.ray._run import Batch, RunOptions, run_batches
from imp.records import Usage
from imp.saving import dump_program, load_program

__all__ = ["evaluate", "map"]


def _ray() -> object:
    import ray

    return ray


def _is_dataset(value: object) -> bool:
    return type(value).__module__.startswith("ray.data") and hasattr(value, "iter_rows")


def _rows(dataset: Any, input_keys: Sequence[str] | None, *, labelled: bool) -> list[Any]:
    """The items to run: a Dataset's rows (dicts) or the iterable's items, as Examples where keys are named."""
    if _is_dataset(dataset):
        items: list[object] = []
        for i, row in enumerate(dataset.iter_rows()):
            if set(row) == {"item"}:  # ray.data.from_items of values that are not dicts
                items.append(row["item"])
            elif input_keys is not None:
                items.append(Example(dict(row)).with_inputs(*input_keys))
            elif labelled:
                raise TypeError(
                    f"row {i} of the ray.data.Dataset is a dict of columns {sorted(row)}; say which are the "
                    "program's inputs: imp.ray.evaluate(..., input_keys=('question',))"
                )
            else:
                items.append(dict(row))
        return items
    if isinstance(dataset, Mapping | str | bytes) or not isinstance(dataset, Iterable):
        what = "a devset" if labelled else "the inputs"
        raise TypeError(f"{what}: a ray.data.Dataset or an iterable of items, got {type(dataset).__name__}")
    items = list(dataset)
    if input_keys is not None:
        items = [Example(dict(x)).with_inputs(*input_keys) if isinstance(x, Mapping) else x for x in items]
    return items


def _options(
    *,
    workers: int,
    concurrency: int,
    batch_size: int | None,
    timeout: float | None,
    limits: Limits | None,
    num_cpus: float,
    lm_factory: Callable[[], LM] | None,
    registry: Mapping[str, object] | None,
    max_errors: int | None,
    input_keys: Sequence[str] | None,
) -> RunOptions:
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers is a positive integer (how many Ray actors run batches), got {workers!r}")
    check_concurrency(concurrency)
    size = batch_size if batch_size is not None else max(64, 8 * concurrency)
    if isinstance(size, bool) or not isinstance(size, int) or size < 1:
        raise ValueError(f"batch_size is a positive integer (items per batch sent to a worker), got {batch_size!r}")
    if limits is not None and not isinstance(limits, Limits):
        raise TypeError(f"limits is an imp.ray.Limits(...), got {type(limits).__name__}")
    if isinstance(num_cpus, bool) or not isinstance(num_cpus, int | float) or num_cpus < 0:
        raise ValueError(f"num_cpus is the CPUs each worker reserves (a number >= 0, e.g. 0.5), got {num_cpus!r}")
    if lm_factory is not None and (not callable(lm_factory) or isinstance(lm_factory, LM)):
        raise TypeError(
            "lm_factory is a picklable function that builds the LM inside each worker (from the worker's "
            f"environment), e.g. lambda: imp.lm('openai:gpt-4o-mini'); got {type(lm_factory).__name__}"
        )
    if input_keys is not None and (isinstance(input_keys, str) or not all(isinstance(k, str) for k in input_keys)):
        raise TypeError(f"input_keys is a tuple of column names, e.g. ('question',); got {input_keys!r}")
    return RunOptions(
        workers=workers,
        concurrency=concurrency,
        batch_size=size,
        timeout=check_timeout(timeout),
        limits=limits or Limits(),
        num_cpus=float(num_cpus),
        lm_factory=lm_factory,
        registry=registry,
        max_errors=check_max_errors(max_errors),
    )


def _travels(ray: Any, name: str, value: object) -> None:
    """Refuse, before any worker starts, a value that cannot be sent to one."""
    try:
        ray.cloudpickle.dumps(value)
    except Exception as exc:
        raise TypeError(f"the {name} must pickle to travel to Ray workers: {type(exc).__name__}: {exc}") from None


def _document(program: Program, options: RunOptions, where: str) -> JSONObject:
    """The program in `imp.save`'s format (never a credential), checked to load again here."""
    if not isinstance(program, Program):
        raise TypeError(f"{where} runs an imp program, got {type(program).__name__}")
    document = dump_program(program, registry=options.registry, include_lm=options.lm_factory is None)
    # A missing registry name fails here, not on a worker. The endpoint is trusted: this document is
    # the caller's own program, made here and carried by their cluster, not a file someone handed them.
    load_program(document, registry=options.registry, trust_endpoint=True)
    return document


async def evaluate(
    program: Program,
    dataset: Iterable[Example] | Any,
    metric: Metric,
    *,
    workers: int = 2,
    concurrency: int = 16,
    batch_size: int | None = None,
    max_errors: int | None = None,
    failure_score: float = 0.0,
    timeout: float | None = None,  # noqa: ASYNC109 - per row, applied as an imp.deadline on the worker
    limits: Limits | None = None,
    lm_factory: Callable[[], LM] | None = None,
    registry: Mapping[str, object] | None = None,
    input_keys: Sequence[str] | None = None,
    num_cpus: float = 0.5,
    progress: bool = True,
) -> EvaluationReport:
    """`imp.evaluate` on Ray workers: the same rows, score, errors, usage and report, from `workers` actors.

    `dataset` is a `ray.data.Dataset` (dict rows: name the inputs with `input_keys`) or any iterable
    of `imp.Example`. Each worker runs `concurrency` rows at once over batches of `batch_size`;
    `limits` are shared by all workers. A worker that dies has its batch retried once on a fresh
    worker, then its rows fail with `imp.ray.WorkerLost`. Call `ray.init(...)` first to pick the cluster.
    """
    ray = _ray()
    if not callable(metric):
        raise TypeError(f"a metric is a function metric(example, prediction), got {type(metric).__name__}")
    options = _options(
        workers=workers,
        concurrency=concurrency,
        batch_size=batch_size,
        timeout=timeout,
        limits=limits,
        num_cpus=num_cpus,
        lm_factory=lm_factory,
        registry=registry,
        max_errors=max_errors,
        input_keys=input_keys,
    )
    failure = to_number(failure_score, "failure_score")
    document = _document(program, options, "imp.ray.evaluate")
    examples = check_devset(_rows(dataset, input_keys, labelled=True))
    _travels(ray, "metric", metric)
    _travels(ray, "lm_factory", lm_factory)

    rows: list[EvaluationRow | None] = [None] * len(examples)
    display = Progress(len(examples), sys.stderr if progress else None, label="imp.ray.evaluate")
    usage = _Usage()
    errors = 0
    stop_reason: str | None = None

    def take(row: EvaluationRow) -> bool:
        nonlocal errors, stop_reason
        rows[row.index] = row
        display.update(row.score, error=row.error is not None)
        if row.error is None:
            return False
        errors += 1
        if options.max_errors is not None and errors >= options.max_errors and stop_reason is None:
            stop_reason = f"max_errors={options.max_errors} reached; last error: {describe_error(row.error)}"
        return stop_reason is not None

    def collect(batch: Batch, result: BatchResult) -> bool:
        usage.add(result)
        return any([take(record.row(examples[record.index])) for record in result.rows])

    def lost(batch: Batch, reason: str) -> bool:
        error = WorkerLost(f"the Ray worker running this row's batch died, twice: {reason}")
        return any([take(EvaluationRow(i, ex, None, failure, error=error, stage="program")) for i, ex in batch.items])

    started = time.monotonic()
    try:
        await run_batches(
            ray, "evaluate", document, examples, options, extra=(metric, failure), collect=collect, lost=lost
        )
    finally:
        display.close(stopped=stop_reason)
    finished = tuple(row for row in rows if row is not None)
    if stop_reason is not None:
        assert options.max_errors is not None
        raise EvaluationError(
            f"evaluation stopped after {len(finished)} of {len(examples)} rows: {stop_reason}",
            rows=finished,
            max_errors=options.max_errors,
        )
    total, by_model = usage.result()
    return EvaluationReport(finished, total, by_model, time.monotonic() - started)


async def map(
    program: Program,
    dataset: Iterable[Mapping[str, Any] | Example] | Any,
    *,
    workers: int = 2,
    concurrency: int = 16,
    batch_size: int | None = None,
    timeout: float | None = None,  # noqa: ASYNC109 - per item, applied as an imp.deadline on the worker
    limits: Limits | None = None,
    lm_factory: Callable[[], LM] | None = None,
    registry: Mapping[str, object] | None = None,
    input_keys: Sequence[str] | None = None,
    num_cpus: float = 0.5,
) -> list[Prediction | Exception]:
    """`imp.parallel` on Ray workers: one slot per item, in input order, holding its prediction or its error.

    `dataset` is a `ray.data.Dataset` (each row's columns are the inputs, or only `input_keys`) or
    any iterable of input mappings or `imp.Example`. A worker that dies has its batch retried once,
    then its items hold `imp.ray.WorkerLost`.
    """
    ray = _ray()
    options = _options(
        workers=workers,
        concurrency=concurrency,
        batch_size=batch_size,
        timeout=timeout,
        limits=limits,
        num_cpus=num_cpus,
        lm_factory=lm_factory,
        registry=registry,
        max_errors=None,
        input_keys=input_keys,
    )
    document = _document(program, options, "imp.ray.map")
    inputs = [_inputs(item, i) for i, item in enumerate(_rows(dataset, input_keys, labelled=False))]
    _travels(ray, "lm_factory", lm_factory)
    slots: list[Prediction | Exception | None] = [None] * len(inputs)

    def collect(batch: Batch, result: BatchResult) -> bool:
        for record in result.outcomes:
            slots[record.index] = record.outcome
        return False

    def lost(batch: Batch, reason: str) -> bool:
        for index, _ in batch.items:
            slots[index] = WorkerLost(f"the Ray worker running this item's batch died, twice: {reason}")
        return False

    await run_batches(ray, "map", document, inputs, options, extra=(), collect=collect, lost=lost)
    assert all(slot is not None for slot in slots)
    return slots  # type: ignore[return-value]  # every slot is filled: map never stops early


def _inputs(item: object, index: int) -> dict[str, object]:
    if isinstance(item, Example):
        try:
            return item.inputs()
        except ValueError:
            raise ValueError(f"input {index} is an Example without declared inputs; call .with_inputs(...)") from None
    if isinstance(item, Mapping):
        return dict(item)
    raise TypeError(f"input {index} must be a mapping of inputs or an imp.Example, got {type(item).__name__}")


class _Usage:
    """Usage summed over the batches that came back."""

    def __init__(self) -> None:
        self._by_model: dict[str, Usage] = {}

    def add(self, result: BatchResult) -> None:
        for model, dump in result.usage_by_model.items():
            before = self._by_model.get(model)
            self._by_model[model] = usage_of(dump) if before is None else before + usage_of(dump)

    def result(self) -> tuple[Usage, dict[str, Usage]]:
        total = Usage()
        for usage in self._by_model.values():
            total = total + usage
        return total, dict(self._by_model)
