"""Scripted LMs for the runtime tests: answer from the request's input fields, after a delay."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import anyio

import imp
from imp.models.base import LMResponse, Message, Usage

USAGE = Usage(input_tokens=10, output_tokens=2, requests=1)
_SECTION = re.compile(r"\[\[ ## (\w+) ## \]\]\n(.*?)(?=\n\n\[\[ ## |\n\nRespond with|\Z)", re.DOTALL)


def inputs_of(messages: list[Message]) -> dict[str, str]:
    """The input fields of the last user message a ChatAdapter wrote."""
    user = [m for m in messages if m.get("role") == "user"][-1]
    return dict(_SECTION.findall(str(user["content"])))


class Tracker:
    """Counts requests in flight (and the most at once) and the requests cancelled."""

    def __init__(self) -> None:
        self.in_flight = 0
        self.peak = 0
        self.cancelled = 0
        self.finished = 0


def answering_lm(
    answer: Callable[[dict[str, str]], Any],
    *,
    delay: float | Callable[[dict[str, str]], float] = 0.0,
    tracker: Tracker | None = None,
    model: str = "static",
) -> imp.StaticLM:
    """A StaticLM that sleeps, then answers `answer(inputs)` (a dict of output fields) with fixed usage."""
    track = tracker or Tracker()

    async def handler(messages: list[Message], options: dict[str, Any]) -> LMResponse:
        inputs = inputs_of(messages)
        track.in_flight += 1
        track.peak = max(track.peak, track.in_flight)
        try:
            wait = delay(inputs) if callable(delay) else delay
            if wait:
                await anyio.sleep(wait)
            fields = answer(inputs)
        except anyio.get_cancelled_exc_class():
            track.cancelled += 1
            raise
        finally:
            track.in_flight -= 1
        track.finished += 1
        return LMResponse(fields=fields, usage=USAGE, model=model)

    return imp.StaticLM(handler, model=model)


def echo(inputs: dict[str, str]) -> dict[str, str]:
    """Answer with the question, upper-cased; a question containing 'boom' raises."""
    question = inputs["question"]
    if "boom" in question:
        raise ValueError(f"cannot answer {question!r}")
    return {"answer": question.upper()}


def raises_interrupt(run: Callable[[Callable[[], Any]], Any], body: Callable[[], Any]) -> BaseException:
    """Run `body` with the `run` fixture, expecting it to end in KeyboardInterrupt; return that.

    A KeyboardInterrupt raised inside a task leaves asyncio's loop at once, and the task it came
    from is collected later with "Task exception was never retrieved": collected here, quietly,
    so that it is not printed among the suite's progress dots.
    """
    import gc
    import logging

    import pytest

    with pytest.raises(KeyboardInterrupt) as caught:
        run(body)
    asyncio_log = logging.getLogger("asyncio")
    disabled, asyncio_log.disabled = asyncio_log.disabled, True
    try:
        gc.collect()
    finally:
        asyncio_log.disabled = disabled
    return caught.value
