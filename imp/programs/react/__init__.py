"""The ReAct loop: native tool calls, `submit` or a text answer, one last request, and why the turn ended.

The rooms, bottom to top: `_state` (the turn's names and modes, and `TurnState`, what a turn
changes as it runs), `_spec` (`TurnSpec`, what a call fixes: signatures, finish rule, tools,
adapter, LM, settings), `_messages` (what the model reads: the loop's guidance, the history as the
adapter replays it, one step's messages), `_request` (sending a step and reading the reply),
`_tools` (running a step's calls), `_last` (the last request of an interrupted turn), `_loop` (the
loop itself), `_program` (the `ReAct` value, which builds a call's spec and state). Each takes the
spec and the state and imports only the rooms below it.
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
