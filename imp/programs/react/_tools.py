"""A step's tool calls: running them (policy, authorization, deadline) and deciding whether they end the turn."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from imp.history import ToolCall, ToolResult
from imp.programs._tool_loop import waits
from imp.programs._validate import refusal
from imp.programs.react._spec import TurnSpec
from imp.programs.react._state import SUBMIT, Ending, Finish, TurnState
from imp.runtime.budget import reserve_tool_calls
from imp.runtime.deadline import fail_at_deadline
from imp.runtime.run import current_run
from imp.signature import Signature
from imp.tools import Tool, ToolError, forward_tool_event, run_tool_calls
from imp.values import CoercionError, coerce_value

__all__ = [
    "Ran",
    "act",
    "check_outputs",
    "decide",
    "refused_submit",
    "run_calls",
    "settle",
    "validate_submit",
]


@dataclass(frozen=True, slots=True)
class Ran:
    """What running a step's calls gave: the results so far, and whether the deadline cut them short."""

    results: tuple[ToolResult, ...]
    timed_out: bool = False


async def run_calls(spec: TurnSpec, state: TurnState, roster: Mapping[str, Tool], calls: Sequence[ToolCall]) -> Ran:
    """Run the calls under the program's policy, the run's authorization and the deadline.

    If anything but the deadline stops them (a cancellation, `ExecutionCancelled`, a budget that has no
    tool calls left for them), the results so far are put on the step recorded for the calls before
    the exception goes on.
    """
    run = current_run()
    results: list[ToolResult] = []
    try:
        # The loop's own `submit` is free, and a call that waits for approval does not run now: the
        # resumed call reserves it when it runs, so it is counted once.
        reserve_tool_calls(sum(1 for call in calls if call.name != SUBMIT and not waits(roster, call.name)))
        with fail_at_deadline():
            await run_tool_calls(
                list(calls),
                roster,
                policy=spec.tool_policy,
                authorize=run.authorize if run is not None else None,
                on_event=forward_tool_event,
                into=results,
            )
    except TimeoutError:
        return Ran(tuple(results), timed_out=True)
    except BaseException:
        state.steps[-1] = replace(state.steps[-1], results=tuple(results))
        raise
    return Ran(tuple(results))


def decide(
    spec: TurnSpec, calls: Sequence[ToolCall], results: tuple[ToolResult, ...]
) -> tuple[Ending | None, tuple[ToolResult, ...]]:
    """Whether the step ends the turn: a valid `submit` first, then the first `finish_on` that finishes.

    A `finish_on` whose outputs do not fit the signature turns its call's result into the error.
    """
    for call, result in zip(calls, results, strict=True):
        if call.name == SUBMIT and result.ok:
            return Ending(result.result, "submit"), results
    if not spec.finish_on:
        return None, results
    checked_results = list(results)
    for index, (call, result) in enumerate(zip(calls, results, strict=True)):
        hook = spec.finish_on.get(call.name)
        if hook is None or not result.ok:
            continue
        decision = hook(dict(call.arguments), result.result, spec.inputs)
        if isinstance(decision, Finish):
            try:
                outputs = check_outputs(spec.task, decision.outputs, call.name)
            except ToolError as exc:
                checked_results[index] = ToolResult(call.id, call.name, None, "result", exc.message)
                continue
            return Ending(outputs, "finished_by_tool", finished_by=call.name), tuple(checked_results)
    return None, tuple(checked_results)


def check_outputs(signature: Signature, values: Mapping[str, object], tool_name: str) -> dict[str, Any]:
    """Outputs given to `submit` or by a `finish_on`, each coerced to its field's type (a refusal when they do not fit)."""
    missing = [n for n in signature.outputs if n not in values]
    if missing:
        raise ToolError(f"{tool_name} is missing: {', '.join(missing)}", outcome="refused")
    try:
        return {name: coerce_value(field, values[name]) for name, field in signature.outputs.items()}
    except CoercionError as exc:
        raise ToolError(f"{tool_name} got outputs that do not fit: {exc}", outcome="refused") from None


