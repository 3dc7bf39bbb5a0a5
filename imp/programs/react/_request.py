"""One step's request and how its reply is read: tool calls (native, or written as JSON text), text,
or why the request failed."""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

import anyio

from imp._redact import redact_text
from imp.adapters.json import find_json_object
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
from imp.programs._partial import submitting
from imp.programs._stream_tap import current_tap
from imp.programs.predict import LoopStep, request
from imp.programs.react._messages import step_messages
from imp.programs.react._spec import TurnSpec
from imp.programs.react._state import CALLS_FIELD, SUBMIT, TerminationCause, TurnState
from imp.runtime.deadline import time_left
from imp.runtime.events import ContextProjected
from imp.runtime.run import emit
from imp.tools import Tool
from imp.values import load_json, unwrap_fence

__all__ = [
    "MAX_PROJECTION_RETRIES",
    "Failure",
    "MALFORMED_TOOL_CALL",
    "Reading",
    "ask",
    "ends_turn",
    "error_text",
    "refuses_named_choice",
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

    response: LMResponse
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


async def ask(
    spec: TurnSpec,
    state: TurnState,
    roster: Mapping[str, Tool],
    *,
    forced: bool,
    options: Mapping[str, object] | None = None,
    offered: Sequence[Tool] | None = None,
    thought_as_user: bool = False,
) -> Reading | Failure:
    """One step: its request offering `roster` (or only `offered`), and the reply as the loop reads it."""
    response = await _send(
        spec, state, roster, forced=forced, options=options, offered=offered, thought_as_user=thought_as_user
    )
    return response if isinstance(response, Failure) else _read(spec, state, response)


async def _send(
    spec: TurnSpec,
    state: TurnState,
    roster: Mapping[str, Tool],
    *,
    forced: bool,
    options: Mapping[str, object] | None,
    offered: Sequence[Tool] | None,
    thought_as_user: bool,
) -> LMResponse | Failure:
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
                    tap = current_tap()
                    reads = (spec.adapter, spec.step_signature) if tap is not None else None
                    with submitting(SUBMIT, spec.task) if tap is not None and tap.partial else nullcontext():
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


def _read(spec: TurnSpec, state: TurnState, response: LMResponse) -> Reading:
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
        return Reading(response, calls)
    # A model with native tools that wrote its calls as JSON text instead; in the written layout the
    # adapter's own reading comes first, so a thought and every call survive.
    if not calls and not spec.written:
        written = extract_written_calls(text, state.step)
        if written:
            return Reading(response, written)
    try:
        parsed = spec.adapter.parse_text(spec.step_signature, text)
    except AdapterParseError as exc:
        if calls:
            return Reading(response, calls, text.strip())
        written = extract_written_calls(text, state.step) if spec.written else []
        return Reading(response, written) if written else Reading(response, [], None, exc)
    if spec.written and not calls:
        calls = [
            call if call.id else ToolCall(f"call_{state.step}_{i}", call.name, call.arguments)
            for i, call in enumerate(written_calls(parsed.get(CALLS_FIELD) or [], state.step))
        ]
    value = parsed.get(text_field)
    return Reading(response, calls, value if isinstance(value, str) and value.strip() else None)


# --- calls written as text ---------------------------------------------------------------------

MALFORMED_TOOL_CALL = "__imp_malformed_tool_call__"
_NAME_KEYS = ("name", "tool", "tool_name", "function")
_ARG_KEYS = ("arguments", "args", "parameters", "input")


def _as_call(item: object, step: int, index: int) -> ToolCall | None:
    if not isinstance(item, Mapping):
        return None
    fn = item.get("function")
    source: Mapping[str, Any] = fn if isinstance(fn, Mapping) else item
    name = next((source[k] for k in _NAME_KEYS if isinstance(source.get(k), str)), None)
    args = next((source[k] for k in _ARG_KEYS if k in source), None)
    if isinstance(args, str):
        try:
            args = load_json(args)
        except ValueError:
            args = None
    call_id = str(item.get("id") or f"call_{step}_{index}")
    if name is None or not isinstance(args, Mapping | type(None)):
        return ToolCall(call_id, MALFORMED_TOOL_CALL, {"received": json.dumps(item, default=str)[:2000]})
    return ToolCall(call_id, name, dict(args or {}))


def extract_written_calls(text: str, step: int) -> list[ToolCall]:
    """Tool calls a model wrote as JSON text instead of making them (`{"tool": ..., "args": ...}` and kin)."""
    body = unwrap_fence(text.strip()).strip()
    if not body.startswith(("{", "[")):
        block = find_json_object(body)
        if block is None or len(block) < len(body) * 0.6:
            return []
        body = block
    try:
        value = load_json(body)
    except ValueError:
        return []
    items: list[Any]
    if isinstance(value, Mapping) and isinstance(value.get("tool_calls"), list):
        items = list(value["tool_calls"])
    elif isinstance(value, Mapping) and any(k in value for k in _NAME_KEYS) and any(k in value for k in _ARG_KEYS):
        items = [value]
    elif (
        isinstance(value, list)
        and value
        and all(isinstance(v, Mapping) and any(k in v for k in _NAME_KEYS) for v in value)
    ):
        items = list(value)
    else:
        return []
    calls = [_as_call(item, step, i) for i, item in enumerate(items)]
    return [c for c in calls if c is not None]


def written_calls(items: Sequence[object], step: int) -> list[ToolCall]:
    """The calls an LM wrote in its `tool_calls` output."""
    calls = [_as_call(item, step, index) for index, item in enumerate(items)]
    return [c for c in calls if c is not None]
