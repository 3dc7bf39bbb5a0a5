"""History: the turns (typed `Step` records) a program replays, and how a tool result reads to the model."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any, overload

from imp._annotation import HistoryType
from imp._redact import redact
from imp.records import Step, ToolCall, ToolOutcome, ToolResult
from imp.values import holds_media, media_description, render_value

__all__ = ["History", "Step", "ToolCall", "ToolOutcome", "ToolResult", "format_tool_result", "tool_result_content"]


def format_tool_result(result: ToolResult) -> str:
    """What the model reads for one tool call, as text: the value as prompt text (a media value by its
    description), or "Error: " and a sentence."""
    if result.error is not None:
        return f"Error: {result.error}"
    if result.outcome != "result":
        return f"Error: {result.name} did not return a result ({result.outcome})."
    if holds_media(result.result):
        return media_description(result.result)
    return render_value(result.result)


def tool_result_content(result: ToolResult) -> str:
    """`format_tool_result` as an adapter writes it: a result holding media (an image a tool returned,
    an MCP tool's screenshot) leaves markers the adapter places as content parts."""
    if result.ok and holds_media(result.result):
        return render_value(result.result, origin=f"the result of `{result.name}`")
    return format_tool_result(result)


Turn = Mapping[str, Any]
"""What a history accepts as a turn: a `Step`, or a mapping in a step's saved shape."""


class History(Sequence[Step], HistoryType):
    """An immutable list of turns, each a `Step`: a conversation turn's fields, or a tool-loop step.

    A turn given as a mapping (signature-shaped fields, `user_name` / `assistant_name`, and for a
    tool step `next_thought`, `tool_calls`, `tool_call_results`...) is read into a `Step`.
    """

    __slots__ = ("_turns",)

    def __init__(self, turns: Iterable[Turn] = ()) -> None:
        self._turns: tuple[Step, ...] = tuple(Step.load(t) for t in turns)

    @property
    def messages(self) -> tuple[Step, ...]:
        """The turns, oldest first."""
        return self._turns

    @overload
    def __getitem__(self, index: int) -> Step: ...
    @overload
    def __getitem__(self, index: slice) -> History: ...
    def __getitem__(self, index: int | slice) -> Step | History:
        if isinstance(index, slice):
            return History(self._turns[index])
        return self._turns[index]

    def __len__(self) -> int:
        return len(self._turns)

    def __iter__(self) -> Iterator[Step]:
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
        return {"type": "history", "messages": [t.dump() for t in self._turns]}

    @classmethod
    def load(cls, data: Mapping[str, Any] | Sequence[Mapping[str, Any]]) -> History:
        """Read a history from `dump()` output (or from a plain list of turns)."""
        if isinstance(data, Mapping):
            if data.get("type") != "history" or not isinstance(data.get("messages"), list):
                raise ValueError('a history dump is {"type": "history", "messages": [...]}')
            raw = data["messages"]
        else:
            raw = list(data)
        return cls(raw)
