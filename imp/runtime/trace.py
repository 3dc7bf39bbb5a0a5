"""A bounded record of recent LM exchanges, printed (redacted) by `imp.inspect_history`."""

from __future__ import annotations

import sys
import time
from collections import deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TextIO

from imp._redact import redact, redact_text
from imp.lm.base import LMResponse, Message
from imp.settings import process_settings

__all__ = ["Exchange", "inspect_history", "record_exchange", "recent_exchanges"]


@dataclass(frozen=True, slots=True)
class Exchange:
    """One request and its reply (or error), as sent."""

    at: float
    model: str
    messages: Sequence[Message]
    options: dict[str, Any]
    response: LMResponse | None
    error: str | None = None


type _Record = tuple[float, str, Sequence[Message], Mapping[str, Any], LMResponse | None, str | None]
# Raw tuples: recording is on every LM request's path, reading (inspect_history) is rare.
_RECENT: deque[_Record] = deque(maxlen=process_settings().history_size)


def record_exchange(
    model: str,
    messages: Sequence[Message],
    options: Mapping[str, Any],
    response: LMResponse | None,
    error: str | None = None,
) -> None:
    """Keep one exchange; past `history_size` (see `imp.configure`) the oldest drop out, and 0 keeps
    none. `options` is kept as given, not copied."""
    recent = _buffer()
    if recent.maxlen:
        recent.append((time.time(), model, messages, options, response, error))


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
        Exchange(at, model, messages, dict(options), response, error)
        for at, model, messages, options, response, error in list(_buffer())[-n:]
    ]


def _content(message: Message) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return repr(redact(content))


def inspect_history(n: int = 1, *, file: TextIO | None = None) -> str:
    """Print the last n requests and replies readably (secrets redacted); returns the text too."""
    out: list[str] = []
    for exchange in recent_exchanges(n):
        stamp = time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(exchange.at))
        out.append(f"\x1b[34m[{stamp}] {exchange.model}\x1b[0m\n")
        for message in exchange.messages:
            role = str(message.get("role", "?"))
            name = f" ({message['name']})" if message.get("name") else ""
            out.append(f"\x1b[31m{role.capitalize()} message{name}:\x1b[0m\n")
            out.append(redact_text(_content(message)) + "\n")
            for call in message.get("tool_calls") or ():
                fn = call.get("function", {})
                out.append(
                    f"  -> tool call {fn.get('name')}({redact_text(str(fn.get('arguments')))}) [{call.get('id')}]\n"
                )
            out.append("\n")
        if exchange.error is not None:
            out.append("\x1b[31mError:\x1b[0m\n" + redact_text(exchange.error) + "\n\n")
        elif exchange.response is not None:
            response = exchange.response
            out.append("\x1b[32mResponse:\x1b[0m\n")
            if response.text:
                out.append(redact_text(response.text) + "\n")
            if response.fields is not None and not response.text:
                out.append(redact_text(repr(redact(dict(response.fields)))) + "\n")
            for call in response.tool_calls:
                out.append(
                    f"  -> tool call {call.name}({redact_text(repr(redact(dict(call.arguments))))}) [{call.id}]\n"
                )
            usage = response.usage
            out.append(
                f"(finish: {response.finish_reason}; tokens in {usage.input_tokens}, out {usage.output_tokens})\n\n"
            )
    text = "".join(out)
    (file or sys.stdout).write(text)
    return text
