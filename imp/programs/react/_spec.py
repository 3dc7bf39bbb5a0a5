"""What one call of the loop reads and never changes: the spec, built once from the program and the call.

`TurnSpec` holds the task and step signatures, the finish rule, the tools, the adapter and LM,
the request options and the call's settings; `TurnState` (`_state.py`) holds what changes. Every
part of the loop below the program takes the two, as pydantic-ai's graph nodes take their run's
dependencies apart from its state.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from imp.adapters.base import Adapter, FormatOptions
from imp.history import History, Step
from imp.models.base import LM
from imp.programs.predict import Validator
from imp.programs.react._state import SUBMIT, THOUGHT_FIELD, FinishMode, FinishOn, HistoryReplay
from imp.signature import Signature
from imp.tools import Tool, ToolPolicy

__all__ = ["NOT_SENT", "FinishRule", "RuleKind", "TurnSpec", "episode_boundaries", "rule_for"]

NOT_SENT = "Your message above was not sent."

RuleKind = Literal["text_answer", "submit", "tools"]
"""How a turn ends: `text_answer` (a step's plain text is the answer), `submit` (the `submit` tool,
forced when the turn is interrupted), `tools` (only a `finish_on` tool; nothing is ever forced)."""


@dataclass(frozen=True, slots=True)
class FinishRule:
    """What ends a turn under one finish mode, on one signature."""

    mode: FinishMode
    kind: RuleKind
    text_output: str | None = None
    """The output a step's plain text answers (a text answer only)."""
    thoughts_in_a_row: int = 2
    """A thought-only step interrupts the turn when it is this many in a row."""
    failed_requests_forgiven: int = 0
    """Failed step requests that get one more ordinary step instead of interrupting, per turn."""

    @property
    def has_submit(self) -> bool:
        """Whether the turn offers the `submit` tool."""
        return self.kind == "submit"

    @property
    def text_field(self) -> str:
        """The step output that holds its text: the text answer, or `next_thought`."""
        return self.text_output or THOUGHT_FIELD


def rule_for(signature: Signature, mode: FinishMode) -> FinishRule:
    """The rule for a finish mode on a signature."""
    if mode == "tools":
        return FinishRule(mode, "tools", failed_requests_forgiven=1)
    outputs = list(signature.outputs.values())
    if mode == "auto" and len(outputs) == 1 and outputs[0].is_plain_text:
        return FinishRule(mode, "text_answer", text_output=outputs[0].name, thoughts_in_a_row=1)
    # Under "auto" a signature with `submit` is interrupted by its first thought-only step.
    return FinishRule(mode, "submit", thoughts_in_a_row=1 if mode == "auto" else 2)


@dataclass(frozen=True, slots=True)
class TurnSpec:
    """One call of the loop, as fixed for its whole turn."""

    task: Signature
    """The program's signature: the task's inputs and outputs."""
    step_signature: Signature
    """What one step reads and writes (the task inputs and `history`; a thought or the text answer)."""
    rule: FinishRule
    adapter: Adapter
    lm: LM
    written: bool
    """The LM has no native tool calling: a step writes its calls in a `tool_calls` output."""
    format: FormatOptions
    """The program's `adapter_opts`, read once."""
    config: Mapping[str, Any]
    """Request options (the program's, then the call's)."""
    max_iters: int
    tools: Mapping[str, Tool]
    """The tools a step may call, by name (`submit` included when the turn has it)."""
    tool_names: tuple[str, ...]
    """The names the instructions list (the program's tools, then `submit`)."""
    live: Sequence[Tool] | None
    """A tool list that refreshes itself (an MCP import), read again at every step."""
    overrides: Mapping[str, Tool]
    """The call's own tools that replace a live list's tool of the same name."""
    tool_policy: ToolPolicy
    finish_on: Mapping[str, FinishOn]
    note: str | None
    """`last_request_note`: recorded as a step before the last request of an interrupted turn."""
    last_request_tools: tuple[str, ...]
    """Tools the last request of a text answer may still run."""
    unsent_line: str
    """The line that follows a thought-only step when it is replayed."""
    replay: HistoryReplay
    extract_instructions: str
    """What the extractor of an interrupted turn is told."""
    demos: tuple[Step, ...]
    """The program's demos as finished turns, shown before the history."""
    inputs: Mapping[str, Any]
    """The call's inputs, checked against the signature."""
    base: History
    """The history given to the call."""
    episodes: tuple[int, ...]
    """Where the given history may be cut when the context window is full: after each answered step."""
    starts_turn: bool
    """The call asks something new (its inputs, or a note), so every given step is an earlier turn."""
    validate: Validator | None = None
    """The program's validator of an answer (`submit`'s outputs, a text answer)."""
    max_retries: int = 0
    """Answers the validator may refuse in one turn before it raises `imp.ValidationFailed`."""

    def roster(self) -> Mapping[str, Tool]:
        """The tools offered now: a live list as it is at this step (a tool it no longer holds leaves the
        roster, so a call to it is refused as unknown), the call's own tools in place of theirs, then `submit`."""
        if self.live is None:
            return self.tools
        roster = {tool.name: self.overrides.get(tool.name, tool) for tool in self.live}
        if SUBMIT in self.tools:
            roster[SUBMIT] = self.tools[SUBMIT]
        return roster


def episode_boundaries(base: History, output_names: Sequence[str]) -> list[int]:
    """Cut positions after each step that holds every output (and after the last step)."""
    cuts = [i + 1 for i, step in enumerate(base) if all(n in step.fields for n in output_names)]
    if len(base) and (not cuts or cuts[-1] != len(base)):
        cuts.append(len(base))
    return cuts
