"""One step's request and how its reply is read: tool calls, text, or why the request failed."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
from imp.history import History, ToolCall
from imp.models.base import LMResponse
from imp.programs._stream_tap import current_tap
from imp.programs.predict import request
from imp.programs.react._messages import step_messages
from imp.programs.react._replay import episode_boundaries
from imp.programs.react._state import CALLS_FIELD, TerminationCause, Turn
from imp.programs.react._text import extract_written_calls, written_calls
from imp.runtime.deadline import time_left
from imp.runtime.run import emit

if TYPE_CHECKING:
    from imp.programs.react._program import ReAct
    from imp.tools import Tool

__all__ = [
    "MAX_PROJECTION_RETRIES",
    "Failure",
    "Reading",
    "as_history",
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
    program: ReAct,
    turn: Turn,
    *,
    forced: bool,
    options: Mapping[str, Any] | None = None,
    roster: Sequence[Tool] | None = None,
    thought_as_user: bool = False,
) -> LMResponse | Failure:
    """One step request, retried with older episodes left out while the context window is full."""
    from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_none

    boundaries = episode_boundaries(turn.base, list(program.signature.outputs))

    def remaining() -> list[int]:
        return [b for b in boundaries if b > turn.cut]

    def reducible(exc: BaseException) -> bool:
        return (
            isinstance(exc, LMError)
            and exc.context_window_exceeded
            and bool(remaining())
            and turn.projection_retries < MAX_PROJECTION_RETRIES
        )

    def project(state: RetryCallState) -> None:
        if state.outcome is not None and (failed := state.outcome.exception()) is not None:
            turn.errors.append(error_text(failed))
        left = remaining()
        turn.projection_retries += 1
        take = len(left) if turn.projection_retries >= MAX_PROJECTION_RETRIES else max(1, math.ceil(len(left) / 2))
        turn.cut = left[take - 1]
        turn.omitted_groups += take
        emit(
            "context_projected",
            reason="context_window_exceeded",
            omitted_prior_entries=turn.cut,
            omitted_prior_groups=turn.omitted_groups,
            recovery_requests=turn.projection_retries,
        )

    tools = list(roster) if roster is not None else list(turn.roster.values())
    request_options: dict[str, Any] = dict(turn.config)
    if not turn.written:
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
                    messages = step_messages(program, turn, thought_as_user=thought_as_user)
                    # request() emits model_request and model_response (with model, usage and duration)
                    streamed = current_tap() is not None
                    reads = (turn.adapter, program.step_signature(turn.finish, turn.written)) if streamed else None
                    return await request(
                        turn.lm,
                        messages,
                        request_options,
                        program="ReAct",
                        reads=reads,
                        step=turn.step,
                        forced=forced,
                    )
    except TimeoutError:
        return Failure("deadline_exceeded")
    except LMError as exc:
        turn.errors.append(error_text(exc))
        if exc.context_window_exceeded:
            return Failure("context_window_exceeded", exc)
        return Failure("prediction_error", exc)
    raise AssertionError("the retry loop always returns or raises")


def read_step(program: ReAct, turn: Turn, response: LMResponse) -> Reading:
    """The step's tool calls and its text (thought or answer), or the parse error."""
    calls = [
        c if c.id else ToolCall(f"call_{turn.step}_{i}", c.name, c.arguments) for i, c in enumerate(response.tool_calls)
    ]
    text = response.text or ""
    text_field = turn.rule.text_field
    if not text.strip() and response.fields and not calls:
        value = response.fields.get(text_field)
        text = value if isinstance(value, str) else ""
    if not text.strip():
        return Reading(calls)
    # A model with native tools that wrote its calls as JSON text instead; in the written layout the
    # adapter's own reading comes first, so a thought and every call survive.
    if not calls and not turn.written:
        written = extract_written_calls(text, turn.step)
        if written:
            return Reading(written)
    step_sig = program.step_signature(turn.finish, turn.written)
    try:
        parsed = turn.adapter.parse_text(step_sig, text)
    except AdapterParseError as exc:
        if calls:
            return Reading(calls, text.strip())
        written = extract_written_calls(text, turn.step) if turn.written else []
        return Reading(written) if written else Reading([], None, exc)
    if turn.written and not calls:
        calls = [
            call if call.id else ToolCall(f"call_{turn.step}_{i}", call.name, call.arguments)
            for i, call in enumerate(written_calls(parsed.get(CALLS_FIELD) or [], turn.step))
        ]
    value = parsed.get(text_field)
    return Reading(calls, value if isinstance(value, str) and value.strip() else None)


def as_history(value: Any) -> History:
    """The `history` input as a History (a History, its dump, or a list of turns)."""
    if value is None:
        return History()
    if isinstance(value, History):
        return value
    if isinstance(value, Mapping) and "messages" in value:
        return History.load(value) if value.get("type") == "history" else History(value["messages"])
    if isinstance(value, list | tuple):
        return History(value)
    raise TypeError(f"history is an imp.History (or a list of turns), got {type(value).__name__}")
