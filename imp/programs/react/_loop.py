"""The loop itself: each step one request; calls run, text answers or is a thought; an interruption gets a last request."""

from __future__ import annotations

from imp.history import Step
from imp.prediction import Prediction
from imp.programs._validate import check, refusal
from imp.programs.react._last import last_request
from imp.programs.react._request import Failure, ask, error_text
from imp.programs.react._spec import TurnSpec
from imp.programs.react._state import Ending, TerminationCause, TurnState
from imp.programs.react._tools import act
from imp.records import plain
from imp.runtime.deadline import deadline_passed
from imp.runtime.events import Reasoning
from imp.runtime.run import emit

__all__ = ["run_turn"]


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
        if reading.text and (reading.calls or rule.kind != "text_answer"):  # a thought, not the answer
            emit(Reasoning(state.step, reading.text))
        if reading.calls:
            state.thoughts = 0
            state.add_calls(reading.calls, reading.text, reading.response)
            ending = await act(spec, state, roster)
            if ending is not None:
                return ending
            continue
        if reading.text is None:  # said nothing, called nothing
            cause = "empty_tool_calls"
            break
        if rule.kind == "text_answer":
            if spec.validate is not None:
                why = await refusal(
                    spec.validate,
                    {rule.text_field: reading.text},
                    state.refused,
                    spec.max_retries,
                    program="ReAct",
                    label="imp.react",
                )
                if why is not None:  # the answer is replayed as not sent, then why; the turn goes on
                    state.add(Step(thought=reading.text, tool_calls=(), results=()))
                    state.add(Step(note=f"Your answer was not accepted: {why}", tool_calls=(), results=()))
                    continue
            state.finish_reason = reading.response.finish_reason
            state.add(Step(fields={rule.text_field: reading.text}, tool_calls=()))
            return Ending({rule.text_field: reading.text}, "answered")
        state.add(Step(thought=reading.text, tool_calls=(), results=()))
        state.thoughts += 1
        if state.thoughts >= rule.thoughts_in_a_row:
            cause = "empty_tool_calls"
            break
    # Interrupted: one last request (the last text, or the forced `submit`), unless the deadline has
    # passed or only a `finish_on` tool may end the turn.
    if deadline_passed():
        return Ending(cause="deadline_exceeded")
    if rule.kind == "tools":
        return Ending(cause=cause)
    if spec.note:
        state.add(Step(note=spec.note, tool_calls=(), results=()))
    state.step += 1
    ending = await last_request(spec, state, cause)
    if ending.outputs is not None and spec.validate is not None:
        # The turn's requests are spent: a refused last answer leaves the turn incomplete, with the reason.
        reason = await check(spec.validate, Prediction(dict(ending.outputs)))
        if reason is not None:
            state.refused.append({"outputs": plain(ending.outputs), "reason": reason})
            state.errors.append(f"the answer was not accepted: {reason}")
            return Ending(cause="invalid_answer")
    return ending
