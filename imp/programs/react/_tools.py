"""A step's tool calls: running them (policy, authorization, deadline) and deciding whether they end the turn."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, replace

import anyio

from imp.history import Step, ToolCall, ToolResult
from imp.models.base import LMResponse
from imp.programs.react._spec import TurnSpec, check_outputs
from imp.programs.react._state import SUBMIT, Ending, Finish, TurnState
from imp.runtime.deadline import time_left
from imp.runtime.events import Reasoning
from imp.runtime.run import current_run, emit
from imp.tools import Tool, ToolError, forward_tool_event, run_tool_calls

__all__ = ["Ran", "act", "decide", "run_calls"]


@dataclass(frozen=True, slots=True)
class Ran:
    """What running a step's calls gave: the results so far, and whether the deadline cut them short."""

    results: tuple[ToolResult, ...]
    timed_out: bool = False


async def run_calls(
    spec: TurnSpec, state: TurnState, roster: Mapping[str, Tool], calls: Sequence[ToolCall], step: Step
) -> Ran:
    """Run the calls under the program's policy, the run's authorization and the deadline.

    If anything but the deadline stops them (a cancellation, `ExecutionCancelled`), the step is
    recorded with the results so far before the exception goes on.
    """
    run = current_run()
    results: list[ToolResult] = []
    left = time_left()
    try:
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

    The deadline passing while the tools run ends the turn `incomplete` (`deadline_exceeded`).
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
    ending, results = decide(spec, calls, ran.results) if decides else (None, ran.results)
    step = replace(step, results=results)
    if ending is not None and ending.outputs is not None:
        step = replace(step, fields=dict(ending.outputs))
    state.add(step)
    return ending
