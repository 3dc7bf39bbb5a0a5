"""What the loop tells the model about itself: when to call tools, how a turn ends, which tools there are.

The loop writes these lines; the adapter only places them (after its agent line, where its
dialect puts instructions), so every dialect says the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from imp.adapters.base import Guidance
from imp.programs.react._spec import TurnSpec
from imp.programs.react._state import SUBMIT, THOUGHT_FIELD
from imp.programs.react._text import written_tool_listing
from imp.tools import Tool
from imp.values import type_name

__all__ = ["guidance", "guidance_lines"]


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
