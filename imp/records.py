"""Typed records every layer shares: chat messages, tool calls and results, token usage.

This is the lowest layer but `errors`, `_json` and `_redact`: it imports nothing else
of imp, so adapters, models, tools and programs can all name these types.
"""

from __future__ import annotations

import datetime as _dt
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal, NotRequired, Required, TypedDict

from imp._frozen import fast_init
from imp._json import loads
from imp.media import MARKER, MARKER_PREFIX, MEDIA_KEY, Media, markers_alive, resolve_marker

__all__ = [
    "ContentPart",
    "MediaPart",
    "Message",
    "Role",
    "Step",
    "ToolCall",
    "ToolOutcome",
    "ToolResult",
    "UnreadArguments",
    "Usage",
    "content_text",
    "media_parts",
    "message_tool_calls",
    "placed_media",
    "plain",
    "with_placed_media",
    "with_text",
]

Role = Literal["system", "user", "assistant", "tool"]
"""Who speaks a chat message."""


@dataclass(frozen=True, slots=True)
class MediaPart:
    """A media value placed in a message, with where it came from (the input `photo`, say), for errors."""

    media: Media
    origin: str | None = None

    def __str__(self) -> str:
        return str(self.media)

    def __repr__(self) -> str:
        where = f" from {self.origin}" if self.origin else ""
        return f"<{self.media.describe()}{where}>"


ContentPart = str | MediaPart | Mapping[str, Any]
"""One part of a message's content: text, a media value, or a part already in a provider's own shape."""


class Message(TypedDict, total=False):
    """An OpenAI-style chat message, the shape adapters write and every LM client reads.

    `role` is always there; `content` is the text (None beside tool calls), or a list of parts
    (text, `MediaPart`s, provider-shaped mappings) when the message carries media; `name` is the
    participant's name (a history turn's `user_name` / `assistant_name`); `tool_calls` are the
    assistant's native calls, as `ToolCall` records (each client writes its provider's own shape);
    `tool_call_id` ties a `tool` message to its call; `reasoning` and `reasoning_data` carry a
    provider's reasoning, verbatim, to continue a turn.
    """

    role: Required[Role]
    content: str | list[ContentPart] | None
    name: NotRequired[str]
    tool_calls: NotRequired[list[ToolCall]]
    tool_call_id: NotRequired[str]
    reasoning: NotRequired[str]
    reasoning_data: NotRequired[Any]


ToolOutcome = Literal["result", "refused", "auth_refused", "not_sent", "unknown", "deferred"]
"""How a tool call ended: it ran, it was refused before running, authorization refused it,
it was never sent, its fate is unknown (it raised, timed out or was cancelled), or it waits for a
decision from outside the run (`deferred`: an approval, or a result a person supplies)."""


class UnreadArguments(dict[str, Any]):
    """Tool-call arguments a model wrote that are not a JSON object: no arguments, with the text kept.

    A provider's tool call carries its arguments as JSON text; when the model writes something no
    repair reads as an object, the call still happens (the tool runner refuses it, quoting `text` to
    the model) and the history and a saved dump keep what the model wrote.
    """

    __slots__ = ("text",)

    def __init__(self, text: str) -> None:
        super().__init__()
        self.text = text

    def __repr__(self) -> str:
        return f"UnreadArguments({self.text!r})"

    def __reduce__(self) -> tuple[type[UnreadArguments], tuple[str]]:
        return (UnreadArguments, (self.text,))


