"""The loop itself: each step one request; calls run, text answers or is a thought; an interruption gets a last request."""

from __future__ import annotations

from typing import TYPE_CHECKING

from imp.history import Step
from imp.programs.react._finish import TextAnswer
from imp.programs.react._last import raise_with_history
from imp.programs.react._request import Failure, error_text, read_step, request_step
from imp.programs.react._state import SUBMIT, Ending, TerminationCause, Turn, deadline_passed, incomplete
from imp.programs.react._tools import act
from imp.runtime.run import emit

if TYPE_CHECKING:
    from imp.programs.react._program import ReAct

__all__ = ["run_turn"]


async def run_turn(program: ReAct, turn: Turn) -> Ending:
    """Run one turn to its ending; every way out is an `Ending` or an error carrying the history."""
    rule = turn.rule
    thoughts = 0
    forgiven = 0
    budget = turn.max_iters
    cause: TerminationCause = "max_iters"
    while turn.step < budget:
        turn.step += 1
        if deadline_passed():
            return incomplete("deadline_exceeded")
        _refresh_tools(program, turn)
        response = await request_step(program, turn, forced=False)
        if isinstance(response, Failure):
            if response.cause in ("context_window_exceeded", "deadline_exceeded"):
                return incomplete(response.cause)
            if response.ends_turn and response.error is not None:
                raise_with_history(response.error, turn)
            if forgiven < rule.failed_requests_forgiven:
                forgiven += 1
                budget += 1
                continue
            cause = response.cause
            break
        reading = read_step(program, turn, response)
        if reading.error is not None:
            turn.errors.append(error_text(reading.error))
            cause = "parse_error"
            break
        if reading.calls:
            thoughts = 0
            ending = await act(program, turn, reading.calls, reading.text, response=response)
            if ending is not None:
                return ending
            continue
        if reading.text is None:  # said nothing, called nothing
            cause = "empty_tool_calls"
            break
        if isinstance(rule, TextAnswer):
            turn.finish_reason = response.finish_reason
            turn.add(Step(fields={rule.text_field: reading.text}, tool_calls=()))
            return Ending({rule.text_field: reading.text}, "answered")
        turn.add(Step(thought=reading.text, tool_calls=(), results=()))
        emit("reasoning", step=turn.step, text=reading.text, forced=False)
        thoughts += 1
        if thoughts >= rule.thoughts_in_a_row:
            cause = "empty_tool_calls"
            break
    return await rule.end_interrupted(program, turn, cause)


def _refresh_tools(program: ReAct, turn: Turn) -> None:
    """Offer a live tool list as it is now (an MCP server that changed its tools mid-turn): tools
    it no longer holds leave the roster, so a call to one is refused as an unknown tool."""
    live = program.live_tools
    if live is None:
        return
    if turn.overrides is None:
        originals = {id(t) for t in program.tools}
        turn.overrides = {n: t for n, t in turn.roster.items() if n != SUBMIT and id(t) not in originals}
    roster = {tool.name: turn.overrides.get(tool.name, tool) for tool in live}
    if SUBMIT in turn.roster:
        roster[SUBMIT] = turn.roster[SUBMIT]
    turn.roster = roster
