"""One Ray worker: an async actor that loads the saved program once and runs batches on its own event loop.

Each batch runs through what `imp.evaluate` and `imp.parallel` run on (`run_jobs` over the same
row jobs), so a row is scored, timed out and failed exactly as in one process. The worker's
requests pass the run's `WorkerGate`; its results go back as `imp.ray._rows` records.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Mapping, Sequence
from contextlib import nullcontext
from typing import Any

from imp.errors import DeadlineExceeded
from imp.evaluation.evaluate import row_job
from imp.evaluation.metrics import Metric
from imp.evaluation.parallel import run_jobs
from imp.models._gate import request_gate
from imp.models.base import LM
from imp.prediction import Example, Prediction
from imp.programs.base import Program, call
from imp.ray._limits import Limits, WorkerGate
from imp.ray._rows import BatchResult, OutcomeRecord, RowRecord, portable_error
from imp.records import Usage
from imp.runtime.usage import track_usage
from imp.saving import load_program
from imp.settings import context

__all__ = ["Worker"]

type LMFactory = Callable[[], LM]
"""Builds the worker's LM from the worker's own environment (called once in each worker)."""


class Worker:
    """A Ray actor's body: `evaluate_batch` and `map_batch`, plus `pause` and `stop` from the hub."""

    def __init__(
        self,
        worker_id: int,
        document: Mapping[str, object],
        registry: Mapping[str, object] | None,
        lm_factory: LMFactory | None,
        hub: Any,
        limits: Limits,
        concurrency: int,
        timeout: float | None,
    ) -> None:
        self._lm = lm_factory() if lm_factory is not None else None
        # the driver's own program (`_api._document`), so its endpoint is the caller's choice
        self._program: Program = load_program(document, registry=registry, lm=self._lm, trust_endpoint=True)
        self._gate = WorkerGate(hub, worker_id, limits)
        self._hub = hub
        self._concurrency = concurrency
        self._timeout = timeout
        self._stopped = False
        self._one_batch = asyncio.Lock()  # batches run one after the other: `concurrency` is per worker

    def pause(self, seconds: float) -> None:
        """The hub says a provider asked to wait."""
        self._gate.pause(seconds)

    def stop(self) -> None:
        """The run ended (max_errors): finish the rows in flight, start no more."""
        self._stopped = True

    def ready(self) -> bool:
        """The worker loaded its program (the driver waits for this before dispatching)."""
        return True

    async def evaluate_batch(
        self, items: Sequence[tuple[int, Example]], metric: Metric, failure_score: float
    ) -> BatchResult:
        """Score each example as `imp.evaluate` does; one record per row that finished."""
        jobs = [row_job(self._program, metric, index, example, failure_score) for index, example in items]
        outcomes, total, by_model = await self._run(jobs, count_errors=True)
        rows: list[RowRecord] = []
        for (index, _), outcome in zip(items, outcomes, strict=True):
            if outcome is None:
                continue
            if isinstance(outcome, Exception):  # the row's timeout, as imp.evaluate makes it a row
                rows.append(RowRecord(index, None, failure_score, None, portable_error(outcome), "program"))
            else:
                rows.append(RowRecord.of(outcome))
        return BatchResult.of(tuple(rows), (), total, by_model, stopped=self._stopped)

    async def map_batch(self, items: Sequence[tuple[int, Mapping[str, Any]]]) -> BatchResult:
        """Run the program on each item's inputs as `imp.parallel` does; one record per item."""
        jobs: list[Callable[[], Awaitable[Prediction]]] = [
            functools.partial(call, self._program, dict(inputs)) for _, inputs in items
        ]
        outcomes, total, by_model = await self._run(jobs, count_errors=False)
        records = [
            OutcomeRecord(
                index,
                outcome if isinstance(outcome, Prediction) else None,
                portable_error(_numbered(outcome, position, index)),
            )
            for position, ((index, _), outcome) in enumerate(zip(items, outcomes, strict=True))
            if outcome is not None
        ]
        return BatchResult.of((), tuple(records), total, by_model, stopped=self._stopped)

    async def _run[T](
        self, jobs: Sequence[Callable[[], Awaitable[T]]], *, count_errors: bool
    ) -> tuple[list[T | Exception | None], Usage, dict[str, Usage]]:
        """The batch's outcomes (None for rows a stop left unstarted) and the usage it recorded.

        With `count_errors`, each failed row is told to the hub (sent, not awaited: never inside the
        row's own deadline), which tells every worker to stop once the run reached `max_errors`.
        """

        def on_done(index: int, outcome: object) -> bool:
            if count_errors and (isinstance(outcome, Exception) or getattr(outcome, "error", None) is not None):
                self._hub.error.remote()
            return self._stopped

        async with self._one_batch:
            if self._stopped:
                return [None] * len(jobs), Usage(), {}
            token = request_gate.set(self._gate)
            try:
                with track_usage() as usage, context(lm=self._lm) if self._lm is not None else nullcontext():
                    outcomes: list[T | Exception | None] = list(
                        await run_jobs(
                            jobs,
                            concurrency=self._concurrency,
                            timeout=self._timeout,
                            on_done=on_done,
                        )
                    )
            finally:
                request_gate.reset(token)
            total, by_model = usage.snapshot()
            return outcomes, total, by_model


def _numbered(outcome: object, position: int, index: int) -> object:
    """A timeout's error names the item by its index in the whole input, as `imp.parallel`'s does, not in the batch."""
    local = f"item {position} did not finish"
    if isinstance(outcome, DeadlineExceeded) and str(outcome).startswith(local):
        error = DeadlineExceeded(f"item {index} did not finish" + str(outcome).removeprefix(local))
        error.__cause__ = outcome.__cause__
        return error
    return outcome
