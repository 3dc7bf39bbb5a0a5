"""`events`: the parts of `imp.stream` turned into AG-UI events, in the protocol package's own types.

| stream part | AG-UI events |
| --- | --- |
| (start) | `RUN_STARTED` |
| `field` | `TEXT_MESSAGE_START`, then `TEXT_MESSAGE_CONTENT` per delta; a message per field (and predictor) |
| `reasoning` (or the field `reasoning`) | `REASONING_START`, `REASONING_MESSAGE_*`, `REASONING_END` |
| `tool_call` | `TOOL_CALL_START`, `TOOL_CALL_ARGS` (the arguments as JSON), `TOOL_CALL_END` |
| `tool_result` | `TOOL_CALL_RESULT` |
| `partial` | `STATE_SNAPSHOT` of the output so far |
| `retry` | the open message ends; `CUSTOM` `imp.retry` with the reason |
| `final` | `STATE_SNAPSHOT` of the prediction's fields, `RUN_FINISHED` with them as `result` |
| an error | `RUN_ERROR` (message and the error's class as `code`), and the events end |
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import AsyncIterable, AsyncIterator, Collection
from dataclasses import dataclass
from typing import Any

from ag_ui.core import (
    BaseEvent,
    CustomEvent,
    ReasoningEndEvent,
    ReasoningMessageContentEvent,
    ReasoningMessageEndEvent,
    ReasoningMessageStartEvent,
    ReasoningStartEvent,
    RunErrorEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateSnapshotEvent,
    TextMessageContentEvent,
    TextMessageEndEvent,
    TextMessageStartEvent,
    ToolCallArgsEvent,
    ToolCallEndEvent,
    ToolCallResultEvent,
    ToolCallStartEvent,
)
from ag_ui.encoder import EventEncoder
from pydantic_core import to_jsonable_python

from imp._redact import redact_text

__all__ = ["CONTENT_TYPE", "encode", "events"]

CONTENT_TYPE = "text/event-stream"
"""The media type of `encode`'s output (server-sent events)."""

_REASONING = "reasoning"


def _jsonable(value: object) -> Any:
    fields = getattr(value, "fields", None)
    if isinstance(fields, dict):  # a Prediction: its output fields
        value = fields
    return to_jsonable_python(value, fallback=str)


def _text(value: object) -> str:
    return value if isinstance(value, str) else json.dumps(_jsonable(value), ensure_ascii=False)


@dataclass
class _Open:
    """The message being written, if any: its id, its field, and whether it is reasoning."""

    message_id: str | None = None
    field: str | None = None
    path: str | None = None
    reasoning: bool = False
    last_message_id: str | None = None


