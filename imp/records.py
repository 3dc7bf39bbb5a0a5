"""Typed records every layer shares: chat messages, tool calls and results, token usage.

This is the lowest layer but `errors`, `_json` and `_redact`: it imports nothing else
of imp, so adapters, models, tools and programs can all name these types.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, NotRequired, Required, TypedDict

from imp._json import loads_object

__all__ = [
    "Message",
    "Role",
    "ToolCall",
    "ToolOutcome",
    "ToolResult",
    "Usage",
    "WireToolCall",
    "plain",
]

Role = Literal["system", "user", "assistant", "tool"]
"""Who speaks a chat message."""


class WireFunction(TypedDict):
    """The `function` part of an OpenAI-shaped tool call: a name and JSON-encoded arguments."""

    name: str
    arguments: str


class WireToolCall(TypedDict):
    """An OpenAI-shaped tool call as an assistant message carries it."""

    id: str
    type: Literal["function"]
    function: WireFunction


class Message(TypedDict, total=False):
    """An OpenAI-style chat message, the shape adapters write and every LM client reads.

    `role` is always there; `content` is the text (None beside tool calls); `name` is the
    participant's name (seed 000's message names); `tool_calls` are the assistant's native calls
    (as `ToolCall` records or OpenAI-shaped dicts); `tool_call_id` ties a `tool` message to its
    call; `reasoning` and `reasoning_data` carry a provider's reasoning, verbatim, to continue a turn.
    """

    role: Required[Role]
    content: str | list[Any] | None
    name: NotRequired[str]
    tool_calls: NotRequired[list[Any]]
    tool_call_id: NotRequired[str]
    reasoning: NotRequired[str]
    reasoning_data: NotRequired[Any]


ToolOutcome = Literal["result", "refused", "auth_refused", "not_sent", "unknown"]
"""How a tool call ended: it ran, it was refused before running, authorization refused it,
it was never sent, or its fate is unknown (it raised, timed out or was cancelled)."""


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One native tool call the model made: its id, the tool's name and its JSON arguments."""

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def dump(self) -> dict[str, Any]:
        """A JSON-friendly copy."""
        return {"id": self.id, "name": self.name, "arguments": _plain(self.arguments)}

    @classmethod
    def load(cls, data: Mapping[str, Any]) -> ToolCall:
        """Read a call from its dump, or from an OpenAI-shaped or loosely named mapping."""
        fn = data.get("function")
        source: Mapping[str, Any] = fn if isinstance(fn, Mapping) else data
        name = source.get("name") or source.get("tool") or source.get("recipient_name") or ""
        args = source.get("arguments", source.get("args", source.get("parameters", {})))
        if isinstance(args, str):
            args = loads_object(args) if args.strip() else {}
        return cls(id=str(data.get("id") or ""), name=str(name), arguments=dict(args or {}))


@dataclass(frozen=True, slots=True)
class ToolResult:
    """The result of one tool call, matched to the call by id, with its outcome."""

    id: str
    name: str
    result: Any = None
    outcome: ToolOutcome = "result"
    error: str | None = None

    @property
    def ok(self) -> bool:
        """Whether the tool ran and returned a result."""
        return self.outcome == "result" and self.error is None

    def dump(self) -> dict[str, Any]:
        """A JSON-friendly copy."""
        out: dict[str, Any] = {"id": self.id, "name": self.name, "result": _plain(self.result), "outcome": self.outcome}
        if self.error is not None:
            out["error"] = self.error
        return out

    @classmethod
    def load(cls, data: Mapping[str, Any]) -> ToolResult:
        """Read a result from its dump."""
        outcome = data.get("outcome", "result")
        if outcome not in ("result", "refused", "auth_refused", "not_sent", "unknown"):
            raise ValueError(f"unknown tool outcome {outcome!r}")
        return cls(
            id=str(data.get("id", "")),
            name=str(data.get("name", "")),
            result=data.get("result"),
            outcome=outcome,
            error=data.get("error"),
        )


@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts (and provider-reported cost) of one or more LM calls."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    reasoning_tokens: int = 0
    cost: float | None = None
    requests: int = 0

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost is None and other.cost is None else (self.cost or 0.0) + (other.cost or 0.0)
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cost=cost,
            requests=self.requests + other.requests,
        )

    def dump(self) -> dict[str, Any]:
        """A JSON-friendly dict."""
        return {
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "cached_tokens": self.cached_tokens,
            "reasoning_tokens": self.reasoning_tokens,
            "cost": self.cost,
            "requests": self.requests,
        }

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


NO_USAGE = Usage()
"""The usage of a response that reports none (frozen, so one instance serves every response)."""


def plain(value: Any) -> Any:
    """A JSON-friendly copy of a value that may hold records, datetimes or pydantic models."""
    return _plain(value)


def _plain(value: Any) -> Any:
    if isinstance(value, ToolCall | ToolResult):
        return value.dump()
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, _dt.datetime | _dt.date):
        return value.isoformat()
    if hasattr(value, "model_dump"):
        return value.model_dump(mode="json")
    return value