def _read_arguments(text: str) -> dict[str, Any]:
    """Arguments written as JSON text: the object (repaired), `{}` for blank text, `UnreadArguments`
    for text that is not JSON at all; JSON that is not an object is refused (ValueError)."""
    if not text.strip():
        return {}
    try:
        value = loads(text)
    except ValueError:
        return UnreadArguments(text)
    if not isinstance(value, dict):
        raise ValueError("tool-call arguments are not a JSON object")
    return value


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One native tool call the model made: its id, the tool's name and its JSON arguments."""

    id: str
    name: str
    arguments: Mapping[str, Any] = field(default_factory=dict)

    def dump(self) -> dict[str, Any]:
        """A JSON-friendly copy."""
        args = self.arguments
        # Unread arguments are dumped as the text the model wrote, which `load` reads back as such.
        kept = args.text if isinstance(args, UnreadArguments) else _plain(args)
        return {"id": self.id, "name": self.name, "arguments": kept}

    @classmethod
    def load(cls, data: Mapping[str, object]) -> ToolCall:
        """Read a call from its dump, or from an OpenAI-shaped or loosely named mapping."""
        fn = data.get("function")
        source: Mapping[str, Any] = fn if isinstance(fn, Mapping) else data
        name = source.get("name") or source.get("tool") or source.get("recipient_name") or ""
        args = source.get("arguments", source.get("args", source.get("parameters", {})))
        if isinstance(args, str):
            args = _read_arguments(args)
        kept = args if isinstance(args, UnreadArguments) else dict(args or {})
        return cls(id=str(data.get("id") or ""), name=str(name), arguments=kept)


def message_tool_calls(message: Message) -> list[ToolCall]:
    """A message's tool calls as `ToolCall` records, for a client to write in its provider's shape.

    imp writes only records; a message built by hand may carry OpenAI-shaped (or loosely named)
    mappings, read here once, so no client reads another provider's shape. A call without an id
    gets its position (`call_0`, ...).
    """
    given: Sequence[object] = message.get("tool_calls") or ()
    calls: list[ToolCall] = []
    for index, item in enumerate(given):
        if isinstance(item, ToolCall):
            call = item
        elif isinstance(item, Mapping):
            call = ToolCall.load(item)
        else:
            raise TypeError(f"a message's tool call is an imp.ToolCall or a mapping, got {type(item).__name__}")
        calls.append(call if call.id else ToolCall(f"call_{index}", call.name, call.arguments))
    return calls


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
        if outcome not in ("result", "refused", "auth_refused", "not_sent", "unknown", "deferred"):
            raise ValueError(f"unknown tool outcome {outcome!r}")
        return cls(
            id=str(data.get("id", "")),
            name=str(data.get("name", "")),
            result=_loaded(data.get("result")),
            outcome=outcome,
            error=data.get("error"),
        )


@fast_init
@dataclass(frozen=True, slots=True)
class Usage:
    """Token counts (and provider-reported cost) of one or more LM calls."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_tokens: int = 0
    """Input tokens read from the provider's prompt cache."""
    reasoning_tokens: int = 0
    cache_write_tokens: int = 0
    """Input tokens written to the provider's prompt cache (Anthropic bills them apart)."""
    cost: float | None = None
    requests: int = 0

    def __add__(self, other: Usage) -> Usage:
        cost = None if self.cost is None and other.cost is None else (self.cost or 0.0) + (other.cost or 0.0)
        return Usage(
            input_tokens=self.input_tokens + other.input_tokens,
            output_tokens=self.output_tokens + other.output_tokens,
            cached_tokens=self.cached_tokens + other.cached_tokens,
            reasoning_tokens=self.reasoning_tokens + other.reasoning_tokens,
            cache_write_tokens=self.cache_write_tokens + other.cache_write_tokens,
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
            "cache_write_tokens": self.cache_write_tokens,
            "cost": self.cost,
            "requests": self.requests,
        }

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens


NO_USAGE = Usage()
"""The usage of a response that reports none (frozen, so one instance serves every response)."""


_EMPTY: Mapping[str, Any] = MappingProxyType({})

