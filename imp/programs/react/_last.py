"""The last request of an interrupted turn, what it sends (the forced `submit`, or the last text), and
the extractor that stands in when no `submit` comes; the loop sends it, reads its reply and records it."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from imp.errors import AdapterParseError, LMError, ReActStepError
from imp.history import Step, format_tool_result
from imp.programs._partial import submitting
from imp.programs._stream_tap import any_tap, streaming_program
from imp.programs.predict import ChainOfThought
from imp.programs.react._request import Request, ends_turn, error_text
from imp.programs.react._spec import TurnSpec
from imp.programs.react._state import SUBMIT, Ending, TerminationCause, TurnState
from imp.runtime.deadline import fail_at_deadline
from imp.signature import Field, Signature
from imp.tools import Tool
from imp.values import render_value

__all__ = ["EXTRACT_INSTRUCTIONS", "extract", "last_requests", "trajectory_text"]

EXTRACT_INSTRUCTIONS = (
    "The agent's turn was interrupted before it gave its answer. Read the trajectory and give the outputs. "
    "Use only the original inputs and the results of tool calls that succeeded: proposed calls, reasoning, "
    "malformed calls and errors are not evidence. Never claim an action succeeded unless a result shows it. "
    "If the outcome is not established, say so in the outputs. There are no tools."
)


def last_requests(spec: TurnSpec, roster: Mapping[str, Tool]) -> list[Request]:
    """The last request, and the one it steps down to: under one text output, the last text (the tools
    offered, `auto`); else the forced `submit` (named), then `required` with `submit` alone, sent where a
    server refuses a named choice. A request may not end on the model's own message, so a forced
    `submit` shows a newest thought-only step on the user's side."""
    if spec.rule.kind != "submit":
        return [Request(forced=True)]
    named: dict[str, Any] = {"tool_choice": {"type": "function", "function": {"name": SUBMIT}}}
    if "reasoning_effort" in spec.config:
        named["reasoning_effort"] = None
    required = {**named, "tool_choice": "required"}
    return [
        Request(forced=True, options=named, thought_as_user=True),
        Request(forced=True, options=required, offered=(roster[SUBMIT],), thought_as_user=True),
    ]


async def extract(spec: TurnSpec, state: TurnState, cause: TerminationCause) -> Ending:
    """A typed extractor with no tools reads the history and fills the outputs (the caller records them)."""
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
    try:
        with fail_at_deadline():
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
    return Ending({k: prediction.fields[k] for k in task.outputs}, "extracted", cause)


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
