"""Usage accounting on a context variable, so a parent sees the usage of its concurrent children."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from imp.lm.base import Usage

__all__ = ["UsageAccumulator", "record_usage", "track_usage"]


class UsageAccumulator:
    """Sums usage per model (`"provider:model"`) for everything run inside its `track_usage` block."""

    __slots__ = ("_by_model", "_lock")

    def __init__(self) -> None:
        self._by_model: dict[str, Usage] = {}
        self._lock = threading.Lock()

    def add(self, model: str, usage: Usage) -> None:
        """Add one call's usage under its model's key."""
        with self._lock:
            self._by_model[model] = self._by_model.get(model, Usage()) + usage

    @property
    def by_model(self) -> dict[str, Usage]:
        """Usage per model key."""
        with self._lock:
            return dict(self._by_model)

    @property
    def total(self) -> Usage:
        """Usage summed over every model."""
        total = Usage()
        for usage in self.by_model.values():
            total = total + usage
        return total


_accumulators: ContextVar[tuple[UsageAccumulator, ...]] = ContextVar("imp_usage", default=())


def record_usage(model: str, usage: Usage) -> None:
    """Add one call's usage to every accumulator open in this context (parents included)."""
    for accumulator in _accumulators.get():
        accumulator.add(model, usage)


@contextmanager
def track_usage() -> Iterator[UsageAccumulator]:
    """Open an accumulator for the work inside the block; tasks started inside inherit it."""
    accumulator = UsageAccumulator()
    token = _accumulators.set((*_accumulators.get(), accumulator))
    try:
        yield accumulator
    finally:
        _accumulators.reset(token)