# A step's record fields and the keys they are saved under (the only place these keys are spelled).
# A conversation turn (no `tool_calls` key) carries only the two message names beside its fields.
_NAME_KEYS = {"user_name": "user_name", "assistant_name": "assistant_name"}
_STEP_KEYS = {
    **_NAME_KEYS,
    "thought": "next_thought",
    "tool_calls": "tool_calls",
    "results": "tool_call_results",
    "note": "last_request_note",
    "reasoning": "reasoning",
    "reasoning_data": "reasoning_data",
    "loop_note": "_imp_note",
}
_ATTR_OF_STEP_KEY = {key: attr for attr, key in _STEP_KEYS.items()}
_ATTR_OF_NAME_KEY = {key: attr for attr, key in _NAME_KEYS.items()}


@dataclass(frozen=True, slots=True, eq=False)
class Step(Mapping[str, Any]):
    """One history turn: a conversation turn's fields, or one step of a tool loop.

    `fields` holds the signature's values by name (a step's task inputs on its first step, the
    outputs on the step that answered). A tool-loop step has `tool_calls` (None marks a
    conversation turn) and may hold the model's `thought`, the calls' `results`, a
    `last_request_note`, the provider's `reasoning` / `reasoning_data`, and `loop_note`, the line a
    loop shows after the step when it replays it. The step also reads as the mapping it is saved
    as (`step["tool_calls"]`, `step.get("next_thought")`), so code written for that shape works.
    """

    fields: Mapping[str, Any] = _EMPTY
    thought: str | None = None
    tool_calls: tuple[ToolCall, ...] | None = None
    results: tuple[ToolResult, ...] | None = None
    note: str | None = None
    reasoning: str | None = None
    reasoning_data: Any = None
    user_name: str | None = None
    assistant_name: str | None = None
    loop_note: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.fields, MappingProxyType):
            object.__setattr__(self, "fields", MappingProxyType(dict(self.fields)) if self.fields else _EMPTY)
        # A list given for the calls or results is frozen too (the annotations say tuple).
        calls: object = self.tool_calls
        if isinstance(calls, list):
            object.__setattr__(self, "tool_calls", tuple(calls))
        results: object = self.results
        if isinstance(results, list):
            object.__setattr__(self, "results", tuple(results))

    @property
    def is_tool_step(self) -> bool:
        """Whether this is a tool-loop step (replayed as native tool messages), not a conversation turn."""
        return self.tool_calls is not None

    @property
    def calls(self) -> tuple[ToolCall, ...]:
        """The step's tool calls (none for a conversation turn)."""
        return self.tool_calls or ()

    def result_list(self) -> tuple[ToolResult, ...]:
        """The step's tool results (none when it recorded none)."""
        return self.results or ()

    def _keys(self) -> Mapping[str, str]:
        return _ATTR_OF_STEP_KEY if self.tool_calls is not None else _ATTR_OF_NAME_KEY

    def __getitem__(self, key: str) -> Any:
        attr = self._keys().get(key)
        if attr is None:
            return self.fields[key]
        value = getattr(self, attr)
        if value is None:
            raise KeyError(key)
        return value

    def __iter__(self) -> Iterator[str]:
        yield from self.fields
        for key, attr in self._keys().items():
            if getattr(self, attr) is not None and key not in self.fields:
                yield key

    def __len__(self) -> int:
        return sum(1 for _ in self)

    def __contains__(self, key: object) -> bool:
        attr = self._keys().get(key) if isinstance(key, str) else None
        if attr is None:
            return key in self.fields
        return getattr(self, attr) is not None

    def __repr__(self) -> str:
        return f"Step({dict(self)!r})"

    def dump(self) -> dict[str, Any]:
        """A JSON-friendly copy, in the flat shape a history is saved in (a media value stays the value:
        `imp.save` writes its saved form, `Media.dump()`, which `load` reads back)."""
        return {key: _plain(self[key]) for key in self}

    @classmethod
    def load(cls, data: Mapping[str, object]) -> Step:
        """Read a step from its saved shape (or any mapping of a turn: fields, names, loop keys)."""
        if isinstance(data, Step):
            return data
        if not isinstance(data, Mapping):
            raise TypeError(f"a history turn must be a mapping of fields, got {type(data).__name__}")
        tool_step = "tool_calls" in data
        attrs = _ATTR_OF_STEP_KEY if tool_step else _ATTR_OF_NAME_KEY
        values: dict[str, Any] = {}
        fields: dict[str, Any] = {}
        for key, value in data.items():
            attr = attrs.get(key)
            if attr is None:
                fields[str(key)] = _loaded(value)
            else:
                values[attr] = value
        if tool_step:
            values["tool_calls"] = tuple(
                c if isinstance(c, ToolCall) else ToolCall.load(c) for c in values.get("tool_calls") or ()
            )
            if values.get("results") is not None:
                values["results"] = tuple(
                    r if isinstance(r, ToolResult) else ToolResult.load(r) for r in values["results"]
                )
        return cls(fields=MappingProxyType(fields) if fields else _EMPTY, **values)


