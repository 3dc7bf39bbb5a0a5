"""The messages of one step's request: the history replayed through the adapter, in its own syntax."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from imp.history import History
from imp.models.base import Message
from imp.programs.react._guidance import guidance
from imp.programs.react._replay import current_turn_start, kind_of, note_renderer, plain_text_renderer, replay_turns
from imp.programs.react._spec import TurnSpec
from imp.programs.react._state import THOUGHT_FIELD, TurnState
from imp.tools import Tool

__all__ = ["step_messages"]


def step_messages(
    spec: TurnSpec, state: TurnState, roster: Mapping[str, Tool], *, thought_as_user: bool
) -> list[Message]:
    """One request's messages; with `thought_as_user`, a newest thought-only step is shown as the user's."""
    base = spec.base
    steps = [*spec.demos, *base[state.cut :], *state.steps]
    current_start = len(spec.demos) + current_turn_start(base, len(base) - state.cut, spec.starts_turn, spec.task)
    moved: str | None = None
    if thought_as_user and steps and kind_of(steps[-1], spec.task) == "thought":
        moved = steps[-1].thought
        steps[-1] = replace(steps[-1], thought=None)
    turns = replay_turns(spec, steps, current_start if spec.replay == "actions" else 0)
    host = spec.format
    text_output = spec.rule.text_output
    opts = replace(
        host,
        demos=(),
        guidance=guidance(spec, roster),
        response_instruction=False,
        omit_empty_request=True,
        history_note_renderer=note_renderer(host.history_note_renderer),
        output_renderer=host.output_renderer or plain_text_renderer(text_output)
        if text_output is not None
        else host.output_renderer,
    )
    values = {**state.unrecorded, "history": History(turns)}
    messages = spec.adapter.format_with(spec.step_signature, values, opts)
    if moved is not None:
        # Mistral and Gemini refuse a request that ends on the model's own message: the thought
        # moves to the user side, under its field's marker in the adapter's syntax.
        section = spec.adapter.field_section(THOUGHT_FIELD, moved)
        last = messages[-1]
        if last["role"] == "user" and not last.get("tool_call_id"):
            messages[-1] = {**last, "content": f"{last['content']}\n\n{section}".strip()}
        else:
            messages.append({"role": "user", "content": section})
    return messages
