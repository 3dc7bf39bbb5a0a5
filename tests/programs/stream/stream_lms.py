"""LMs for the streaming tests: a scripted LM whose replies stream in chunks of a chosen size."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import anyio

import imp
from imp.models.base import LM, LMResponse, Message, StreamEvent


class ChunkedLM(LM):
    """Streams an inner LM's reply: reasoning, then the text cut into `size`-character deltas."""

    provider = "chunked"

    def __init__(self, inner: LM, size: int = 3, delay: float = 0.0) -> None:
        self.inner = inner
        self.model = inner.model
        self.capabilities = inner.capabilities
        self.size = size
        self.delay = delay
        self.streams = 0
        self.closed = 0
        """Streams that ended before their final event (cancelled or left)."""

    async def request(self, messages: Sequence[Message], **options: Any) -> LMResponse:
        return await self.inner.request(messages, **options)

    async def stream(self, messages: Sequence[Message], **options: Any) -> AsyncIterator[StreamEvent]:
        self.streams += 1
        response = await self.inner.request(messages, **options)
        finished = False
        try:
            if response.reasoning:
                for i in range(0, len(response.reasoning), self.size):
                    yield StreamEvent("reasoning", delta=response.reasoning[i : i + self.size])
            for i in range(0, len(response.text), self.size):
                if self.delay:
                    await anyio.sleep(self.delay)
                yield StreamEvent("text", delta=response.text[i : i + self.size])
            for index, tc in enumerate(response.tool_calls):
                yield StreamEvent("tool_call", index=index, tool_name=tc.name, tool_call_id=tc.id)
            finished = True
            yield StreamEvent("final", response=response)
        finally:
            if not finished:
                self.closed += 1


def scripted(*steps: Any) -> imp.ScriptedLM:
    return imp.ScriptedLM(list(steps), exhausted={"tool_calls": []})