def _loaded(value: object) -> object:
    """A loaded value with media in their saved form (`{"$media": ...}`) read back as media values."""
    if isinstance(value, Mapping) and MEDIA_KEY in value:
        return Media.load(value)
    if isinstance(value, list) and any(isinstance(v, Mapping) and MEDIA_KEY in v for v in value):
        return [_loaded(v) for v in value]
    return value


def plain(value: object) -> Any:
    """A JSON-friendly copy of a value that may hold records, datetimes or pydantic models."""
    return _plain(value)


def _plain(value: object) -> object:
    if isinstance(value, ToolCall | ToolResult | Step):
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


# --- content that holds media -------------------------------------------------------------------


def placed_media(text: str) -> str | list[ContentPart]:
    """Text with its media markers cut out and the media values put in their place as parts; the
    text itself when it holds none (a marker whose value is gone stays as text)."""
    if MARKER_PREFIX not in text:
        return text
    parts: list[ContentPart] = []
    last = 0
    for match in MARKER.finditer(text):
        found = resolve_marker(int(match.group(1)))
        if found is None:
            continue
        if match.start() > last:
            parts.append(text[last : match.start()])
        parts.append(MediaPart(found[0], found[1]))
        last = match.end()
    if not parts:
        return text
    if last < len(text):
        parts.append(text[last:])
    return parts


def media_parts(content: object) -> list[MediaPart]:
    """The media parts of a message's content (a bare media value counts, with no origin)."""
    if not isinstance(content, list):
        return []
    return [p if isinstance(p, MediaPart) else MediaPart(p) for p in content if isinstance(p, MediaPart | Media)]


def content_text(content: object) -> str:
    """A message's content as text: its text parts, and each media value as its short description."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        out: list[str] = []
        for part in content:
            if isinstance(part, str):
                out.append(part)
            elif isinstance(part, MediaPart | Media):
                out.append(str(part))
            elif isinstance(part, Mapping):
                out.append(str(part.get("text", "")))
        return "".join(out)
    return str(content)


def with_text(content: object, text: str, separator: str = "\n\n") -> str | list[ContentPart]:
    """A message's content with text added at its end (its media parts kept where they are)."""
    if isinstance(content, list):
        return [*content, separator + text] if content else [text]
    head = "" if content is None else str(content)
    return f"{head}{separator}{text}".strip()


def with_placed_media(messages: list[Message]) -> list[Message]:
    """Messages with their media markers placed as parts: in user and tool messages, where providers
    take media; anywhere else (a system text, an assistant's reply) as the values' descriptions.
    While no media value with a marker is alive in the process, nothing is searched."""
    if not markers_alive():
        return messages
    for index, message in enumerate(messages):
        content = message.get("content")
        if isinstance(content, str) and MARKER_PREFIX in content:
            placed = placed_media(content)
            if placed is content:
                continue
            if message["role"] not in ("user", "tool"):
                placed = content_text(placed)
            messages[index] = {**message, "content": placed}
    return messages
