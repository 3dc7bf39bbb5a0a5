"""One step's request and how its reply is read: tool calls, text, or why the request failed."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import anyio

from imp._redact import redact_text
from imp.errors import (
    AdapterParseError,
    AuthenticationError,
    BadRequest,
    ContextWindowExceeded,
    LMError,
    QuotaExceeded,
    ToolChoiceUnsupported,
)
from imp.history import ToolCall
from imp.models.base import LMResponse
from imp.programs._stream_tap import current_tap
from imp.programs.predict import LoopStep, request
from imp.programs.react._messages import step_messages
from imp.programs.react._replay import episode_boundaries
from imp.programs.react._spec import TurnSpec
from imp.programs.react._state import CALLS_FIELD, TerminationCause, TurnState
from imp.programs.react._text import extract_written_calls, written_calls
from imp.runtime.deadline import time_left
from imp.runtime.events import ContextProjected
from imp.runtime.run import emit
from imp.tools import Tool

__all__ = [
    "MAX_PROJECTION_RETRIES",
    "Failure",
    "Reading",
    "ends_turn",
    "error_text",
    "read_step",
    "refuses_named_choice",
    "request_step",
]

MAX_PROJECTION_RETRIES = 8


@dataclass(frozen=True, slots=True)
class Failure:
    """A step request that failed: why (the termination cause it would give), and the error."""

    cause: TerminationCause
    error: LMError | None = None

    @property
    def ends_turn(self) -> bool:
        """Whether the error ends the turn at once, without a last request, raised with the history."""
        return self.error is not None and ends_turn(self.error)


@dataclass(frozen=True, slots=True)
class Reading:
    """A step's reply as the loop reads it: its calls, its text (a thought or the answer), or a parse error."""

    calls: list[ToolCall]
    text: str | None = None
    error: AdapterParseError | None = None


def ends_turn(error: LMError) -> bool:
    """A provider error that another request in this turn would meet again: a refused credential,
    a used-up quota, a bad request -- never a full context window (old episodes are left out and the
    request retried) nor a refused named `tool_choice` (the forced `submit` steps down to `required`)."""
    if isinstance(error, ContextWindowExceeded | ToolChoiceUnsupported):
        return False
    return isinstance(error, AuthenticationError | QuotaExceeded | BadRequest)


def refuses_named_choice(error: LMError) -> bool:
    """A refusal of a named `tool_choice` (Meta's models through OpenRouter support only `auto`)."""
    return isinstance(error, ToolChoiceUnsupported)


def error_text(exc: BaseException) -> str:
    """An error as the turn's `termination_error` records it: its type and message, redacted."""
    return redact_text(f"{type(exc).__name__}: {exc}")


async def request_step(
    spec: TurnSpec,
    state: TurnState,
    roster: Mapping[str, Tool],
    *,
    forced: bool,
    options: Mapping[str, Any] | None = None,
    offered: Sequence[Tool] | None = None,
    thought_as_user: bool = False,
) -> LMResponse | Failure:
    """One step request offering `roster` (or only `offered`), retried with older episodes left out
    while the context window is full."""
    from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_none

    boundaries = episode_boundaries(spec.base, list(spec.task.outputs))

    def remaining() -> list[int]:
        return [b for b in boundaries if b > state.cut]

    def reducible(exc: BaseException) -> bool:
        return (
            isinstance(exc, LMError)
            and exc.context_window_exceeded
            and bool(remaining())
            and state.projection_retries < MAX_PROJECTION_RETRIES
        )

    def project(attempt: RetryCallState) -> None:
        if attempt.outcome is not None and (failed := attempt.outcome.exception()) is not None:
            state.errors.append(error_text(failed))
        left = remaining()
        state.projection_retries += 1
        take = len(left) if state.projection_retries >= MAX_PROJECTION_RETRIES else max(1, math.ceil(len(left) / 2))
        state.cut = left[take - 1]
        state.omitted_groups += take
        emit(
            ContextProjected(
                "context_window_exceeded",
                state.projection_retries,
                omitted_prior_entries=state.cut,
                omitted_prior_groups=state.omitted_groups,
            )
        )

    tools = list(offered) if offered is not None else list(roster.values())
    request_options: dict[str, Any] = dict(spec.config)
    if not spec.written:
        request_options.update({"tools": [t.spec() for t in tools], "tool_choice": "auto"})
        if options:
            request_options.update(options)
    left = time_left()
    try:
        with anyio.fail_after(left) if left is not None else nullcontext():
            async for attempt in AsyncRetrying(
                retry=retry_if_exception(reducible),
                stop=stop_after_attempt(MAX_PROJECTION_RETRIES + 1),
                wait=wait_none(),
                before_sleep=project,
                reraise=True,
            ):
                with attempt:
                    messages = step_messages(spec, state, roster, thought_as_user=thought_as_user)
                    # request() emits model_request and model_response (with model, usage and duration)
                    streamed = current_tap() is not None
                    reads = (spec.adapter, spec.step_signature) if streamed else None
                    return await request(
                        spec.lm,
                        messages,
                        request_options,
                        program="ReAct",
                        reads=reads,
                        loop=LoopStep(state.step, forced),
                    )
    except TimeoutError:
        return Failure("deadline_exceeded")
    except LMError as exc:
        state.errors.append(error_text(exc))
        if exc.context_window_exceeded:
            return Failure("context_window_exceeded", exc)
        return Failure("prediction_error", exc)
    raise AssertionError("the retry loop always returns or raises")


def read_step(spec: TurnSpec, state: TurnState, response: LMResponse) -> Reading:
    """The step's tool calls and its text (thought or answer), or the parse error."""
    calls = [
        c if c.id else ToolCall(f"call_{state.step}_{i}", c.name, c.arguments)
        for i, c in enumerate(response.tool_calls)
    ]
    text = response.text or ""
    text_field = spec.rule.text_field
    if not text.strip() and response.fields and not calls:
        value = response.fields.get(text_field)
        text = value if isinstance(value, str) else ""
    if not text.strip():
        return Reading(calls)
    # A model with native tools that wrote its calls as JSON text instead; in the written layout the
    # adapter's own reading comes first, so a thought and every call survive.
    if not calls and not spec.written:
        written = extract_written_calls(text, state.step)
        if written:
            return Reading(written)
    try:
        parsed = spec.adapter.parse_text(spec.step_signature, text)
    except AdapterParseError as exc:
        if calls:
            return Reading(calls, text.strip())
        written = extract_written_calls(text, state.step) if spec.written else []
        return Reading(written) if written else Reading([], None, exc)
    if spec.written and not calls:
        calls = [
            call if call.id else ToolCall(f"call_{state.step}_{i}", call.name, call.arguments)
            for i, call in enumerate(written_calls(parsed.get(CALLS_FIELD) or [], state.step))
        ]
    value = parsed.get(text_field)
    return Reading(calls, value if isinstance(value, str) and value.strip() else None)
