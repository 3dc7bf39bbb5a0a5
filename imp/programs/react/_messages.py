"""The messages of one step's request: the history replayed through the adapter, in its own syntax."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import TYPE_CHECKING

from imp.adapters.base import FormatOptions
from imp.history import History, Step, ToolCall, ToolResult
from imp.models.base import Message
from imp.programs.react._guidance import guidance
from imp.programs.react._replay import current_turn_start, kind_of, note_renderer, plain_text_renderer, replay_turns
from imp.programs.react._state import SUBMIT, THOUGHT_FIELD, Turn
from imp.records import with_text

if TYPE_CHECKING:
    from imp.programs.react._program import ReAct

__all__ = ["demo_steps", "step_messages"]


def demo_steps(program: ReAct, turn: Turn) -> list[Step]:
    """The program's demos as finished turns: the inputs, then the answer as this turn would give it.

    With `submit` a demo is a `submit` call and its result; with a text answer, the text; under
    `finish="tools"`, the outputs written as the adapter asks for replies. Demos are never cut.
    """
    task = program.signature
    steps: list[Step] = []
    for index, demo in enumerate(program.demos):
        recorded = demo.get("history")
        if isinstance(recorded, Mapping | History) and "history" not in task.inputs:
            # a bootstrapped demo: the run's own steps, its tool calls and results included
            steps.extend(recorded if isinstance(recorded, History) else History.load(recorded))
            continue
        inputs = {k: demo[k] for k in task.inputs if k in demo}
        outputs = {k: demo[k] for k in task.outputs if k in demo}
        if not inputs or not outputs:
            continue
        if turn.rule.has_submit:
            call = ToolCall(f"demo_{index}", SUBMIT, outputs)
            result = ToolResult(call.id, SUBMIT, outputs)
            steps.append(Step(fields=inputs, tool_calls=(call,), results=(result,)))
        else:
            steps.append(Step(fields={**inputs, **outputs}, tool_calls=()))
    return steps


def step_messages(program: ReAct, turn: Turn, *, thought_as_user: bool) -> list[Message]:
    """One request's messages; with `thought_as_user`, a newest thought-only step is shown as the user's."""
    step_sig = program.step_signature(turn.finish, turn.written)
    demos = demo_steps(program, turn)
    steps = [*demos, *turn.base[turn.cut :], *turn.entries]
    current_start = len(demos) + current_turn_start(
        turn.base, len(turn.base) - turn.cut, turn.starts_turn, program.signature
    )
    moved: str | None = None
    if thought_as_user and steps and kind_of(steps[-1], program.signature) == "thought":
        moved = steps[-1].thought
        steps[-1] = replace(steps[-1], thought=None)
    text_answer = turn.rule.text_output is not None
    turns = replay_turns(
        steps,
        task=program.signature,
        step_signature=step_sig,
        adapter=turn.adapter,
        text_output=turn.rule.text_output if text_answer else None,
        actions_before=current_start if program.history_replay == "actions" else 0,
        unsent_line=turn.rule.unsent_line(program),
        written=turn.written,
    )
    host = FormatOptions.read(program.adapter_opts)
    opts = replace(
        host,
        demos=(),
        guidance=guidance(program, turn.rule, turn.written, list(turn.roster.values())),
        response_instruction=False,
        omit_empty_request=True,
        history_note_renderer=note_renderer(host.history_note_renderer),
        output_renderer=host.output_renderer or plain_text_renderer(turn.rule.text_output)
        if text_answer
        else host.output_renderer,
    )
    values = {**turn.pending, "history": History(turns)}
    messages = turn.adapter.format_with(step_sig, values, opts)
    if moved is not None:
        # Mistral and Gemini refuse a request that ends on the model's own message: the thought
        # moves to the user side, under its field's marker in the adapter's syntax.
        section = turn.adapter.field_section(THOUGHT_FIELD, moved)
        last = messages[-1]
        if last["role"] == "user" and not last.get("tool_call_id"):
            messages[-1] = {**last, "content": with_text(last.get("content"), section)}
        else:
            messages.append({"role": "user", "content": section})
    return messages
