"""What the model reads: the loop's guidance, the history replayed through the adapter, one step's messages.

Everything a request shows is rebuilt here from the spec and the state: the demos as finished
turns, the given history and this call's steps as the adapter replays them (native tool turns, or
calls written as text for an LM without native tools), the unsent line after a thought, and the
loop's own lines in the instructions (the adapter only places them).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, Literal

from imp.adapters.base import Adapter, Guidance
from imp.history import History, Step, ToolCall, ToolResult
from imp.models.base import Message
from imp.programs.react._spec import TurnSpec
from imp.programs.react._state import CALLS_FIELD, SUBMIT, THOUGHT_FIELD, TurnState
from imp.records import with_text
from imp.signature import Signature
from imp.tools import Tool
from imp.values import render_value, type_name

__all__ = [
    "StepKind",
    "current_turn_start",
    "demo_steps",
    "guidance",
    "guidance_lines",
    "kind_of",
    "note_renderer",
    "plain_text_renderer",
    "replay_turns",
    "result_text",
    "step_messages",
    "written_observations",
    "written_step_text",
    "written_tool_listing",
]


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
            messages[-1] = {**last, "content": with_text(last.get("content"), section)}
        else:
            messages.append({"role": "user", "content": section})
    return messages


def guidance(spec: TurnSpec, roster: Mapping[str, Tool]) -> Guidance:
    """The loop's `guidance` format option for one step's request."""
    rule = spec.rule
    task = spec.task
    text_answer = rule.text_output is not None
    answer = task.outputs.get(rule.text_output or "")
    lines = guidance_lines(
        written=spec.written,
        submit_tool=SUBMIT if rule.has_submit else None,
        finish_tools=list(spec.finish_on) if rule.mode == "tools" else [],
        output_names=list(task.outputs),
        output_lines=[
            f"- `{f.name}` ({type_name(f.annotation)}){': ' + f.desc if f.desc else ''}" for f in task.outputs.values()
        ],
        text_field=rule.text_field,
        answer_desc=answer.desc if text_answer and answer is not None else "",
        tool_names=list(spec.tool_names),
        tool_listing=written_tool_listing(list(roster.values())) if spec.written else "",
    )
    return Guidance(tuple(lines), text_answer=text_answer and not spec.written)


def guidance_lines(
    *,
    written: bool = False,
    submit_tool: str | None = None,
    finish_tools: Sequence[str] = (),
    output_names: Sequence[str] = (),
    output_lines: Sequence[str] = (),
    text_field: str = THOUGHT_FIELD,
    answer_desc: str = "",
    tool_names: Sequence[str] = (),
    tool_listing: str = "",
) -> list[str]:
    """The loop's lines: when to call a tool, how the turn ends (`submit_tool` with `output_names`, one of
    `finish_tools`, or plain text, in `text_field` for written calls), then the tools (`tool_listing`, the
    tools as text for an LM without native tools, or `tool_names`)."""
    if written:
        lines = ["Call tools when more information is needed, by writing the calls in `tool_calls`."]
    else:
        lines = ["Call tools when more information is needed."]
    if submit_tool:
        outputs = ", ".join(f"`{n}`" for n in output_names)
        lines.append(f"When the final answer is ready, call `{submit_tool}` with {outputs}.")
        if output_lines:
            lines.append(f"The outputs `{submit_tool}` takes:")
            lines.extend(output_lines)
    elif finish_tools:
        names = " or ".join(f"`{n}`" for n in finish_tools)
        lines.append(f"To end the turn, call {names}.")
    elif written:
        lines.append(f"When the final answer is ready, write it in `{text_field}`, and leave `tool_calls` empty.")
    else:
        lines.append("When the final answer is ready, write it as plain text without calling a tool.")
        if answer_desc:
            lines.append(answer_desc)
    if tool_listing:
        lines.append("The available tools are:")
        lines.extend(tool_listing.splitlines())
    elif tool_names:
        lines.append("The available tools are: " + ", ".join(f"`{t}`" for t in tool_names) + ".")
    return lines


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
    host: Callable[[Signature, Mapping[str, object]], str | None] | None,
) -> Callable[[Signature, Mapping[str, Any]], str | None]:
    """The loop's note for a turn, then the host's `history_note_renderer` (both when both speak)."""

    def render(signature: Signature, turn: Mapping[str, object]) -> str | None:
        own = turn.loop_note if isinstance(turn, Step) else None
        shown = replace(turn, loop_note=None) if isinstance(turn, Step) and own else turn
        theirs = host(signature, shown) if host is not None else None
        parts = [p for p in (own, theirs) if p]
        return "\n\n".join(parts) if parts else None

    return render


def plain_text_renderer(name: str | None) -> Callable[[Signature, Mapping[str, Any], str], str]:
    """A text answer replays as the plain text the model wrote."""

    def render(signature: Signature, outputs: Mapping[str, object], missing: str) -> str:
        value = outputs.get(name or "")
        return "" if value is None else render_value(value)

    return render


def current_turn_start(base: History, visible: int, starts_turn: bool, task: Signature) -> int:
    """Where the current turn starts among the visible steps (earlier turns replay as actions)."""
    if starts_turn:
        return visible
    offset = len(base) - visible
    for index in range(len(base) - 1, offset - 1, -1):
        if any(k in base[index].fields for k in task.inputs):
            return index - offset
    return 0


def demo_steps(demos: Sequence[Mapping[str, object]], task: Signature, has_submit: bool) -> tuple[Step, ...]:
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


def written_tool_listing(tools: Sequence[Tool]) -> str:
    """The tools as text, in DSPy's wording, for an LM without native tool calling."""
    lines = []
    for index, tool in enumerate(tools, start=1):
        schema: dict[str, Any] = dict(tool.parameters) if tool.parameters else {"type": "object", "properties": {}}
        args: dict[str, Any] = dict(schema.get("properties") or {})
        extra = {k: schema[k] for k in ("required", "$defs") if k in schema}
        described = json.dumps({**args, **extra}, ensure_ascii=False, default=str)
        lines.append(
            f"({index}) {tool.name}, whose description is <desc>{tool.description}</desc>. It takes arguments {described}."
        )
    return "\n".join(lines)


def written_step_text(
    adapter: Adapter, step_signature: Signature, text_field: str, thought: str | None, calls: Sequence[ToolCall]
) -> str:
    """A written-mode step as the model wrote it, in the adapter's reply layout: its text field, then its calls."""
    listed = [{"name": c.name, "arguments": dict(c.arguments)} for c in calls]
    return adapter.reply_text(step_signature, {text_field: thought or "", CALLS_FIELD: listed})


def written_observations(calls: Sequence[ToolCall], results: Sequence[ToolResult]) -> str:
    """The results of a written-mode step, as the user message that follows it."""
    by_id = {r.id: r for r in results}
    lines = ["Results of your tool calls:"]
    for call in calls:
        result = by_id.get(call.id)
        shown = result_text(result) if result is not None else "(no result)"
        lines.append(f"- `{call.name}` ({call.id}): {shown}")
    return "\n".join(lines)


def result_text(result: ToolResult) -> str:
    if not result.ok:
        return f"Error: {result.error}"
    return render_value(result.result)
