"""How the ReAct loop's history is replayed as messages: entry kinds, unsent lines, episodes."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from imp.history import History
from imp.programs._react_text import written_observations, written_step_text
from imp.signature import Signature
from imp.values import render_value

__all__ = [
    "EntryKind",
    "current_turn_start",
    "episode_boundaries",
    "kind_of",
    "note_renderer",
    "plain_text_renderer",
    "replay_turns",
]

EntryKind = Literal["note", "calls", "thought", "outputs", "empty"]
NOTE_KEY = "_imp_note"


def kind_of(entry: Mapping[str, Any], task: Signature) -> EntryKind:
    """What a history entry is: a note, a step with calls, a thought-only step, an answer, or nothing."""
    if entry.get("last_request_note"):
        return "note"
    if entry.get("tool_calls"):
        return "calls"
    if any(name in entry for name in task.outputs):
        return "outputs"
    if entry.get("next_thought"):
        return "thought"
    return "empty"


def _inputs(entry: Mapping[str, Any], task: Signature) -> dict[str, Any]:
    keep = {k: entry[k] for k in task.inputs if k in entry}
    if "user_name" in entry:
        keep["user_name"] = entry["user_name"]
    return keep


def replay_turns(
    entries: Sequence[Mapping[str, Any]],
    *,
    task: Signature,
    text_output: str | None,
    actions_before: int,
    unsent_line: str,
    written: bool = False,
    text_field: str = "next_thought",
) -> list[dict[str, Any]]:
    """The turns the adapter renders, each with the loop's own note for it (the unsent line, a note)."""
    turns: list[dict[str, Any]] = []
    kinds = [kind_of(e, task) for e in entries]
    for index, (entry, kind) in enumerate(zip(entries, kinds, strict=True)):
        earlier = index < actions_before
        turn = _inputs(entry, task)
        turn["tool_calls"] = ()
        if kind == "calls" and written:
            thought = entry.get("next_thought") if not earlier else None
            turn["next_thought"] = written_step_text(text_field, thought, entry["tool_calls"])
            turn[NOTE_KEY] = written_observations(entry["tool_calls"], entry.get("tool_call_results") or ())
        elif kind == "calls":
            turn["tool_calls"] = entry["tool_calls"]
            turn["tool_call_results"] = entry.get("tool_call_results") or ()
            if entry.get("next_thought") and not earlier:
                turn["next_thought"] = entry["next_thought"]
            if entry.get("reasoning_data") is not None and not earlier:
                turn["reasoning_data"] = entry["reasoning_data"]
        elif kind == "thought":
            if earlier:
                if len(turn) > 1:
                    turns.append(turn)
                continue
            turn["next_thought"] = entry["next_thought"]
            answered_next = index + 1 < len(entries) and kinds[index + 1] == "outputs"
            if not answered_next:
                turn[NOTE_KEY] = unsent_line
        elif kind == "note":
            turn[NOTE_KEY] = entry["last_request_note"]
        elif kind == "outputs":
            outputs = {k: entry[k] for k in task.outputs if k in entry}
            if text_output is not None and text_output in outputs:
                turn[text_output] = outputs[text_output]
            else:
                turn["next_thought"] = "\n\n".join(
                    f"[[ ## {k} ## ]]\n{render_value(v, task.outputs[k])}" for k, v in outputs.items()
                )
        turns.append(turn)
    return turns


def note_renderer(
    host: Callable[[Signature, Mapping[str, Any]], str | None] | None,
) -> Callable[[Signature, Mapping[str, Any]], str | None]:
    """The loop's note for a turn, then the host's `history_note_renderer` (both when both speak)."""

    def render(signature: Signature, turn: Mapping[str, Any]) -> str | None:
        own = turn.get(NOTE_KEY)
        theirs = host(signature, {k: v for k, v in turn.items() if k != NOTE_KEY}) if host is not None else None
        parts = [p for p in (own, theirs) if p]
        return "\n\n".join(parts) if parts else None

    return render


def plain_text_renderer(name: str | None) -> Callable[[Signature, Mapping[str, Any], str], str]:
    """A text answer replays as the plain text the model wrote."""

    def render(signature: Signature, outputs: Mapping[str, Any], missing: str) -> str:
        value = outputs.get(name or "")
        return "" if value is None else render_value(value)

    return render


def episode_boundaries(base: History, output_names: Sequence[str]) -> list[int]:
    """Cut positions after each entry that holds every output (and after the last entry)."""
    cuts = [i + 1 for i, entry in enumerate(base) if all(n in entry for n in output_names)]
    if len(base) and (not cuts or cuts[-1] != len(base)):
        cuts.append(len(base))
    return cuts


def current_turn_start(base: History, visible: int, starts_turn: bool, task: Signature) -> int:
    """Where the current turn starts among the visible entries (earlier turns replay as actions)."""
    if starts_turn:
        return visible
    offset = len(base) - visible
    for index in range(len(base) - 1, offset - 1, -1):
        if any(k in base[index] for k in task.inputs):
            return index - offset
    return 0
