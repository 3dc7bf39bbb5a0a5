"""The loop itself: each step one request; calls run, text answers or is a thought; an interruption gets a last request."""

from __future__ import annotations

from typing import assert_never

from imp.history import Step
from imp.programs.react._last import forced_submit, last_text
from imp.programs.react._request import Failure, ask, error_text
from imp.programs.react._spec import TurnSpec
from imp.programs.react._state import Ending, TerminationCause, TurnState
from imp.programs.react._tools import act
from imp.runtime.deadline import deadline_passed
from imp.runtime.events import Reasoning
from imp.runtime.run import emit

__all__ = ["end_interrupted", "run_turn"]


async def run_turn(spec: TurnSpec, state: TurnState) -> Ending:
    """Run a turn from where `state` stands to its ending. Every way out is an `Ending`, or an error
    no further request could cure (the caller gives it the history so far)."""
    rule = spec.rule
    cause: TerminationCause = "max_iters"
    while state.step < spec.max_iters + state.forgiven:
        state.step += 1
        if deadline_passed():
            return Ending(cause="deadline_exceeded")
        roster = spec.roster()
        reading = await ask(spec, state, roster, forced=False)
        if isinstance(reading, Failure):
            if reading.cause in ("context_window_exceeded", "deadline_exceeded"):
                return Ending(cause=reading.cause)
            if reading.ends_turn and reading.error is not None:
                raise reading.error
            if state.forgiven < rule.failed_requests_forgiven:
                state.forgiven += 1
                continue
            cause = reading.cause
            break
        if reading.error is not None:
            state.errors.append(error_text(reading.error))
            cause = "parse_error"
            break
        if reading.calls:
            state.thoughts = 0
            ending = await act(spec, state, roster, reading.calls, reading.text, response=reading.response)
            if ending is not None:
                return ending
            continue
        if reading.text is None:  # said nothing, called nothing
            cause = "empty_tool_calls"
            break
        if rule.kind == "text_answer":
            state.finish_reason = reading.response.finish_reason
            state.add(Step(fields={rule.text_field: reading.text}, tool_calls=()))
            return Ending({rule.text_field: reading.text}, "answered")
        state.add(Step(thought=reading.text, tool_calls=(), results=()))
        emit(Reasoning(state.step, reading.text))
        state.thoughts += 1
        if state.thoughts >= rule.thoughts_in_a_row:
            cause = "empty_tool_calls"
            break
    return await end_interrupted(spec, state, cause)


async def end_interrupted(spec: TurnSpec, state: TurnState, cause: TerminationCause) -> Ending:
    """The ending of an interrupted turn: one last request (the last text, or the forced `submit`),
    unless the deadline has passed or only a `finish_on` tool may end the turn."""
    kind = spec.rule.kind
    if deadline_passed():
        return Ending(cause="deadline_exceeded")
    if kind == "tools":
        return Ending(cause=cause)
    if spec.note:
        state.add(Step(note=spec.note, tool_calls=(), results=()))
    state.step += 1
    if kind == "text_answer":
        return await last_text(spec, state, cause)
    if kind == "submit":
        return await forced_submit(spec, state, cause)
    assert_never(kind)
