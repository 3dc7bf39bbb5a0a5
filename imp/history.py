"""History (conversation turns), ToolCall and ToolResult: the record a program replays."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from types import MappingProxyType
from typing import Any, overload

from imp._annotation import HistoryType
from imp._redact import redact
from imp.records import ToolCall, ToolOutcome, ToolResult
from imp.records import plain as _plain
from imp.values import render_value

__all__ = ["History", "ToolCall", "ToolOutcome", "ToolResult", "format_tool_result"]


def format_tool_result(result: ToolResult) -> str:
    """What the model reads for one tool call: the value as prompt text, or "Error: " and a sentence."""
    if result.error is not None:
        return f"Error: {result.error}"
    if result.outcome != "result":
        return f"Error: {result.name} did not return a result ({result.outcome})."
    return render_value(result.result)


Turn = Mapping[str, Any]


class History(Sequence[Turn], HistoryType):
    """An immutable list of turns: signature-shaped field mappings, or ReAct steps.

    A turn may also hold `user_name` / `assistant_name` (message names, never rendered as
    fields), and a native tool step holds `next_thought`, `tool_calls` and `tool_call_results`.
    """

    __slots__ = ("_turns",)

    def __init__(self, turns: Iterable[Turn] = ()) -> None:
        frozen: list[Turn] = []
        for turn in turns:
            if not isinstance(turn, Mapping):
                raise TypeError(f"a history turn must be a mapping of fields, got {type(turn).__name__}")
            frozen.append(MappingProxyType(_freeze_turn(turn)))
        self._turns: tuple[Turn, ...] = tuple(frozen)

    @property
    def messages(self) -> tuple[Turn, ...]:
        """The turns, oldest first."""
        return self._turns

    @overload
    def __getitem__(self, index: int) -> Turn: ...
    @overload
    def __getitem__(self, index: slice) -> History: ...
    def __getitem__(self, index: int | slice) -> Turn | History:
        if isinstance(index, slice):
            return History(self._turns[index])
        return self._turns[index]

    def __len__(self) -> int:
        return len(self._turns)

    def __iter__(self) -> Iterator[Turn]:
        return iter(self._turns)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, History):
            return NotImplemented
        return [dict(t) for t in self._turns] == [dict(t) for t in other._turns]

    def __hash__(self) -> int:
        return hash(len(self._turns))

    def __repr__(self) -> str:
        return f"History({len(self._turns)} turns)"

    def append(self, turn: Turn) -> History:
        """A new history with one more turn at the end."""
        return History((*self._turns, turn))

    def extend(self, turns: Iterable[Turn]) -> History:
        """A new history with these turns at the end."""
        return History((*self._turns, *turns))

    def redact(self) -> History:
        """A copy safe for logs: secrets replaced by key name and by value shape."""
        return History.load(redact(self.dump()))

    def dump(self) -> dict[str, Any]:
        """A JSON-friendly copy: `{"type": "history", "messages": [...]}`."""
        return {"type": "history", "messages": [_dump_turn(t) for t in self._turns]}

    @classmethod
    def load(cls, data: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> History:
        """Read a history from `dump()` output (or from a plain list of turns)."""
        if isinstance(data, Mapping):
            if data.get("type") != "history" or not isinstance(data.get("messages"), list):
                raise ValueError('a history dump is {"type": "history", "messages": [...]}')
            raw = data["messages"]
        else:
            raw = list(data)
        return cls(_load_turn(t) for t in raw)


def _freeze_turn(turn: Turn) -> dict[str, Any]:
    out = dict(turn)
    if out.get("tool_calls") is not None:
        out["tool_calls"] = tuple(c if isinstance(c, ToolCall) else ToolCall.load(c) for c in out["tool_calls"])
    if out.get("tool_call_results") is not None:
        out["tool_call_results"] = tuple(
            r if isinstance(r, ToolResult) else ToolResult.load(r) for r in out["tool_call_results"]
        )
    return out


def _dump_turn(turn: Turn) -> dict[str, Any]:
    return {str(k): _plain(v) for k, v in turn.items()}


def _load_turn(data: Mapping[str, Any]) -> dict[str, Any]:
    turn = dict(data)
    if "tool_calls" in turn and turn["tool_calls"] is not None:
        turn["tool_calls"] = tuple(ToolCall.load(c) for c in turn["tool_calls"])
    if "tool_call_results" in turn and turn["tool_call_results"] is not None:
        turn["tool_call_results"] = tuple(ToolResult.load(r) for r in turn["tool_call_results"])
    return turn
