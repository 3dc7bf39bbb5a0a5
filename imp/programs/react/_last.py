"""The last request of an interrupted turn: the forced `submit`, the last text, the extractor."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from contextlib import nullcontext
from typing import Any

import anyio

from imp._redact import redact
from imp.errors import AdapterParseError, LMError, ReActStepError
from imp.history import Step, ToolCall, format_tool_result
from imp.programs._partial import submitting
from imp.programs._stream_tap import any_tap, streaming_program
from imp.programs.predict import ChainOfThought
from imp.programs.react._reading import Reading
from imp.programs.react._request import Failure, ask, ends_turn, error_text
from imp.programs.react._spec import TurnSpec
from imp.programs.react._state import SUBMIT, Ending, TerminationCause, TurnState
from imp.programs.react._tools import act
from imp.runtime.deadline import time_left
from imp.runtime.events import Reasoning
from imp.runtime.run import emit
from imp.signature import Field, Signature
from imp.tools import Tool
from imp.values import render_value

__all__ = ["EXTRACT_INSTRUCTIONS", "extract", "last_request", "trajectory_text"]

EXTRACT_INSTRUCTIONS = (
    "The agent's turn was interrupted before it gave its answer. Read the trajectory and give the outputs. "
    "Use only the original inputs and the results of tool calls that succeeded: proposed calls, reasoning, "
    "malformed calls and errors are not evidence. Never claim an action succeeded unless a result shows it. "
    "If the outcome is not established, say so in the outputs. There are no tools."
)


async def last_request(spec: TurnSpec, state: TurnState, cause: TerminationCause) -> Ending:
    """The last request: the last text under one text output, else the forced `submit` (`required`
    with `submit` alone where a named choice is refused; the extractor when no `submit` comes)."""
    forcing_submit = spec.rule.kind == "submit"
    roster = spec.roster()
    named: dict[str, Any] = {"tool_choice": {"type": "function", "function": {"name": SUBMIT}}}
    if "reasoning_effort" in spec.config:
        named["reasoning_effort"] = None
    tries: list[tuple[dict[str, Any] | None, list[Tool] | None]] = [(None, None)]
    if forcing_submit:
        tries = [(named, None), ({**named, "tool_choice": "required"}, [roster[SUBMIT]])]
    reading: Reading | Failure = Failure(cause)
    for number, (options, offered) in enumerate(tries):
        # A request may not end on the model's own message: a newest thought-only step moves to the user side.
        reading = await ask(
            spec, state, roster, forced=True, options=options, offered=offered, thought_as_user=forcing_submit
        )
        if number == 1 and isinstance(reading, Failure):  # `required` failed too
            if reading.cause in ("context_window_exceeded", "deadline_exceeded"):
                return Ending(cause=reading.cause)
            if reading.ends_turn and reading.error is not None and not reading.refuses_named_choice:
                raise reading.error
            return await extract(spec, state, cause)
        if not (isinstance(reading, Failure) and reading.refuses_named_choice):
            break
    if isinstance(reading, Failure):  # incomplete at the deadline or a full window; otherwise raised
        if reading.cause in ("context_window_exceeded", "deadline_exceeded"):
            return Ending(cause=reading.cause)
        error = reading.error
        if error is not None and ends_turn(error):
            raise error
        raise ReActStepError(f"the last request of the turn failed: {error}", history=None, cause=error) from error
    if forcing_submit:
        return await _submitted(spec, state, roster, reading, cause)
    return await _last_text(spec, state, roster, reading, cause)


async def _last_text(
    spec: TurnSpec, state: TurnState, roster: Mapping[str, Tool], reading: Reading, cause: TerminationCause
) -> Ending:
    """One text output: an ordinary step whose text is the answer; only `last_request_tools` run."""
    name = spec.rule.text_field
    state.finish_reason = reading.response.finish_reason
    if reading.error is not None:
        state.errors.append(error_text(reading.error))
        return Ending(cause=cause)
    run_now = [c for c in reading.calls if c.name in spec.last_request_tools]
    state.unexecuted = tuple(
        ToolCall(c.id, c.name, redact(dict(c.arguments)))
        for c in reading.calls
        if c.name not in spec.last_request_tools
    )
    text = reading.text
    if run_now:
        state.add_calls(run_now, None)
        ended = await act(spec, state, roster, decides=False)
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
        return Ending(cause=cause)
    return Ending({name: text}, "last_text", cause)


async def _submitted(
    spec: TurnSpec, state: TurnState, roster: Mapping[str, Tool], reading: Reading, cause: TerminationCause
) -> Ending:
    """The forced `submit`'s reply: its `submit` calls run and end the turn, or the extractor reads the history."""
    submits = [c for c in reading.calls if c.name == SUBMIT]
    if not submits:
        state.add(Step(thought=reading.text, tool_calls=(), results=() if reading.text else None))
        return await extract(spec, state, cause)
    if reading.text:
        emit(Reasoning(state.step, reading.text, True))
    state.add_calls(submits, reading.text)
    ending = await act(spec, state, roster)
    if ending is None:
        state.errors.extend(str(r.error) for r in state.steps[-1].result_list() if r.error)
        return Ending(cause=cause)
    if ending.reason == "incomplete":
        return ending
    return Ending(ending.outputs, "forced_submit", cause)


