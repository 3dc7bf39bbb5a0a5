"""The last request of an interrupted turn: the forced `submit`, the last text, the extractor."""

from __future__ import annotations

from contextlib import nullcontext
from typing import Any, NoReturn

import anyio

from imp._redact import redact
from imp.errors import AdapterParseError, LMError, ReActStepError
from imp.history import Step, ToolCall
from imp.programs.predict import ChainOfThought
from imp.programs.react._replay import kind_of
from imp.programs.react._request import Failure, ends_turn, error_text, read_step, refuses_named_choice, request_step
from imp.programs.react._spec import TurnSpec
from imp.programs.react._state import SUBMIT, Ending, TerminationCause, TurnState, incomplete
from imp.programs.react._text import trajectory_text
from imp.programs.react._tools import act
from imp.runtime.deadline import time_left
from imp.signature import Field, Signature

__all__ = ["EXTRACT_INSTRUCTIONS", "extract", "forced_submit", "last_text", "raise_with_history"]

EXTRACT_INSTRUCTIONS = (
    "The agent's turn was interrupted before it gave its answer. Read the trajectory and give the outputs. "
    "Use only the original inputs and the results of tool calls that succeeded: proposed calls, reasoning, "
    "malformed calls and errors are not evidence. Never claim an action succeeded unless a result shows it. "
    "If the outcome is not established, say so in the outputs. There are no tools."
)


def raise_with_history(error: LMError, spec: TurnSpec, state: TurnState) -> NoReturn:
    """End the turn with a provider error no further request can cure, carrying the history so far."""
    error.history = state.recorded(spec.base)
    raise error


async def last_text(spec: TurnSpec, state: TurnState, cause: TerminationCause) -> Ending:
    """One text output: an ordinary step whose text is the answer; only `last_request_tools` run."""
    name = spec.rule.text_field
    roster = spec.roster()
    response = await request_step(spec, state, roster, forced=True)
    if isinstance(response, Failure):
        return _failed(spec, state, response)
    state.finish_reason = response.finish_reason
    reading = read_step(spec, state, response)
    if reading.error is not None:
        state.errors.append(error_text(reading.error))
        return incomplete(cause)
    run_now = [c for c in reading.calls if c.name in spec.last_request_tools]
    state.unexecuted = tuple(
        ToolCall(c.id, c.name, redact(dict(c.arguments)))
        for c in reading.calls
        if c.name not in spec.last_request_tools
    )
    text = reading.text
    if run_now:
        ended = await act(spec, state, roster, run_now, None, forced=True, decides=False)
        if ended is not None:
            return ended
        if text is not None:
            last = state.steps[-1]
            state.steps[-1] = Step(
                fields={**last.fields, name: text},
                tool_calls=last.tool_calls,
                results=last.results,
                user_name=last.user_name,
            )
    elif text is not None:
        state.add(Step(fields={name: text}, tool_calls=()))
    if text is None:  # only tool calls, or nothing: the turn has no answer
        return incomplete(cause)
    return Ending({name: text}, "last_text", cause)


async def forced_submit(spec: TurnSpec, state: TurnState, cause: TerminationCause) -> Ending:
    """The forced `submit`; `required` with `submit` alone where a named choice is refused; then the extractor."""
    newest = state.newest(spec.base)
    thought_last = newest is not None and kind_of(newest, spec.task) == "thought"
    options: dict[str, Any] = {"tool_choice": {"type": "function", "function": {"name": SUBMIT}}}
    if "reasoning_effort" in spec.config:
        options["reasoning_effort"] = None
    roster = spec.roster()
    response = await request_step(spec, state, roster, forced=True, options=options, thought_as_user=thought_last)
    if isinstance(response, Failure):
        if not (response.error is not None and refuses_named_choice(response.error)):
            return _failed(spec, state, response)
        response = await request_step(
            spec,
            state,
            roster,
            forced=True,
            options={**options, "tool_choice": "required"},
            offered=[roster[SUBMIT]],
            thought_as_user=thought_last,
        )
        if isinstance(response, Failure):
            if response.cause in ("context_window_exceeded", "deadline_exceeded"):
                return incomplete(response.cause)
            if response.ends_turn and response.error is not None and not refuses_named_choice(response.error):
                raise_with_history(response.error, spec, state)
            return await extract(spec, state, cause)
    reading = read_step(spec, state, response)
    submits = [c for c in reading.calls if c.name == SUBMIT]
    if not submits:
        state.add(Step(thought=reading.text, tool_calls=(), results=() if reading.text else None))
        return await extract(spec, state, cause)
    ending = await act(spec, state, roster, submits, reading.text, forced=True)
    if ending is None:
        state.errors.extend(str(r.error) for r in state.steps[-1].result_list() if r.error)
        return incomplete(cause)
    if ending.reason == "incomplete":
        return ending
    return Ending(ending.outputs, "forced_submit", cause)


async def extract(spec: TurnSpec, state: TurnState, cause: TerminationCause) -> Ending:
    """A typed extractor with no tools reads the history and fills the outputs."""
    task = spec.task
    extractor_sig = Signature(
        [*task.inputs.values(), Field("trajectory", "input", str)],
        list(task.outputs.values()),
        spec.extract_instructions,
        name="ReActExtract",
    )
    extractor = ChainOfThought.build(extractor_sig, lm=spec.lm, adapter=spec.adapter)
    values: dict[str, Any] = {k: v for k, v in spec.inputs.items() if k in task.inputs}
    values["trajectory"] = trajectory_text(list(state.history(spec.base)[state.cut :]), task)
    values["config"] = {k: v for k, v in spec.config.items() if k not in ("tools", "tool_choice")}
    left = time_left()
    try:
        with anyio.fail_after(left) if left is not None else nullcontext():
            prediction = await extractor.acall(values)
    except TimeoutError:
        return incomplete("deadline_exceeded")
    except AdapterParseError as exc:
        state.errors.append(error_text(exc))
        return incomplete(cause)
    except LMError as exc:
        state.errors.append(error_text(exc))
        if exc.context_window_exceeded:
            return incomplete("context_window_exceeded")
        if ends_turn(exc):
            raise_with_history(exc, spec, state)
        raise ReActStepError(
            f"the extractor's request failed: {exc}", history=state.recorded(spec.base), cause=exc
        ) from exc
    outputs = {k: prediction.fields[k] for k in task.outputs}
    state.add(Step(fields=outputs, tool_calls=()))
    return Ending(outputs, "extracted", cause)


def _failed(spec: TurnSpec, state: TurnState, failure: Failure) -> Ending:
    """A failed last request: incomplete at the deadline or a full window; otherwise it is raised."""
    if failure.cause in ("context_window_exceeded", "deadline_exceeded"):
        return incomplete(failure.cause)
    error = failure.error
    if error is not None and ends_turn(error):
        raise_with_history(error, spec, state)
    raise ReActStepError(
        f"the last request of the turn failed: {error}", history=state.recorded(spec.base), cause=error
    ) from error