async def validate_submit(
    spec: TurnSpec, state: TurnState, calls: Sequence[ToolCall], results: tuple[ToolResult, ...], ending: Ending
) -> tuple[Ending | None, tuple[ToolResult, ...]]:
    """Ask the program's validator about `submit`'s outputs: accepted, the turn ends; refused, the
    `submit` call's result is the reason the model reads, and the turn goes on."""
    assert spec.validate is not None
    reason = await refusal(
        spec.validate, dict(ending.outputs or {}), state.refused, spec.max_retries, program="ReAct", label="imp.react"
    )
    if reason is None:
        return ending, results
    return None, refused_submit(calls, results, reason)


def refused_submit(calls: Sequence[ToolCall], results: Sequence[ToolResult], reason: str) -> tuple[ToolResult, ...]:
    """The results with the accepted `submit`'s turned into the validator's refusal, as the model reads it
    (its outputs stay readable in the call's arguments)."""
    checked = list(results)
    for index, (call, result) in enumerate(zip(calls, results, strict=True)):
        if call.name == SUBMIT and result.ok:
            text = f"{SUBMIT} was not accepted: {reason.rstrip('.')}. Correct the outputs and call {SUBMIT} again."
            checked[index] = ToolResult(call.id, call.name, None, "refused", text)
            break
    return tuple(checked)


async def act(
    spec: TurnSpec, state: TurnState, roster: Mapping[str, Tool], *, decides: bool = True, re_asks: bool = True
) -> Ending | None:
    """Run the calls of the step just recorded (the newest of `state.steps`, recorded by the caller
    with `TurnState.add_calls`), put their results on it, and say how the turn ends if it ends here.

    The deadline passing while the tools run ends the turn `incomplete` (`deadline_exceeded`). A
    call left `deferred` (it waits for a decision from outside the run) pauses the turn
    (`awaiting_approval`) before anything decides whether the step ends it: the resumed turn decides,
    with every result in hand.
    """
    step = state.steps[-1]
    calls = step.calls
    ran = await run_calls(spec, state, roster, calls)
    if ran.timed_out:
        state.steps[-1] = replace(step, results=ran.results)
        return Ending(cause="deadline_exceeded")
    if any(result.outcome == "deferred" for result in ran.results):
        state.steps[-1] = replace(step, results=ran.results)
        return Ending(reason="awaiting_approval")
    return await settle(spec, state, ran.results, decides=decides, re_asks=re_asks)


async def settle(
    spec: TurnSpec, state: TurnState, results: tuple[ToolResult, ...], *, decides: bool = True, re_asks: bool = True
) -> Ending | None:
    """Put the results on the newest step (its calls all answered) and say whether it ends the turn: a
    `submit` the program's validator refuses leaves the turn going on; an ending's outputs go on the step.
    With `re_asks=False` (the last request: no request is left to re-ask with) the validator is not
    asked here; the loop checks that answer once, and a refusal leaves the turn incomplete.

    A step run now and a paused step whose waiting calls were decided are settled here alike, so a
    `submit` made beside a call that waited is checked by the validator once the call is decided.
    """
    step = state.steps[-1]
    calls = step.calls
    ending, results = decide(spec, calls, results) if decides else (None, results)
    if ending is not None and ending.reason == "submit" and spec.validate is not None and re_asks:
        try:
            with fail_at_deadline():
                ending, results = await validate_submit(spec, state, calls, results, ending)
        except TimeoutError:  # the deadline passed while the validator read the answer
            state.steps[-1] = replace(step, results=results)
            return Ending(cause="deadline_exceeded")
    step = replace(step, results=results)
    if ending is not None and ending.outputs is not None:
        step = replace(step, fields={**step.fields, **ending.outputs})
    state.steps[-1] = step
    return ending
