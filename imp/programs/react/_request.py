"""One step's request: sent (older episodes left out while the context window is full), then read
(`_reading`), or why it failed."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from imp._redact import redact_text
from imp.errors import (
    AuthenticationError,
    BadRequest,
    ContextWindowExceeded,
    LMError,
    QuotaExceeded,
    ToolChoiceUnsupported,
)
from imp.models.base import LMResponse
from imp.programs._partial import submitting
from imp.programs._stream_tap import current_tap
from imp.programs.predict import LoopStep
from imp.programs.predict import request as lm_request
from imp.programs.react._messages import step_messages
from imp.programs.react._reading import Reading, read_reply
from imp.programs.react._spec import TurnSpec
from imp.programs.react._state import SUBMIT, TerminationCause, TurnState
from imp.runtime.deadline import fail_at_deadline
from imp.runtime.events import ContextProjected
from imp.runtime.run import emit
from imp.tools import Tool

__all__ = [
    "MAX_PROJECTION_RETRIES",
    "ORDINARY",
    "Failure",
    "Request",
    "ask",
    "ends_turn",
    "error_text",
]

MAX_PROJECTION_RETRIES = 8


@dataclass(frozen=True, slots=True)
class Request:
    """What one request offers: an ordinary step's (every tool of the roster, `auto`), or the last
    request's (`_last.last_requests`: a forced choice, only some tools, a thought on the user's side)."""

    forced: bool = False
    """The last request of an interrupted turn (the events say so)."""
    options: Mapping[str, object] | None = None
    """Request options over the spec's (the forced `tool_choice`)."""
    offered: Sequence[Tool] | None = None
    """The only tools offered (else the roster's)."""
    thought_as_user: bool = False
    """A newest thought-only step is shown on the user's side (a request may not end on the model's message)."""


ORDINARY = Request()
"""An ordinary step's request."""


@dataclass(frozen=True, slots=True)
class Failure:
    """A step request that failed: why (the termination cause it would give), and the error."""

    cause: TerminationCause
    error: LMError | None = None

    @property
    def ends_turn(self) -> bool:
        """Whether the error ends the turn at once, without a last request, raised with the history."""
        return self.error is not None and ends_turn(self.error)

    @property
    def refuses_named_choice(self) -> bool:
        """Whether the server refused a named `tool_choice` (Meta's models through OpenRouter support
        only `auto`): the forced `submit` steps down to `required`."""
        return isinstance(self.error, ToolChoiceUnsupported)


def ends_turn(error: LMError) -> bool:
    """A provider error that another request in this turn would meet again: a refused credential,
    a used-up quota, a bad request -- never a full context window (old episodes are left out and the
    request retried) nor a refused named `tool_choice` (the forced `submit` steps down to `required`)."""
    if isinstance(error, ContextWindowExceeded | ToolChoiceUnsupported):
        return False
    return isinstance(error, AuthenticationError | QuotaExceeded | BadRequest)


def error_text(exc: BaseException) -> str:
    """An error as the turn's `termination_error` records it: its type and message, redacted."""
    return redact_text(f"{type(exc).__name__}: {exc}")


async def ask(
    spec: TurnSpec, state: TurnState, roster: Mapping[str, Tool], request: Request = ORDINARY
) -> Reading | Failure:
    """One step: its request offering `roster` (or what `request` offers), and the reply as the loop reads it."""
    response = await _send(spec, state, roster, request)
    return response if isinstance(response, Failure) else read_reply(spec, state, response)


async def _send(spec: TurnSpec, state: TurnState, roster: Mapping[str, Tool], request: Request) -> LMResponse | Failure:
    """The request, retried with older episodes left out while the context window is full."""
    from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_none

    boundaries = spec.episodes

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

    tools = list(request.offered) if request.offered is not None else list(roster.values())
    request_options: dict[str, Any] = dict(spec.config)
    if not spec.written:
        request_options.update({"tools": [t.spec() for t in tools], "tool_choice": "auto"})
        if request.options:
            request_options.update(request.options)
    try:
        with fail_at_deadline():
            async for attempt in AsyncRetrying(
                retry=retry_if_exception(reducible),
                stop=stop_after_attempt(MAX_PROJECTION_RETRIES + 1),
                wait=wait_none(),
                before_sleep=project,
                reraise=True,
            ):
                with attempt:
                    messages = step_messages(spec, state, roster, thought_as_user=request.thought_as_user)
                    # request() emits model_request and model_response (with model, usage and duration)
                    tap = current_tap()
                    reads = (spec.adapter, spec.step_signature) if tap is not None else None
                    with submitting(SUBMIT, spec.task) if tap is not None and tap.partial else nullcontext():
                        return await lm_request(
                            spec.lm,
                            messages,
                            request_options,
                            program="ReAct",
                            reads=reads,
                            loop=LoopStep(state.step, request.forced),
                        )
    except TimeoutError:
        return Failure("deadline_exceeded")
    except LMError as exc:
        state.errors.append(error_text(exc))
        if exc.context_window_exceeded:
            return Failure("context_window_exceeded", exc)
        return Failure("prediction_error", exc)
    raise AssertionError("the retry loop always returns or raises")
