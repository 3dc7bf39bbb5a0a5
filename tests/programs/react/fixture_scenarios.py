"""Turns whose requests main recorded in fixtures/main_requests.json (Chat adapter)."""

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from react_fixtures import escalation, on_call, page

import imp

TICKET = "We were charged twice this month."
HISTORY = Path(__file__).parent / "fixtures" / "main_history.json"
ON_CALL = {"tool_calls": [{"name": "on_call", "arguments": {"team": "atlas"}}]}
SUBMIT = {"tool_calls": [{"name": "submit", "arguments": {"team": "atlas", "contact": "Maya"}}]}
Scenario = Callable[[], tuple[imp.ReAct, imp.ScriptedLM, dict[str, Any]]]


def _lm(steps: list[Any], **options: Any) -> imp.ScriptedLM:
    return imp.ScriptedLM(steps, exhausted={"tool_calls": []}, **options)


def _saved_history() -> imp.History:
    return imp.History.load(json.loads(HISTORY.read_text()))


def submit_after_lookup() -> tuple[imp.ReAct, imp.ScriptedLM, dict[str, Any]]:
    lm = _lm([{"next_thought": "Money.", **ON_CALL}, SUBMIT])
    return imp.react(escalation, [on_call], lm=lm), lm, {"ticket": TICKET}


def forced_after_thoughts() -> tuple[imp.ReAct, imp.ScriptedLM, dict[str, Any]]:
    lm = _lm([{"next_thought": "a", "tool_calls": []}, {"next_thought": "b", "tool_calls": []}, SUBMIT])
    return imp.react(escalation, [on_call], lm=lm, finish="submit"), lm, {"ticket": TICKET}


def text_turn_on_saved_history() -> tuple[imp.ReAct, imp.ScriptedLM, dict[str, Any]]:
    lm = _lm([ON_CALL, {"reply": "Maya.", "tool_calls": []}])
    program = imp.react("ticket -> reply", [on_call, page], lm=lm, history_replay="actions")
    return program, lm, {"ticket": "Again?", "history": _saved_history()}


def submit_turn_on_saved_history() -> tuple[imp.ReAct, imp.ScriptedLM, dict[str, Any]]:
    lm = _lm([{"next_thought": "hm", "tool_calls": []}, SUBMIT])
    program = imp.react(escalation, [on_call], lm=lm, finish="submit", max_iters=1, last_request_note="Now.")
    return program, lm, {"ticket": "Again?", "history": _saved_history()}


def summary_of_saved_history() -> tuple[imp.ReAct, imp.ScriptedLM, dict[str, Any]]:
    lm = _lm([{"reply": "Summary.", "tool_calls": []}])
    program = imp.react("ticket -> reply", [on_call], lm=lm)
    return program, lm, {"history": _saved_history(), "max_iters": 0, "last_request_note": "Summarise."}


def written_tools() -> tuple[imp.ReAct, imp.ScriptedLM, dict[str, Any]]:
    lm = _lm(
        [
            '[[ ## next_thought ## ]]\nLook.\n\n[[ ## tool_calls ## ]]\n[{"name": "on_call", "arguments": {"team": "atlas"}}]',
            "[[ ## next_thought ## ]]\nhm\n\n[[ ## tool_calls ## ]]\n[]",
            SUBMIT,
        ],
        tool_calling=False,
    )
    program = imp.react(escalation, [on_call], lm=lm, max_iters=2)
    return program, lm, {"ticket": TICKET}


def written_text_answer() -> tuple[imp.ReAct, imp.ScriptedLM, dict[str, Any]]:
    lm = _lm(
        [
            '[[ ## reply ## ]]\n\n[[ ## tool_calls ## ]]\n[{"name": "on_call", "arguments": {"team": "atlas"}}]',
            "[[ ## reply ## ]]\nMaya.\n\n[[ ## tool_calls ## ]]\n[]",
        ],
        tool_calling=False,
    )
    return imp.react("ticket -> reply", [on_call], lm=lm), lm, {"ticket": TICKET}


SCENARIOS: dict[str, Scenario] = {
    "submit_after_lookup": submit_after_lookup,
    "forced_after_thoughts": forced_after_thoughts,
    "text_turn_on_saved_history": text_turn_on_saved_history,
    "submit_turn_on_saved_history": submit_turn_on_saved_history,
    "summary_of_saved_history": summary_of_saved_history,
    "written_tools": written_tools,
    "written_text_answer": written_text_answer,
}