async def extract(spec: TurnSpec, state: TurnState, cause: TerminationCause) -> Ending:
    """A typed extractor with no tools reads the history and fills the outputs."""
    task = spec.task
    values: dict[str, Any] = {k: v for k, v in spec.inputs.items() if k in task.inputs}
    values["trajectory"] = trajectory_text([*spec.base[state.cut :], *state.steps], task)
    values["config"] = {k: v for k, v in spec.config.items() if k not in ("tools", "tool_choice")}
    extractor_sig = Signature(
        [*task.inputs.values(), Field("trajectory", "input", str)],
        list(task.outputs.values()),
        spec.extract_instructions,
        name="ReActExtract",
    )
    extractor = ChainOfThought.build(extractor_sig, lm=spec.lm, adapter=spec.adapter)
    left = time_left()
    try:
        with anyio.fail_after(left) if left is not None else nullcontext():
            tap = any_tap()
            if tap is None:
                prediction = await extractor.acall(values)
            else:
                with streaming_program(tap, extractor, sibling="extract"), submitting(None, task):
                    prediction = await extractor.acall(values)
    except TimeoutError:
        return Ending(cause="deadline_exceeded")
    except AdapterParseError as exc:
        state.errors.append(error_text(exc))
        return Ending(cause=cause)
    except LMError as exc:
        state.errors.append(error_text(exc))
        if exc.context_window_exceeded:
            return Ending(cause="context_window_exceeded")
        if ends_turn(exc):
            raise
        raise ReActStepError(f"the extractor's request failed: {exc}", history=None, cause=exc) from exc
    outputs = {k: prediction.fields[k] for k in task.outputs}
    state.add(Step(fields=outputs, tool_calls=()))
    return Ending(outputs, "extracted", cause)


def trajectory_text(steps: Sequence[Step], task: Signature) -> str:
    """A readable transcript of the turn for the extractor: inputs, thoughts, calls with results, notes."""
    lines: list[str] = []
    for number, step in enumerate(steps, start=1):
        lines.append(f"Step {number}:")
        for name in task.inputs:
            if step.fields.get(name) is not None:
                lines.append(f"  input {name}: {render_value(step.fields[name], task.inputs[name])}")
        if step.note:
            lines.append(f"  note: {step.note}")
        if step.thought:
            lines.append(f"  thought: {step.thought}")
        results = {r.id: r for r in step.result_list()}
        for call in step.calls:
            args = json.dumps(dict(call.arguments), ensure_ascii=False, default=str)
            result = results.get(call.id)
            outcome = format_tool_result(result) if result is not None else "(no result)"
            lines.append(f"  called {call.name}({args}) -> {outcome}")
        for name in task.outputs:
            if name in step.fields:
                lines.append(f"  output {name}: {render_value(step.fields[name], task.outputs[name])}")
    return "\n".join(lines)
