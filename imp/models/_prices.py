"""A price table: what a response cost, worked out from its usage when the provider does not say."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass

from imp.records import Usage

__all__ = ["Prices", "as_prices", "priced"]


@dataclass(frozen=True, slots=True)
class Prices:
    """Dollars per million tokens; cache reads and writes default to Anthropic's 0.1x and 1.25x of input."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def __post_init__(self) -> None:
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if value is not None and (not isinstance(value, int | float) or isinstance(value, bool) or value < 0):
                raise ValueError(f"prices.{field.name} is dollars per million tokens (a number >= 0), got {value!r}")

    def cost(self, usage: Usage) -> float:
        """The dollars `usage` cost: uncached input, cache reads, cache writes and output apart."""
        read = self.cache_read if self.cache_read is not None else self.input * 0.1
        write = self.cache_write if self.cache_write is not None else self.input * 1.25
        fresh = max(usage.input_tokens - usage.cached_tokens - usage.cache_write_tokens, 0)
        total = fresh * self.input + usage.cached_tokens * read + usage.cache_write_tokens * write
        return (total + usage.output_tokens * self.output) / 1_000_000

    def dump(self) -> dict[str, float]:
        """A JSON-friendly dict (what `as_prices` reads back)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if getattr(self, f.name) is not None}


def as_prices(value: Prices | Mapping[str, float] | None) -> Prices | None:
    """The `prices=` setting as a `Prices` (a mapping from a saved program is accepted)."""
    if value is None or isinstance(value, Prices):
        return value
    if isinstance(value, Mapping):
        unknown = sorted(set(value) - {"input", "output", "cache_read", "cache_write"})
        if unknown:
            raise TypeError(f"prices takes input, output, cache_read, cache_write; got {', '.join(unknown)}")
        return Prices(**value)
    raise TypeError(f"prices is imp.models.Prices(input=..., output=...) or a mapping, got {type(value).__name__}")


def priced(usage: Usage, prices: Prices | None) -> Usage:
    """`usage` with its cost filled in from `prices` (a provider-reported cost is kept)."""
    if prices is None or usage.cost is not None or usage.requests == 0:
        return usage
    return dataclasses.replace(usage, cost=prices.cost(usage))
