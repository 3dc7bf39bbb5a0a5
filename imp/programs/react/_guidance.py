"""What the loop tells the adapter about itself: the tools, how a turn ends, the answer's description."""

from __future__ import annotations

from typing import TYPE_CHECKING

from imp.adapters.base import Guidance
from imp.programs.react._state import SUBMIT
from imp.programs.react._text import written_tool_listing
from imp.values import type_name

if TYPE_CHECKING:
    from imp.programs.react._finish import FinishRule
    from imp.programs.react._program import ReAct
    from imp.tools import Tool

__all__ = ["guidance"]


def guidance(program: ReAct, rule: FinishRule, written: bool, roster: list[Tool] | None = None) -> Guidance:
    """The loop's `guidance` format option: the adapter writes it as the instructions' closing lines."""
    tool_names = [t.name for t in program.tools]
    if rule.has_submit:
        tool_names.append(SUBMIT)
    text_answer = rule.text_output is not None
    answer = program.signature.outputs.get(rule.text_output or "")
    return Guidance(
        written_tools=written,
        text_field=rule.text_field,
        text_answer=text_answer and not written,
        submit_tool=SUBMIT if rule.has_submit else None,
        finish_tools=list(program.finish_on) if rule.mode == "tools" else [],
        tool_names=tool_names,
        input_names=list(program.signature.inputs),
        output_names=list(program.signature.outputs),
        answer_desc=answer.desc if text_answer and answer is not None else "",
        output_lines=[
            f"- `{f.name}` ({type_name(f.annotation)}){': ' + f.desc if f.desc else ''}"
            for f in program.signature.outputs.values()
        ],
        tool_listing=written_tool_listing(roster or []) if written else "",
    )
