"""Going on with a paused turn: the decided calls run (only they, only once), then the loop goes on.

The turn paused on its newest step, whose `deferred` results stand for the calls waiting. Resuming
fills those results: an approved call runs now with exactly the arguments approved, a denial becomes
the refusal the model reads, a result given from outside stands as given. Calls of that step that
ran before the pause keep their results and never run again. Then the step is settled as any step
is (a `submit` beside a deferred call ends the turn now, once the program's validator accepts it),
and the loop continues.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace

from imp.errors import ResumeError
from imp.history import Step, ToolCall, ToolResult
from imp.programs.pending import Pending, Resolution
from imp.programs.react._spec import TurnSpec
from imp.programs.react._state import Ending, TurnState
from imp.programs.react._tools import settle
from imp.runtime.deadline import deadline_passed, fail_at_deadline
from imp.runtime.run import current_run
from imp.tools import ToolEvent, forward_tool_event, run_tool_calls

__all__ = ["Resumed", "check_paused", "resume_turn"]


@dataclass(frozen=True, slots=True)
class Resumed:
    """A paused turn going on: the step it paused on, and what was decided about its waiting calls."""

    step: Step
    resolution: Resolution


def check_paused(pending: Pending, state: TurnState) -> Step:
    """The step the turn paused on: its newest, holding each pending call with a `deferred` result
    (the pending data is checked against its own state, as an attacker may have written either)."""
    if not state.steps:
        raise ResumeError("the pending turn's state holds no step to resume")
    step = state.steps[-1]
    calls = {call.id: call for call in step.tool_calls or ()}
    results = {result.id: result for result in step.results or ()}
    for waiting in pending.calls:
        call, result = calls.get(waiting.id), results.get(waiting.id)
        if call is None or call.name != waiting.tool or result is None or result.outcome != "deferred":
            raise ResumeError(
                f"the pending turn's newest step does not hold call {waiting.id!r} waiting for a decision"
            )
    still = [r.id for r in results.values() if r.outcome == "deferred" and r.id not in pending.ids]
    if still:
        raise ResumeError(f"the pending turn's newest step holds waiting calls it does not list: {still}")
    if len(results) != len(calls):
        raise ResumeError("the pending turn's newest step holds a call without a result")
    return step


async def resume_turn(spec: TurnSpec, state: TurnState, resumed: Resumed, *, decides: bool = True) -> Ending | None:
    """Run the decided calls into the paused step and settle it (`_tools.settle`): how the turn ends, or None
    when it goes on. A paused last request (`decides=False`) is settled as the last request is: its
    calls do not decide how the turn ends, its text does."""
    step, resolution = resumed.step, resumed.resolution
    approved = {call.id: call for call in resolution.run}
    calls = tuple(approved.get(call.id, call) for call in step.tool_calls or ())
    results: dict[str, ToolResult] = {result.id: result for result in step.results or ()}
    for index, call in enumerate(calls):
        given = resolution.given.get(call.id)
        if given is not None:
            results[call.id] = given
            forward_tool_event(ToolEvent.call(index, call.id, call.name, dict(call.arguments)))
            forward_tool_event(ToolEvent.result(index, given, 0.0))
    ran: list[ToolResult] = []
    timed_out = False
    run = current_run()
    try:
        if resolution.run and not deadline_passed():
            with fail_at_deadline():
                await run_tool_calls(
                    list(resolution.run),
                    spec.roster(),
                    policy=spec.tool_policy,
                    authorize=run.authorize if run is not None else None,
                    on_event=forward_tool_event,
                    into=ran,
                    approved=tuple(approved),
                )
        elif resolution.run:
            timed_out = True
    except TimeoutError:
        timed_out = True
    finally:
        results.update({result.id: result for result in ran})
        state.steps[-1] = replace(step, tool_calls=calls, results=_in_order(calls, results))
    if timed_out:
        return Ending(cause="deadline_exceeded")
    return await settle(spec, state, state.steps[-1].results or (), decides=decides, re_asks=decides)


def _in_order(calls: tuple[ToolCall, ...], results: Mapping[str, ToolResult]) -> tuple[ToolResult, ...]:
    return tuple(results[call.id] for call in calls if call.id in results)
