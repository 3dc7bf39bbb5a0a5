"""Usage accounting on a context variable, so a parent sees the usage of its concurrent children."""

from __future__ import annotations

import threading
from contextvars import ContextVar

from imp.records import Usage
from imp.runtime.budget import charge

__all__ = [
    "UsageAccumulator",
    "UsageMark",
    "innermost_accumulator",
    "record_unrecorded",
    "record_unrecorded_since",
    "record_usage",
    "records_in",
    "track_usage",
    "usage_mark",
]

_NO_USAGE = Usage()  # frozen: one shared instance for "nothing recorded"


_LOCK = threading.Lock()
"""One lock for every accumulator: adding is a few dict operations, and a lock per accumulator
would be one more object per predict call."""


class UsageAccumulator:
    """Sums usage per model (`"provider:model"`) for everything run inside its `track_usage` block.

    Open accumulators form a chain through `_parent` (innermost first), held by one context
    variable: entering one sets the variable once and keeps nothing else alive while the block
    runs (no token, no tuple), which matters with thousands of calls in flight.
    """

    __slots__ = ("_by_model", "_open", "_parent", "_records")

    def __init__(self) -> None:
        self._by_model: dict[str, Usage] | None = None  # made by the first `add`: none while a request waits
        self._records = 0
        self._parent: UsageAccumulator | None = None
        self._open = False

    def __enter__(self) -> UsageAccumulator:
        if self._open:
            raise RuntimeError("this usage accumulator is already open; use a new track_usage() block")
        self._parent = _innermost.get()
        _innermost.set(self)
        self._open = True
        return self

    def __exit__(self, *exc: object) -> None:
        if self._open:
            _innermost.set(self._parent)  # the same as resetting: blocks nest within one context
            self._open = False

    def add(self, model: str, usage: Usage) -> None:
        """Add one call's usage under its model's key."""
        with _LOCK:
            self._records += 1
            by_model = self._by_model
            if by_model is None:
                self._by_model = {model: usage}  # frozen: the first call's value is kept as it is
                return
            before = by_model.get(model)
            by_model[model] = usage if before is None else before + usage

    def snapshot(self) -> tuple[Usage, dict[str, Usage]]:
        """`total` and `by_model` read together (one lock, one consistent view)."""
        with _LOCK:
            by_model = dict(self._by_model) if self._by_model else {}
        if len(by_model) <= 1:
            return (next(iter(by_model.values())) if by_model else _NO_USAGE), by_model
        total = _NO_USAGE
        for usage in by_model.values():
            total = total + usage
        return total, by_model

    @property
    def by_model(self) -> dict[str, Usage]:
        """Usage per model key."""
        with _LOCK:
            return dict(self._by_model) if self._by_model else {}

    @property
    def total(self) -> Usage:
        """Usage summed over every model."""
        return self.snapshot()[0]


_innermost: ContextVar[UsageAccumulator | None] = ContextVar("imp_usage", default=None)


def record_usage(model: str, usage: Usage) -> None:
    """Add one call's usage to every accumulator open in this context (parents included)."""
    accumulator = _innermost.get()
    while accumulator is not None:
        accumulator.add(model, usage)
        accumulator = accumulator._parent


type UsageMark = tuple[UsageAccumulator, int] | None
"""The innermost open accumulator and how many records it had, taken before an LM request."""


def usage_mark() -> UsageMark:
    """Note the innermost accumulator's record count before an LM request (see `record_unrecorded`)."""
    inner = _innermost.get()
    return None if inner is None else (inner, inner._records)


def innermost_accumulator() -> UsageAccumulator | None:
    """The innermost open accumulator in this context (None outside every `track_usage` block)."""
    return _innermost.get()


def records_in(accumulator: UsageAccumulator | None) -> int:
    """How many usage records an accumulator has taken (0 for None): with `innermost_accumulator`, a
    mark that is two plain locals instead of a tuple kept alive across the LM request."""
    return 0 if accumulator is None else accumulator._records


def record_unrecorded_since(accumulator: UsageAccumulator | None, seen: int, model: str, usage: Usage) -> None:
    """`record_unrecorded` for a mark taken as `innermost_accumulator()` and `records_in(...)`; the
    usage is charged to the open budgets too (the LM recorded nothing, so it reserved nothing)."""
    if accumulator is not None and accumulator._records == seen:
        record_usage(model, usage)
        charge(usage)


def record_unrecorded(mark: UsageMark, model: str, usage: Usage) -> None:
    """Record a response's usage unless something recorded usage since `mark`.

    imp's own LMs record their usage themselves (so a direct `await lm.request(...)` is counted),
    as does a user's LM that delegates to one of them; a user's LM that only returns
    `LMResponse(usage=...)` records nothing, and the program that sent the request records it.
    Either way each request is counted once.
    """
    if mark is not None and mark[0]._records == mark[1]:
        record_usage(model, usage)
        charge(usage)


def track_usage() -> UsageAccumulator:
    """Open an accumulator for the work inside `with track_usage() as usage:`; tasks started inside
    inherit it, so a parent sees the usage of its concurrent children."""
    return UsageAccumulator()