class _Translator:
    def __init__(self, message_fields: Collection[str] | None) -> None:
        self.message_fields = None if message_fields is None else frozenset(message_fields)
        self.open = _Open()

    def close(self) -> list[BaseEvent]:
        open_ = self.open
        if open_.message_id is None:
            return []
        message_id, reasoning = open_.message_id, open_.reasoning
        open_.message_id, open_.field, open_.reasoning = None, None, False
        if reasoning:
            return [ReasoningMessageEndEvent(message_id=message_id), ReasoningEndEvent(message_id=message_id)]
        return [TextMessageEndEvent(message_id=message_id)]

    def _write(self, name: str | None, path: str | None, delta: str, reasoning: bool) -> list[BaseEvent]:
        out: list[BaseEvent] = []
        open_ = self.open
        if open_.message_id is None or open_.field != name or open_.path != path or open_.reasoning != reasoning:
            out += self.close()
            message_id = uuid.uuid4().hex
            open_.message_id, open_.field, open_.path, open_.reasoning = message_id, name, path, reasoning
            open_.last_message_id = message_id
            if reasoning:
                out += [ReasoningStartEvent(message_id=message_id), ReasoningMessageStartEvent(message_id=message_id)]
            else:
                out.append(TextMessageStartEvent(message_id=message_id, role="assistant"))
        if delta:  # the protocol refuses an empty delta
            message_id = open_.message_id
            assert message_id is not None
            if reasoning:
                out.append(ReasoningMessageContentEvent(message_id=message_id, delta=delta))
            else:
                out.append(TextMessageContentEvent(message_id=message_id, delta=delta))
        return out

    def part(self, part: Any) -> list[BaseEvent]:
        kind = part.kind
        if kind == "field":
            name, path = part.field, getattr(part, "path", None)
            if name == _REASONING:
                return self._write(name, path, part.delta, True)
            if self.message_fields is not None and name not in self.message_fields:
                return []
            return self._write(name, path, part.delta, False)
        if kind == "reasoning":
            return self._write(None, getattr(part, "path", None), part.delta, True)
        if kind == "tool_call":
            call_id = part.tool_call_id or uuid.uuid4().hex
            out = self.close()
            start = ToolCallStartEvent(
                tool_call_id=call_id,
                tool_call_name=part.tool_name or "tool",
                parent_message_id=self.open.last_message_id,
            )
            arguments = json.dumps(_jsonable(part.arguments if part.arguments is not None else {}), ensure_ascii=False)
            return [
                *out,
                start,
                ToolCallArgsEvent(tool_call_id=call_id, delta=arguments),
                ToolCallEndEvent(tool_call_id=call_id),
            ]
        if kind == "tool_result":
            content = _text(part.output) if part.error is None else f"Error: {part.error}"
            result = ToolCallResultEvent(
                message_id=uuid.uuid4().hex, tool_call_id=part.tool_call_id or "", content=content, role="tool"
            )
            return [*self.close(), result]
        if kind == "partial":
            return [StateSnapshotEvent(snapshot=_jsonable(getattr(part, "value", None)))]
        if kind == "retry":
            reason = getattr(part, "reason", None) or "the reply could not be read"
            return [*self.close(), CustomEvent(name="imp.retry", value={"reason": reason})]
        return []


async def events(
    parts: AsyncIterable[Any],
    *,
    thread_id: str,
    run_id: str,
    message_fields: Collection[str] | None = None,
) -> AsyncIterator[BaseEvent]:
    """The AG-UI events of a run, from its `imp.stream` parts (see the module's table).

    - `thread_id`, `run_id`: the conversation and this run, as the client sent them.
    - `message_fields`: the outputs whose text is the assistant's message (default: every output;
      a field named `reasoning` is always reasoning). The others still arrive in the state.

    An error of the run ends the events with `RUN_ERROR` (not raised: the client reads it); a
    cancelled reader (a client that went away) cancels the run, as leaving `imp.stream` does.
    """
    translator = _Translator(message_fields)
    yield RunStartedEvent(thread_id=thread_id, run_id=run_id)
    try:
        async with _closing(parts) as reading:
            async for part in reading:
                if part.kind == "final":
                    for event in translator.close():
                        yield event
                    result = _jsonable(part.prediction)
                    yield StateSnapshotEvent(snapshot=result)
                    yield RunFinishedEvent(thread_id=thread_id, run_id=run_id, result=result)
                    return
                for event in translator.part(part):
                    yield event
    except Exception as exc:
        for event in translator.close():
            yield event
        yield RunErrorEvent(message=redact_text(str(exc) or type(exc).__name__), code=type(exc).__name__)
        return
    for event in translator.close():  # pragma: no cover - imp.stream always ends with `final` or raises
        yield event
    yield RunErrorEvent(message="the run ended without its final part", code="Incomplete")


@contextlib.asynccontextmanager
async def _closing(parts: AsyncIterable[Any]) -> AsyncIterator[AsyncIterable[Any]]:
    """The parts, closed when the events end early (so `imp.stream` cancels its run at once)."""
    try:
        yield parts
    finally:
        close = getattr(parts, "aclose", None)
        if close is not None:
            await close()


async def encode(stream: AsyncIterable[BaseEvent], accept: str | None = None) -> AsyncIterator[str]:
    """Each event as the protocol's encoder writes it (server-sent events: `data: {...}` lines)."""
    encoder = EventEncoder(accept=accept)  # type: ignore[arg-type, unused-ignore]
    async for event in stream:
        yield encoder.encode(event)
