"""A bounded record of recent LM exchanges, printed (redacted) by `imp.inspect_history`.

Programs write it (`record_exchange`, around each request they send); `imp.inspect_history`, the
OpenTelemetry spans and the recorder read it. It sits above the LM clients, whose replies it keeps,
and above the settings, which size it (`history_size`).
"""

from __future__ import annotations

import json
import sys
import time
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, TextIO

from imp._redact import redact, redact_text
from imp.models.base import LMResponse
from imp.records import Message, content_text
from imp.settings import process_settings

__all__ = [
    "Exchange",
    "current_program_label",
    "inspect_history",
    "program_label",
    "record_exchange",
    "recent_exchanges",
]


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request and its reply (or error), as sent."""

    at: float
    model: str
    messages: Sequence[Message]
    options: dict[str, Any]
    response: LMResponse | None
    error: str | None = None
    program: str | None = None
    """The program that sent it: a function program's name, else its kind (`Predict`, `ReAct`, ...)."""


type _Record = tuple[float, str, Sequence[Message], Mapping[str, Any], LMResponse | None, str | None, str | None]
_PROGRAM: ContextVar[str | None] = ContextVar("imp_program_label", default=None)


current_program_label = _PROGRAM.get
"""The name `program_label` gives the requests made here (a function program's), or None."""


@contextmanager
def program_label(name: str) -> Iterator[None]:
    """Name the program whose requests are recorded inside the block (shown by `inspect_history`)."""
    token = _PROGRAM.set(name)
    try:
        yield
    finally:
        _PROGRAM.reset(token)


# Raw tuples: recording is on every LM request's path, reading (inspect_history) is rare.
_RECENT: deque[_Record] = deque(maxlen=process_settings().history_size)


def record_exchange(
    model: str,
    messages: Sequence[Message],
    options: Mapping[str, object],
    response: LMResponse | None,
    error: str | None = None,
    *,
    program: str | None = None,
) -> None:
    """Keep one exchange; past `history_size` (see `imp.configure`) the oldest drop out, and 0 keeps
    none. `options` is kept as given, not copied. The label is the named function program's the
    request runs under, else `program` (the sending program's kind: `Predict`, `ReAct`, ...)."""
    recent = _RECENT
    if recent.maxlen != process_settings().history_size:  # `imp.configure(history_size=...)` changed it
        recent = _buffer()
    if recent.maxlen:
        recent.append((time.time(), model, messages, options, response, error, _PROGRAM.get() or program))


def _buffer() -> deque[_Record]:
    """The record, resized first when `history_size` changed (the newest exchanges are kept)."""
    global _RECENT
    size = process_settings().history_size
    if size != _RECENT.maxlen:
        _RECENT = deque(_RECENT, maxlen=size)
    return _RECENT


def recent_exchanges(n: int = 1) -> list[Exchange]:
    """The last n exchanges, oldest first."""
    if n <= 0:
        return []
    return [
        Exchange(at, model, messages, dict(options), response, error, program)
        for at, model, messages, options, response, error, program in list(_buffer())[-n:]
    ]


def _content(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return content_text(content)  # each media value as its short description, never its bytes
    return repr(redact(content))


def _arguments(arguments: Any) -> str:
    """Tool-call arguments as JSON (a JSON string as sent, or a mapping), redacted."""
    if isinstance(arguments, str):
        return redact_text(arguments)
    return json.dumps(redact(dict(arguments)), ensure_ascii=False, default=str)


def _exchange_text(exchange: Exchange) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(exchange.at))
    who = f"{exchange.program} -> {exchange.model}" if exchange.program else exchange.model
    out = [f"[{stamp}] {who}\n\n"]
    for message in exchange.messages:
        role = str(message.get("role", "?"))
        name = f" ({message['name']})" if message.get("name") else ""
        out.append(f"{role.capitalize()} message{name}:\n\n")
        body = [redact_text(_content(message))] if _content(message) else []
        for call in message.get("tool_calls") or ():
            body.append(f"-> {call.name} {_arguments(call.arguments)}  [{call.id}]")
        out.append("\n".join(body) + "\n\n")
    if exchange.error is not None:
        out.append("Error:\n\n" + redact_text(exchange.error) + "\n\n")
    elif exchange.response is not None:
        response = exchange.response
        out.append("Response:\n\n")
        body = []
        if response.text:
            body.append(redact_text(response.text))
        if response.fields is not None and not response.text:
            body.append(json.dumps(redact(dict(response.fields)), ensure_ascii=False, default=str))
        for call in response.tool_calls:
            body.append(f"-> {call.name} {_arguments(call.arguments)}  [{call.id}]")
        out.append("\n".join(body) + "\n\n")
        usage = response.usage
        out.append(f"(finish: {response.finish_reason}; tokens in {usage.input_tokens}, out {usage.output_tokens})\n\n")
    return "".join(out)


def inspect_history(n: int = 1, *, file: TextIO | None = None) -> str:
    """Print the last n requests and replies readably (secrets redacted); returns the text too.

    Each exchange: `[time] program -> model`, each message under its role ("System message:"...,
    tool calls as `-> name {json arguments}`), "Response:", then the finish reason and tokens.
    """
    text = "".join(_exchange_text(exchange) for exchange in recent_exchanges(n))
    (file or sys.stdout).write(text)
    return text
