"""An LM request sent inside a journaled run: the journal scope answers it or records it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from imp.models.base import LM, LMResponse, Message
from imp.programs._stream_tap import Tap, streamed_request
from imp.runtime.journal import current_journal_scope

if TYPE_CHECKING:
    from imp.adapters.base import Adapter
    from imp.signature import Signature

__all__ = ["journaled_request"]


async def journaled_request(
    lm: LM,
    messages: list[Message],
    options: Mapping[str, Any],
    tap: Tap | None,
    reads: tuple[Adapter, Signature] | None,
) -> LMResponse:
    """Send one request through the current journal scope. A replayed request is "sent" to an LM that
    answers with the recorded response, streamed the same way when the run is streamed."""
    scope = current_journal_scope.get()
    assert scope is not None

    async def send(target: LM) -> LMResponse:
        if tap is None:
            return await target.request(messages, **options)
        return await streamed_request(tap, target, messages, options, reads)

    sent: dict[str, Any] = {**lm.defaults, **options} if lm.defaults else dict(options)
    response: LMResponse = await scope.exchange(lm, messages, sent, send)
    return response
