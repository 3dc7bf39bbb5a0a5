"""`Recorder`: an `on_event` sink that keeps a run's events, with each LM request's messages if asked."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from imp.exchanges import recent_exchanges
from imp.records import plain
from imp.runtime.events import ModelContent, ModelError, ModelResponse, Payload
from imp.runtime.run import Event

__all__ = ["Recorder"]


@dataclass(slots=True)
class Recorder:
    """Keeps every event it receives, in order; `save(path)` writes them as JSON Lines.

    With `content=True` each answered or failed LM request is followed by a `model_content` event
    holding the messages sent and the reply (redacted and bounded like any event), so the run's
    picture shows them. They are read from the exchange the request recorded just before its
    `model_response` (nothing is awaited in between, so it is that request's own).
    """

    content: bool = False
    events: list[Event] = field(default_factory=list)

    def __call__(self, event: Event) -> None:
        self.events.append(event)
        payload = event.payload
        if self.content and isinstance(payload, ModelResponse | ModelError):
            content = self._content(payload.model or "")
            if content is not None:
                self.events.append(Event(event.seq, event.call_id, event.parent_id, content.kind, event.at, content))

    def _content(self, model: str) -> Payload | None:
        exchanges = recent_exchanges(1)
        if not exchanges:
            return None
        exchange = exchanges[0]
        if exchange.model != model.partition(":")[2]:
            return None
        reply: dict[str, Any] | None = None
        response = exchange.response
        if response is not None:
            reply = {"text": response.text}
            if response.fields is not None:
                reply["fields"] = dict(response.fields)
            if response.tool_calls:
                reply["tool_calls"] = [{"name": c.name, "arguments": dict(c.arguments)} for c in response.tool_calls]
        return ModelContent(plain(list(exchange.messages)), reply).redacted().bounded()

    def save(self, path: str | Path) -> Path:
        """Write the events, one `Event.dump()` per line (`python -m imp.trace` reads it); returns the path."""
        target = Path(path)
        with target.open("w", encoding="utf-8") as out:
            for event in self.events:
                out.write(json.dumps(event.dump(), ensure_ascii=False, default=str) + "\n")
        return target
