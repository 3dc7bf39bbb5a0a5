"""Programs and how they are called: `await imp.call(program, inputs)`."""

from __future__ import annotations

import abc
import functools
from collections.abc import Mapping
from typing import Any

import anyio

from imp.errors import DeadlineExceeded
from imp.prediction import Prediction
from imp.runtime.deadline import time_left
from imp.signature import Signature

__all__ = ["Program", "call", "call_sync"]


class Program(abc.ABC):
    """Something `imp.call` can run: it has a signature and answers inputs with a Prediction."""

    signature: Signature

    @abc.abstractmethod
    async def acall(self, inputs: dict[str, Any], **call_options: Any) -> Prediction:
        """Run once on these inputs (already merged into one dict)."""


async def call(
    program: Program,
    inputs: Mapping[str, Any] | None = None,
    /,
    **fields: Any,
) -> Prediction:
    """Run a program on inputs (a mapping, keyword fields, or both) and return its Prediction.

    Under `imp.deadline`, a program that does not finish in time raises `imp.DeadlineExceeded`.
    """
    if not isinstance(program, Program):
        raise TypeError(
            f"imp.call runs an imp program (predict, chain_of_thought, react), got {type(program).__name__}"
        )
    if inputs is not None and not isinstance(inputs, Mapping):
        raise TypeError(f"inputs are a mapping of field names to values, got {type(inputs).__name__}")
    merged = {**inputs, **fields} if inputs else fields
    left = time_left()
    if left is None:
        return await program.acall(merged)
    if left <= 0:
        raise DeadlineExceeded("the deadline had passed before the call started")
    try:
        with anyio.fail_after(left):
            return await program.acall(merged)
    except TimeoutError as exc:
        if isinstance(exc, DeadlineExceeded):
            raise
        raise DeadlineExceeded("the deadline passed while the call was running") from None


def call_sync(program: Program, inputs: Mapping[str, Any] | None = None, /, **fields: Any) -> Prediction:
    """`imp.call` for scripts and notebooks: runs its own event loop (not inside a running one)."""
    return anyio.run(functools.partial(call, program, inputs, **fields))
