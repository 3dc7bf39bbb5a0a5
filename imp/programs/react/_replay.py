"""How the loop's history is replayed as messages: step kinds, unsent lines, episodes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from imp.history import History, Step, ToolCall, ToolResult
from imp.programs.react._spec import TurnSpec
from imp.programs.react._state import SUBMIT
from imp.programs.react._text import written_observations, written_step_text
from imp.signature import Signature
from imp.values import render_value

__all__ = [
    "StepKind",
    "current_turn_start",
    "demo_steps",
    "episode_boundaries",
    "kind_of",
    "note_renderer",
    "plain_text_renderer",
    "replay_turns",
]

StepKind = Literal["note", "calls", "thought", "outputs", "empty"]


def kind_of(step: Step, task: Signature) -> StepKind:
    """What a history step is: a note, a step with calls, a thought-only step, an answer, or nothing."""
    if step.note:
        return "note"
    if step.tool_calls:
        return "calls"
    if any(name in step.fields for name in task.outputs):
        return "outputs"
    if step.thought:
        return "thought"
    return "empty"


def _inputs(step: Step, task: Signature) -> dict[str, Any]:
    return {k: step.fields[k] for k in task.inputs if k in step.fields}


def replay_turns(spec: TurnSpec, steps: Sequence[Step], actions_before: int) -> list[Step]:
    """The turns the adapter renders, each with the loop's own note for it (the unsent line, a note);
    steps before `actions_before` (earlier turns) replay without their thoughts."""
    task, adapter, written = spec.task, spec.adapter, spec.written
    text_output = spec.rule.text_output
    turns: list[Step] = []
    kinds = [kind_of(s, task) for s in steps]
    text_field = spec.rule.text_field
    for index, (step, kind) in enumerate(zip(steps, kinds, strict=True)):
        earlier = index < actions_before
        turn = Step(fields=_inputs(step, task), tool_calls=(), user_name=step.user_name)
        if kind == "calls" and written:
            thought = step.thought if not earlier else None
            turn = replace(
                turn,
                thought=written_step_text(adapter, spec.step_signature, text_field, thought, step.calls),
                loop_note=written_observations(step.calls, step.result_list()),
            )
        elif kind == "calls":
            turn = replace(
                turn,
                tool_calls=step.tool_calls,
                results=step.result_list(),
                thought=step.thought if not earlier else None,
                reasoning_data=step.reasoning_data if not earlier else None,
            )
        elif kind == "thought":
            if earlier:
                if turn.fields or turn.user_name:
                    turns.append(turn)
                continue
            answered_next = index + 1 < len(steps) and kinds[index + 1] == "outputs"
            turn = replace(turn, thought=step.thought, loop_note=None if answered_next else spec.unsent_line)
        elif kind == "note":
            turn = replace(turn, loop_note=step.note)
        elif kind == "outputs":
            outputs = {k: step.fields[k] for k in task.outputs if k in step.fields}
            if text_output is not None and text_output in outputs:
                turn = replace(turn, fields={**turn.fields, text_output: outputs[text_output]})
            else:
                turn = replace(turn, thought=adapter.reply_text(task, outputs))
        turns.append(turn)
    return turns


def note_renderer(
    host: Callable[[Signature, Mapping[str, Any]], str | None] | None,
) -> Callable[[Signature, Mapping[str, Any]], str | None]:
    """The loop's note for a turn, then the host's `history_note_renderer` (both when both speak)."""

    def render(signature: Signature, turn: Mapping[str, Any]) -> str | None:
        own = turn.loop_note if isinstance(turn, Step) else None
        shown = replace(turn, loop_note=None) if isinstance(turn, Step) and own else turn
        theirs = host(signature, shown) if host is not None else None
        parts = [p for p in (own, theirs) if p]
        return "\n\n".join(parts) if parts else None

    return render


def plain_text_renderer(name: str | None) -> Callable[[Signature, Mapping[str, Any], str], str]:
    """A text answer replays as the plain text the model wrote."""

    def render(signature: Signature, outputs: Mapping[str, Any], missing: str) -> str:
        value = outputs.get(name or "")
        return "" if value is None else render_value(value)

    return render


def episode_boundaries(base: History, output_names: Sequence[str]) -> list[int]:
    """Cut positions after each step that holds every output (and after the last step)."""
    cuts = [i + 1 for i, step in enumerate(base) if all(n in step.fields for n in output_names)]
    if len(base) and (not cuts or cuts[-1] != len(base)):
        cuts.append(len(base))
    return cuts


def current_turn_start(base: History, visible: int, starts_turn: bool, task: Signature) -> int:
    """Where the current turn starts among the visible steps (earlier turns replay as actions)."""
    if starts_turn:
        return visible
    offset = len(base) - visible
    for index in range(len(base) - 1, offset - 1, -1):
        if any(k in base[index].fields for k in task.inputs):
            return index - offset
    return 0


def demo_steps(demos: Sequence[Mapping[str, Any]], task: Signature, has_submit: bool) -> tuple[Step, ...]:
    """The program's demos as finished turns: the inputs, then the answer as this turn would give it.

    With `submit` a demo is a `submit` call and its result; with a text answer, the text; under
    `finish="tools"`, the outputs written as the adapter asks for replies. Demos are never cut.
    """
    steps: list[Step] = []
    for index, demo in enumerate(demos):
        recorded = demo.get("history")
        if isinstance(recorded, Mapping | History) and "history" not in task.inputs:
            # a bootstrapped demo: the run's own steps, its tool calls and results included
            steps.extend(recorded if isinstance(recorded, History) else History.load(recorded))
            continue
        inputs = {k: demo[k] for k in task.inputs if k in demo}
        outputs = {k: demo[k] for k in task.outputs if k in demo}
        if not inputs or not outputs:
            continue
        if has_submit:
            call = ToolCall(f"demo_{index}", SUBMIT, outputs)
            result = ToolResult(call.id, SUBMIT, outputs)
            steps.append(Step(fields=inputs, tool_calls=(call,), results=(result,)))
        else:
            steps.append(Step(fields={**inputs, **outputs}, tool_calls=()))
    return tuple(steps)
