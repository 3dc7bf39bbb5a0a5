"""The ReAct loop: native tool calls, `submit` or a text answer, one last request, and why the turn ended.

Rooms: `_program` (the program and its options), `_loop` (the loop itself), `_finish` (how a turn
ends, one rule per finish mode), `_last` (the last request of an interrupted turn), `_tools`
(running a step's calls and deciding whether they end the turn), `_request` (one step's request
and reading its reply), `_messages` and `_replay` (the history as the adapter renders it),
`_text` (tool calls written as text), `_guidance` (what the loop tells the adapter about itself),
`_state` (the turn's records).
"""

from imp.programs.react._program import ReAct, react
from imp.programs.react._state import FinishMode, HistoryReplay, TerminationCause, TerminationReason
from imp.programs.react._tools import CONTINUE, Finish

__all__ = [
    "CONTINUE",
    "Finish",
    "FinishMode",
    "HistoryReplay",
    "ReAct",
    "TerminationCause",
    "TerminationReason",
    "react",
]
