"""What every optimizer shares: `compile` (async) and `compile_sync`, argument checks, the result."""

from __future__ import annotations

import abc
import copy
import functools
from collections.abc import Iterable

from imp.errors import ImpError
from imp.evaluation.evaluate import check_devset
from imp.optimize._result import OptimizationResult
from imp.prediction import Example
from imp.programs._parameters import Optimized, set_optimized
from imp.programs.base import Program
from imp.runtime.budget import Budget
from imp.runtime.sync import run_sync

__all__ = ["OptimizationError", "Optimizer", "check_positive", "mark"]


class OptimizationError(ImpError, RuntimeError):
    """An optimizer stopped before it finished: its runs failed `max_errors` times (`__cause__` is the last)."""

    def __init__(self, message: str, *, max_errors: int) -> None:
        self.max_errors = max_errors
        super().__init__(message)


def check_positive(value: object, name: str, *, allow_none: bool = False, allow_zero: bool = False) -> None:
    """Refuse a count that is not a whole number above zero (or zero, or None, where allowed)."""
    if value is None and allow_none:
        return
    low = 0 if allow_zero else 1
    if isinstance(value, bool) or not isinstance(value, int) or value < low:
        more = " or None" if allow_none else ""
        raise ValueError(f"{name} is a whole number >= {low}{more}, got {value!r}")


def mark(program: Program, optimizer: str, score: float | None, result: OptimizationResult | None) -> Program:
    """Record on the new program which optimizer made it, with what score (saved by `imp.save`)."""
    details = result.summary() if result is not None else {}
    # A copy: when the best candidate is the program given (nothing beat it), that value stays unmarked.
    return set_optimized(copy.copy(program), Optimized(optimizer, score, "valset", details))


class Optimizer(abc.ABC):
    """An optimizer: `await optimizer.compile(program, trainset=..., valset=...)` returns a new program."""

    result: OptimizationResult | None = None
    """The details of the last `compile`."""

    @abc.abstractmethod
    async def compile(
        self,
        program: Program,
        *,
        trainset: Iterable[Example],
        valset: Iterable[Example] | None = None,
        budget: Budget | None = None,
    ) -> Program:
        """A new, optimized program (the given one is not changed); under `budget=imp.Budget(...)` no
        request of the optimization passes its limits (`imp.BudgetExceeded`)."""

    def compile_sync(
        self,
        program: Program,
        *,
        trainset: Iterable[Example],
        valset: Iterable[Example] | None = None,
        budget: Budget | None = None,
    ) -> Program:
        """`compile` for scripts and notebooks (runs its own event loop)."""
        return run_sync(functools.partial(self.compile, program, trainset=trainset, valset=valset, budget=budget))

    @staticmethod
    def examples(given: Iterable[Example] | None, name: str, *, required: bool = True) -> list[Example]:
        """A checked list of `imp.Example`s with declared inputs."""
        if given is None:
            if required:
                raise ValueError(f"{name} is required: a list of imp.Example with declared inputs")
            return []
        try:
            checked = check_devset(given)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"{name}: {exc}") from None
        if required and not checked:
            raise ValueError(f"{name} is empty; give at least one imp.Example")
        return checked

    @staticmethod
    def check_program(program: object) -> Program:
        """Refuse what is not an imp program."""
        if not isinstance(program, Program):
            raise TypeError(f"an optimizer compiles an imp program, got {type(program).__name__}")
        return program
