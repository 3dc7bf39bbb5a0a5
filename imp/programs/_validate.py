"""Validators that re-ask: a program's `validate=` refuses an answer with `imp.Retry("why")`, and the
model reads its reply and the reason and answers again, up to `max_retries` times.

`Predict` and `ChainOfThought` (and a function program built on them) re-ask here: each attempt is
one more request with the refused reply and the reason after the original messages, so the model
sees what it wrote and why it was refused. A reply that cannot be read (a parse or type error)
re-asks the same way, with the error in words the model can act on; when every attempt is spent
on unreadable replies, the JSON fallback is the last resort. A tool loop validates its `submit`
and its text answer in its own loop (`react/_tools.py`, `react/_loop.py`), with `refusal` below.
"""

from __future__ import annotations

import inspect
import json
from collections.abc import Mapping
from typing import Any

from imp.errors import AdapterParseError, Retry, ValidationFailed
from imp.models.base import LMResponse, Message
from imp.prediction import Prediction, PredictionMetadata
from imp.programs._parameters import open_trace, trace_call
from imp.programs._stream_tap import current_tap, part
from imp.programs.predict import (
    Predict,
    Validator,
    check_retry_options,
    prepare_call,
    read_response,
    request,
    request_options,
    use_checked_call,
)
from imp.records import plain
from imp.runtime.events import OutputRetry
from imp.runtime.run import emit
from imp.runtime.usage import track_usage
from imp.signature import Signature

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "Validator",
    "check",
    "check_retry_options",
    "refusal",
    "refused",
    "retries_of",
    "validated_call",
]

DEFAULT_MAX_RETRIES = 2
"""Re-asks a program with a validator makes before it raises `imp.ValidationFailed`."""


def retries_of(validate: object, max_retries: int | None) -> int:
    """How many re-asks a program makes: `max_retries`, else 2 with a validator and 0 without."""
    if max_retries is not None:
        return max_retries
    return DEFAULT_MAX_RETRIES if validate is not None else 0


async def check(validate: Validator, prediction: Prediction) -> str | None:
    """Run the validator: None when it accepts, the reason when it raises `imp.Retry`.

    A sync validator runs on the event loop (as a sync authorizer does), so it should answer at
    once; one that waits on I/O should be async. Any other exception is a bug in the validator and
    propagates.
    """
    try:
        answer = validate(prediction)
        if inspect.isawaitable(answer):
            await answer
    except Retry as exc:
        return exc.reason.strip() or "the answer was refused"
    return None


async def refusal(
    validate: Validator,
    outputs: Mapping[str, object],
    refusals: list[dict[str, Any]],
    max_retries: int,
    *,
    program: str,
    label: str,
) -> str | None:
    """A loop's answer put to its validator: None when accepted; refused, the reason, kept in
    `refusals` and reported; past `max_retries` refusals, `imp.ValidationFailed` with every refused
    answer (`label` names the program in its message: `imp.react`)."""
    reason = await check(validate, Prediction(dict(outputs)))
    if reason is None:
        return None
    refusals.append({"outputs": plain(outputs), "reason": reason})
    if len(refusals) > max_retries:
        raise ValidationFailed(
            f"{label}'s validator refused {len(refusals)} answer(s) (max_retries={max_retries}); the last: {reason}",
            attempts=refusals,
        )
    refused(len(refusals), reason, program)
    return reason


def refused(attempt: int, reason: str, program: str) -> None:
    """Report a refused answer: an `output_retry` event and, under `imp.stream`, a `retry` part."""
    emit(OutputRetry(attempt, reason, program))
    tap = current_tap()
    if tap is not None:
        tap.put(part("retry", reason=reason))


def parse_reason(error: AdapterParseError) -> str:
    """A parse or type error in words the model can act on."""
    where = ", ".join(f"`{name}`" for name in error.fields)
    return (
        f"Your reply could not be read ({where}): {error.reason}"
        if where
        else f"Your reply could not be read: {error.reason}"
    )


