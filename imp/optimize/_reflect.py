"""What the reflection LM reads (the instruction, each run's inputs, outputs, history and feedback) and
how its proposed instruction is read back."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence

from imp.optimize._scoring import Row
from imp.programs._parameters import Parameters
from imp.records import Message

__all__ = ["proposed_instruction", "reflection_messages"]

_FENCE = re.compile(r"```(?:[a-zA-Z]*\n)?(.*?)```", re.DOTALL)


def _text(value: object) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def _history_text(row: Row) -> str:
    """The run's finished history: every step's thought, tool calls and results."""
    history = row.prediction.metadata.history if row.prediction is not None else None
    if not history:
        return ""
    lines: list[str] = []
    for n, step in enumerate(history, 1):
        if step.thought:
            lines.append(f"  step {n} thought: {step.thought}")
        for call in step.tool_calls or ():
            lines.append(f"  step {n} calls {call.name}({_text(dict(call.arguments))})")
        for result in step.results or ():
            shown = result.result if result.ok else f"error: {result.error}"
            lines.append(f"  step {n} result of {result.name}: {_text(shown)}")
        if step.fields and not step.tool_calls:
            lines.append(f"  step {n} wrote: {_text(dict(step.fields))}")
    return "History of the run:\n" + "\n".join(lines) if lines else ""


def _row_text(index: int, row: Row) -> str:
    parts = [f"# Example {index}", "Inputs:"]
    parts += [f"  {k}: {_text(v)}" for k, v in row.example.inputs().items()]
    history = _history_text(row)
    if history:
        parts.append(history)
    if row.prediction is None:
        parts.append(f"The program failed: {type(row.error).__name__}: {row.error}")
    else:
        parts.append("Outputs:")
        parts += [f"  {k}: {_text(v)}" for k, v in row.prediction.fields.items()]
    feedback = row.feedback or f"The score was {row.score:g}."
    parts.append(f"Feedback: {feedback}")
    return "\n".join(parts)


def reflection_messages(params: Parameters, component: str, current: str, rows: Sequence[Row]) -> list[Message]:
    """The reflection request: the component's text, the runs with their feedback, the tools offered."""
    tool = component.startswith("tool:")
    sections = [
        f"An assistant was offered the tool `{component[5:]}` with this description:"
        if tool
        else "An assistant was given this instruction for a task:",
        f"```\n{current}\n```",
        "Here are some of its runs: the inputs, what it did, its outputs, and feedback on each.",
        "\n\n".join(_row_text(i, r) for i, r in enumerate(rows, 1)),
    ]
    if params.tools:
        tools = "\n".join(f"- {t.name}: {t.description} (arguments: {_text(dict(t.parameters))})" for t in params.tools)
        sections.append(f"The tools the assistant was offered:\n{tools}")
    if tool:
        sections.append(
            "Write a new description of that tool, so the assistant knows when and how to call it. "
            "Give the new description inside ``` blocks."
        )
        return [{"role": "user", "content": "\n\n".join(sections)}]
    sections.append(
        "Write a new instruction for the assistant. Read the inputs and the feedback closely: state the rules "
        "and facts about the task that the feedback reveals, including any the assistant missed, and keep "
        "what already works. Give the new instruction inside ``` blocks."
    )
    return [{"role": "user", "content": "\n\n".join(sections)}]


def proposed_instruction(text: str) -> str:
    """The instruction in the reflection LM's reply: inside its last ``` block, else the whole reply."""
    blocks = _FENCE.findall(text)
    chosen = blocks[-1] if blocks else text
    return str(chosen).strip()
