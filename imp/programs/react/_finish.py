"""How a turn ends, one rule per finish mode: a text answer, `submit`, or only a `finish_on` tool."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from imp.history import Step
from imp.programs.react._last import forced_submit, last_text
from imp.programs.react._state import (
    SUBMIT,
    THOUGHT_FIELD,
    Ending,
    FinishMode,
    TerminationCause,
    Turn,
    deadline_passed,
    incomplete,
)

if TYPE_CHECKING:
    from imp.programs.react._program import ReAct

__all__ = ["SUBMIT", "FinishRule", "SubmitAnswer", "TextAnswer", "ToolFinish", "deadline_passed", "rule_for"]

NOT_SENT = "Your message above was not sent."


@dataclass(frozen=True, slots=True)
class FinishRule:
    """What ends a turn under one finish mode, and what the last request of an interrupted turn is."""

    mode: FinishMode
    has_submit: bool = False
    text_output: str | None = None
    """The output a step's plain text answers (a text answer only)."""
    thoughts_in_a_row: int = 2
    """A thought-only step interrupts the turn when it is this many in a row."""
    failed_requests_forgiven: int = 0
    """Failed step requests that get one more ordinary step instead of interrupting, per turn."""

    @property
    def text_field(self) -> str:
        """The step output that holds its text: the text answer, or `next_thought`."""
        return self.text_output or THOUGHT_FIELD

    def unsent_line(self, program: ReAct) -> str:
        """The line that follows a thought-only step when it is replayed."""
        return NOT_SENT

    async def end_interrupted(self, program: ReAct, turn: Turn, cause: TerminationCause) -> Ending:
        """The ending of an interrupted turn: one last request, unless the deadline has passed."""
        if deadline_passed():
            return incomplete("deadline_exceeded")
        if turn.note:
            turn.add(Step(note=turn.note, tool_calls=(), results=()))
        turn.step += 1
        return await self.last_request(program, turn, cause)

    async def last_request(self, program: ReAct, turn: Turn, cause: TerminationCause) -> Ending:
        """The last request and its answer, or an incomplete ending."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class TextAnswer(FinishRule):
    """One unconstrained text output under `finish="auto"`: a step's plain text is the answer."""

    thoughts_in_a_row: int = 1

    async def last_request(self, program: ReAct, turn: Turn, cause: TerminationCause) -> Ending:
        return await last_text(program, turn, cause)


@dataclass(frozen=True, slots=True)
class SubmitAnswer(FinishRule):
    """`submit` ends the turn; an interrupted turn gets the forced `submit`."""

    has_submit: bool = True

    def unsent_line(self, program: ReAct) -> str:
        outputs = ", ".join(f"`{n}`" for n in program.signature.outputs)
        return f"{NOT_SENT} To reply, call `{SUBMIT}` with {outputs}; to keep working, call a tool."

    async def last_request(self, program: ReAct, turn: Turn, cause: TerminationCause) -> Ending:
        return await forced_submit(program, turn, cause)


@dataclass(frozen=True, slots=True)
class ToolFinish(FinishRule):
    """`finish="tools"`: only a `finish_on` tool ends the turn; nothing is ever forced."""

    failed_requests_forgiven: int = 1

    def unsent_line(self, program: ReAct) -> str:
        if program.unsent_note:
            return program.unsent_note
        names = " or ".join(f"`{n}`" for n in program.finish_on)
        return f"{NOT_SENT} To end the turn, call {names}; to keep working, call a tool."

    async def end_interrupted(self, program: ReAct, turn: Turn, cause: TerminationCause) -> Ending:
        return incomplete("deadline_exceeded" if deadline_passed() else cause)


def rule_for(program: ReAct, mode: FinishMode) -> FinishRule:
    """The rule for a finish mode on this program's signature."""
    if mode == "tools":
        return ToolFinish(mode)
    text_output = program.text_output
    if mode == "auto" and text_output is not None:
        return TextAnswer(mode, text_output=text_output)
    # Under "auto" a signature with `submit` is interrupted by its first thought-only step.
    return SubmitAnswer(mode, thoughts_in_a_row=1 if mode == "auto" else 2)
