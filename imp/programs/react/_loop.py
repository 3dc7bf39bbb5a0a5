"""The loop itself: each step one request; calls run, text answers or is a thought; an interrupted turn
gets one last request, whose reply the loop reads, records and acts on here too."""

from __future__ import annotations

import json
from dataclasses import replace

from imp._redact import redact
from imp.errors import ReActStepError
from imp.history import Step, ToolCall
from imp.prediction import Prediction
from imp.programs._validate import check, refusal
from imp.programs.react._last import extract, last_requests
from imp.programs.react._request import Failure, ask, error_text
from imp.programs.react._resume import Resumed, resume_turn
from imp.programs.react._spec import TurnSpec
from imp.programs.react._state import SUBMIT, Ending, TerminationCause, TurnState
from imp.programs.react._tools import act, refused_submit
from imp.records import plain
from imp.runtime.deadline import deadline_passed, fail_at_deadline
from imp.runtime.events import Reasoning
from imp.runtime.run import emit

__all__ = ["run_turn"]


async def run_turn(spec: TurnSpec, state: TurnState, resumed: Resumed | None = None) -> Ending:
    """Run a turn from where `state` stands to its ending (a paused turn first runs its decided calls).
    Every way out is an `Ending`, or an error no further request could cure (the caller gives it the
    history so far)."""
    if resumed is not None:
        # A paused last request: its decided calls run, then its text answers (they do not decide).
        interrupted, text = state.last_cause, state.last_text
        state.last_cause = state.last_text = None
        ending = await resume_turn(spec, state, resumed, decides=interrupted is None)
        if interrupted is not None:
            return await _accepted(spec, state, ending or _last_text(spec, state, text, interrupted, ran=True))
        if ending is not None:
            return ending
    rule = spec.rule
    cause: TerminationCause = "max_iters"
    while state.step < spec.max_iters + state.forgiven:
        state.step += 1
        if deadline_passed():
            return Ending(cause="deadline_exceeded")
        roster = spec.roster()
        reading = await ask(spec, state, roster)
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
                try:
                    with fail_at_deadline():
                        why = await refusal(
                            spec.validate,
                            {rule.text_field: reading.text},
                            state.refused,
                            spec.max_retries,
                            program="ReAct",
                            label="imp.react",
                        )
                except TimeoutError:  # the deadline passed while the validator read the answer
                    state.add(Step(thought=reading.text, tool_calls=(), results=()))
                    return Ending(cause="deadline_exceeded")
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
    return await _accepted(spec, state, await _last_request(spec, state, cause))


async def _accepted(spec: TurnSpec, state: TurnState, ending: Ending) -> Ending:
    """The last answer put to the program's validator. The turn's requests are spent, so a refused last
    answer leaves the turn incomplete (`invalid_answer`), with the reason."""
    if ending.outputs is not None and spec.validate is not None:
        try:
            with fail_at_deadline():
                reason = await check(spec.validate, Prediction(dict(ending.outputs)))
        except TimeoutError:  # the deadline passed while the validator read the answer
            return Ending(cause="deadline_exceeded")
        if reason is not None:
            state.refused.append({"outputs": plain(ending.outputs), "reason": reason})
            state.errors.append(f"the answer was not accepted: {reason}")
            _record_refusal(spec, state, ending, reason)
            return Ending(cause="invalid_answer")
    return ending


def _record_refusal(spec: TurnSpec, state: TurnState, ending: Ending, reason: str) -> None:
    """Record a refused last answer as a refusal in an ordinary step is recorded, never as the step's
    outputs (a later call given the history would read an answered episode): the forced `submit`'s
    result is the refusal; the last text is a thought, then the reason; the extracted answer is a note
    with the reason. The refused values stay readable (the call's arguments, the thought, the note)."""
    assert ending.outputs is not None
    step = state.steps[-1]
    kept = {k: v for k, v in step.fields.items() if k not in spec.task.outputs}
    if ending.reason == "forced_submit":
        state.steps[-1] = replace(step, fields=kept, results=refused_submit(step.calls, step.result_list(), reason))
    elif ending.reason == "last_text":
        text = ending.outputs[spec.rule.text_field]
        state.steps[-1] = replace(step, fields=kept, thought=text if step.thought is None else step.thought)
        state.add(Step(note=f"Your answer was not accepted: {reason}", tool_calls=(), results=()))
    else:  # extracted: the step the extractor's answer was put on
        assert ending.reason == "extracted", ending.reason
        values = json.dumps(plain(ending.outputs), ensure_ascii=False, default=str)
        note = f"The answer read from this turn, {values}, was not accepted: {reason}"
        state.steps[-1] = replace(step, fields=kept, note=note)


