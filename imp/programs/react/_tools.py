"""A step's tool calls: running them (policy, authorization, deadline) and deciding whether they end the turn."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace
from typing import Any

import anyio

from imp.errors import ValidationFailed
from imp.history import Step, ToolCall, ToolResult
from imp.models.base import LMResponse
from imp.prediction import Prediction
from imp.programs._validate import check, refused
from imp.programs.react._spec import TurnSpec, check_outputs
from imp.programs.react._state import SUBMIT, Ending, Finish, TurnState
from imp.records import plain
from imp.runtime.budget import reserve_tool_calls
from imp.runtime.deadline import time_left
from imp.runtime.events import Reasoning
from imp.runtime.run import current_run, emit
from imp.tools import Tool, ToolError, forward_tool_event, run_tool_calls

__all__ = ["Ran", "act", "answer_refused", "decide", "run_calls", "validate_submit"]


@dataclass(frozen=True, slots=True)
class Ran:
    """What running a step's calls gave: the results so far, and whether the deadline cut them short."""

    results: tuple[ToolResult, ...]
    timed_out: bool = False


async def run_calls(
    spec: TurnSpec, state: TurnState, roster: Mapping[str, Tool], calls: Sequence[ToolCall], step: Step
) -> Ran:
    """Run the calls under the program's policy, the run's authorization and the deadline.

    If anything but the deadline stops them (a cancellation, `ExecutionCancelled`, a budget that has no
    tool calls left for them), the step is recorded with the results so far before the exception goes on.
    """
    run = current_run()
    results: list[ToolResult] = []
    left = time_left()
    try:
        reserve_tool_calls(sum(1 for call in calls if call.name != SUBMIT))  # the loop's own `submit` is free
        with anyio.fail_after(left) if left is not None else nullcontext():
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
        state.add(replace(step, results=tuple(results)))
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


async def validate_submit(
    spec: TurnSpec, state: TurnState, calls: Sequence[ToolCall], results: tuple[ToolResult, ...], ending: Ending
) -> tuple[Ending | None, tuple[ToolResult, ...]]:
    """Ask the program's validator about `submit`'s outputs: accepted, the turn ends; refused, the
    `submit` call's result is the reason the model reads, and the turn goes on."""
    outputs = dict(ending.outputs or {})
    reason = await answer_refused(spec, state, outputs)
    if reason is None:
        return ending, results
    checked = list(results)
    for index, (call, result) in enumerate(zip(calls, results, strict=True)):
        if call.name == SUBMIT and result.ok:
            text = f"{SUBMIT} was not accepted: {reason.rstrip('.')}. Correct the outputs and call {SUBMIT} again."
            checked[index] = ToolResult(call.id, call.name, None, "refused", text)
            break
    return None, tuple(checked)


async def answer_refused(spec: TurnSpec, state: TurnState, outputs: Mapping[str, Any]) -> str | None:
    """The validator's reason for refusing an answer (None: accepted), reported; past `max_retries`
    refusals, `imp.ValidationFailed` with every refused answer."""
    assert spec.validate is not None
    reason = await check(spec.validate, Prediction(dict(outputs)))
    if reason is None:
        return None
    state.refused.append({"outputs": plain(outputs), "reason": reason})
    if len(state.refused) > spec.max_retries:
        raise ValidationFailed(
            f"imp.react's validator refused {len(state.refused)} answer(s) (max_retries={spec.max_retries}); "
            f"the last: {reason}",
            attempts=state.refused,
        )
    refused(len(state.refused), reason, "ReAct")
    return reason


async def act(
    spec: TurnSpec,
    state: TurnState,
    roster: Mapping[str, Tool],
    calls: Sequence[ToolCall],
    thought: str | None,
    *,
    response: LMResponse | None = None,
    forced: bool = False,
    decides: bool = True,
) -> Ending | None:
    """Run a step's calls, record the step, and say how the turn ends if it ends here.

    The deadline passing while the tools run ends the turn `incomplete` (`deadline_exceeded`). A
    call left `deferred` (it waits for a decision from outside the run) pauses the turn
    (`awaiting_approval`) before anything decides whether the step ends it: the resumed turn decides,
    with every result in hand.
    """
    if thought:
        emit(Reasoning(state.step, thought, forced))
    step = Step(
        thought=thought or None,
        tool_calls=tuple(calls),
        results=(),
        reasoning=response.reasoning or None if response is not None else None,
        reasoning_data=response.reasoning_data if response is not None else None,
    )
    ran = await run_calls(spec, state, roster, calls, step)
    if ran.timed_out:
        state.add(replace(step, results=ran.results))
        return Ending(cause="deadline_exceeded")
    if any(result.outcome == "deferred" for result in ran.results):
        state.add(replace(step, results=ran.results))
        return Ending(reason="awaiting_approval")
    ending, results = decide(spec, calls, ran.results) if decides else (None, ran.results)
    if ending is not None and ending.reason == "submit" and spec.validate is not None:
        ending, results = await validate_submit(spec, state, calls, results, ending)
    step = replace(step, results=results)
    if ending is not None and ending.outputs is not None:
        step = replace(step, fields=dict(ending.outputs))
    state.add(step)
    return ending