def reask_messages(messages: list[Message], response: LMResponse, reason: str, signature: Signature) -> list[Message]:
    """The next attempt's messages: the ones sent, the refused reply, and the reason with what to do."""
    reply = response.text or (json.dumps(plain(response.fields)) if response.fields is not None else "")
    outputs = ", ".join(f"`{name}`" for name in signature.outputs)
    note = f"{reason}\n\nAnswer again with the output fields {outputs}, corrected, in the same format as before."
    return [*messages, {"role": "assistant", "content": reply}, {"role": "user", "content": note}]


async def validated_call(program: Predict, inputs: dict[str, Any]) -> Prediction:
    """A Predict call whose answer is checked, re-asked up to its `max_retries`, then refused with every attempt."""
    signature, values, lm, adapter, config = prepare_call(program, inputs)
    label = type(program).__name__
    retries = retries_of(program.validate, program.max_retries)
    attempts: list[dict[str, Any]] = []
    with track_usage() as usage:
        messages = adapter.format_with(signature, values, program._format_options)
        options = request_options(adapter, signature, lm, config)
        used, fell_back = adapter, False
        parse_error: AdapterParseError | None = None
        for attempt in range(1, retries + 2):
            response = await request(lm, messages, options, program=label, reads=(adapter, signature))
            accepted, reason, parse_error = await _judge(program, adapter, signature, response, attempts)
            if accepted is not None:
                fields = accepted
                break
            if attempt <= retries:
                refused(attempt, reason, label)
                messages = reask_messages(messages, response, reason, signature)
        else:
            fields = None
            fallback = adapter.fallback if program.json_fallback and parse_error is not None else None
            if fallback is not None:  # the last reply unreadable too: the JSON fallback, as the last resort
                refused(len(attempts), f"{parse_error}; asking again with {fallback.name}", label)
                retry_messages = fallback.format_with(signature, values, program._format_options)
                retry_options = {**fallback.request_options(signature, lm), **config}
                response = await request(lm, retry_messages, retry_options, program=label, reads=(fallback, signature))
                fields, _, _ = await _judge(program, fallback, signature, response, attempts)
                used, fell_back = fallback, True
        total, by_model = usage.snapshot()
    if fields is None:
        last = attempts[-1]["reason"] if attempts else "no attempt"
        raise ValidationFailed(
            f"{label} refused {len(attempts)} answer(s) (max_retries={retries}); the last: {last}", attempts=attempts
        ) from parse_error  # an unreadable last reply: its parse error (finish reason, completion) is the cause
    metadata = PredictionMetadata(
        finish_reason=response.finish_reason,
        usage=total,
        usage_by_model=by_model,
        adapter=used.name,
        json_fallback=fell_back,
        lm_calls=total.requests,
        extra={"attempts": len(attempts) + 1} if attempts else {},
        model=response.answered_by,
    )
    if open_trace() is not None:
        trace_call(program, values, fields)
    return Prediction(fields, metadata)


async def _judge(
    program: Predict, adapter: Any, signature: Signature, response: LMResponse, attempts: list[dict[str, Any]]
) -> tuple[Mapping[str, Any] | None, str, AdapterParseError | None]:
    """Read and check one reply: (its fields when accepted, else None; the reason; the parse error)."""
    try:
        fields = read_response(adapter, signature, response)
    except AdapterParseError as exc:
        reason = parse_reason(exc)
        attempts.append({"outputs": None, "reply": response.text, "reason": reason})
        return None, reason, exc
    if program.validate is None:
        return fields, "", None
    refusal = await check(program.validate, Prediction(dict(fields)))
    if refusal is None:
        return fields, "", None
    attempts.append({"outputs": plain(fields), "reply": response.text, "reason": refusal})
    return None, refusal, None


use_checked_call(validated_call)