def _last_text(spec: TurnSpec, state: TurnState, text: str | None, cause: TerminationCause, *, ran: bool) -> Ending:
    """How a last text ends the turn: its text is the answer (put on the step whose calls ran), or
    without text the turn has none."""
    if text is None:
        return Ending(cause=cause)
    name = spec.rule.text_field
    if ran:
        state.steps[-1] = replace(state.steps[-1], fields={**state.steps[-1].fields, name: text})
    return Ending({name: text}, "last_text", cause)


async def _last_request(spec: TurnSpec, state: TurnState, cause: TerminationCause) -> Ending:
    """The last request (what it sends is `_last.last_requests`'), its reply read, recorded and acted on
    in one place: the forced `submit`'s `submit` calls run and end the turn; the last text answers, and
    only `last_request_tools` run. When no `submit` comes, the extractor reads the history."""
    forcing_submit = spec.rule.kind == "submit"
    name = spec.rule.text_field
    roster = spec.roster()
    requests = last_requests(spec, roster)
    for request in requests:
        reading = await ask(spec, state, roster, request)
        if not (isinstance(reading, Failure) and reading.refuses_named_choice):
            break
    if isinstance(reading, Failure):  # incomplete at the deadline or a full window; else raised, or extracted
        if reading.cause in ("context_window_exceeded", "deadline_exceeded"):
            return Ending(cause=reading.cause)
        if reading.ends_turn and reading.error is not None:
            raise reading.error
        if request is requests[0]:  # not the `required` that a refused named choice steps down to
            error = reading.error
            raise ReActStepError(f"the last request of the turn failed: {error}", history=None, cause=error) from error
    else:
        # What the reply writes: its step, and the calls of it that run.
        text = reading.text
        runnable = (SUBMIT,) if forcing_submit else spec.last_request_tools
        run = [c for c in reading.calls if c.name in runnable]
        # Calls that may not run here are not recorded in the history: listed, so none is lost.
        state.unexecuted = tuple(
            ToolCall(c.id, c.name, redact(dict(c.arguments))) for c in reading.calls if c.name not in runnable
        )
        if forcing_submit:
            if run and text:
                emit(Reasoning(state.step, text, True))
            step: Step | None = Step(thought=text, tool_calls=tuple(run), results=() if run or text else None)
        else:
            state.finish_reason = reading.response.finish_reason
            if reading.error is not None:
                state.errors.append(error_text(reading.error))
                return Ending(cause=cause)
            step = None  # only tool calls that may not run, or nothing: the turn has no answer
            if run:  # the answer goes on this step once its calls ran
                step = Step(tool_calls=tuple(run), results=())
            elif text is not None:
                step = Step(fields={name: text}, tool_calls=())
        if step is not None:
            state.add(step)
        ended = await act(spec, state, roster, decides=forcing_submit, re_asks=False) if run else None
        # How the turn ends.
        if not forcing_submit:
            if ended is not None:
                if ended.reason == "awaiting_approval":  # kept, so the resumed turn ends with this text
                    state.last_cause, state.last_text = cause, text
                return ended
            return _last_text(spec, state, text, cause, ran=bool(run))
        if run:
            if ended is None:
                state.errors.extend(str(r.error) for r in state.steps[-1].result_list() if r.error)
                return Ending(cause=cause)
            return ended if ended.reason == "incomplete" else Ending(ended.outputs, "forced_submit", cause)
    # No `submit` came (or `required` failed too): the extractor reads the history.
    ending = await extract(spec, state, cause)
    if ending.outputs is not None:
        state.add(Step(fields=dict(ending.outputs), tool_calls=()))
    return ending
