"""The ReAct loop: native tool calls, `submit` or a text answer, one last request, and why the turn ended.

The rooms, bottom to top: `_state` (the turn's names and modes, and `TurnState`, what a turn
changes as it runs), `_text` (tool calls written as text), `_spec` (`TurnSpec`, what a call fixes:
signatures, finish rule, tools, adapter, LM, settings), `_guidance` (the loop's lines in the
instructions), `_replay` (the history as the adapter renders it), `_messages` (one step's
request), `_request` (sending it and reading the reply), `_tools` (running a step's calls),
`_last` (the last request of an interrupted turn), `_loop` (the loop itself), `_program` (the
`ReAct` value, which builds a call's spec and state). Each takes the spec and the state and
imports only the rooms below it.
"""

from imp.programs.react._program import ReAct, react
from imp.programs.react._spec import TurnSpec
from imp.programs.react._state import (
    CONTINUE,
    Finish,
    FinishMode,
    HistoryReplay,
    TerminationCause,
    TerminationReason,
    TurnState,
)

__all__ = [
    "CONTINUE",
    "Finish",
    "FinishMode",
    "HistoryReplay",
    "ReAct",
    "TerminationCause",
    "TerminationReason",
    "TurnSpec",
    "TurnState",
    "react",
]
