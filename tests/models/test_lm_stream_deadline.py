"""A stream that stalls after its first bytes, at the deadline, ends in `DeadlineExceeded`, never a retry."""

from __future__ import annotations

import anyio
import pytest
from fake_provider import FakeProvider, Reply
from lm_constants import FAST_RETRIES

import imp
from imp.models import lm

HI = [{"role": "user", "content": "hi"}]
FIRST = 'data: {"choices":[{"index":0,"delta":{"content":"Par"}}]}\n\n'
REST = 'data: {"choices":[{"index":0,"delta":{"content":"is"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'


def _stalling() -> Reply:
    """The first event at once, then nothing (a server that hung mid-answer) until the client gives up."""
    return Reply(200, pieces=[FIRST, REST], headers={"content-type": "text/event-stream"}, fault="stall_mid_stream")


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("backstop", [0.01, 1.0])
def test_a_stream_stalled_at_the_deadline_raises_deadline_exceeded(
    fake: FakeProvider, backend: str, backstop: float, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whichever fires first, the read timeout capped at the time left or the deadline's own
    scope, the caller sees `DeadlineExceeded` and no second request is sent. (A late backstop is
    what a loaded event loop gives: the read timeout then ends the stream first.)"""
    monkeypatch.setattr("imp.runtime.deadline.BACKSTOP_SECONDS", backstop)
    fake.add(_stalling(), _stalling(), _stalling())
    seen: dict[str, object] = {}

    async def main() -> None:
        client = lm("openai:m", base_url=fake.base_url, retry_policy=FAST_RETRIES, timeout=30.0)
        async with client:
            deltas: list[str] = []
            try:
                with imp.deadline(2.0):  # time enough for the first event to arrive on a loaded machine
                    async for event in client.stream(HI):
                        deltas.append(event.delta)
            except Exception as exc:  # the test looks at what arrived
                seen["error"] = exc
            seen["deltas"] = deltas

    anyio.run(main, backend=backend)
    error = seen["error"]
    assert isinstance(error, imp.DeadlineExceeded), repr(error)
    assert not isinstance(error, imp.LMError)
    assert seen["deltas"] == ["Par"]
    assert fake.aborted.wait(5), "the stalled stream was closed by the client, not left open"
    assert len(fake.requests) == 1, "nothing past the deadline is retried"


def test_a_stream_stalled_before_the_deadline_is_a_retryable_stream_broken(fake: FakeProvider) -> None:
    """Without a deadline the same stall is the provider's failure: `StreamBroken`, retryable."""
    fake.add(_stalling())

    async def main() -> None:
        async with lm("openai:m", base_url=fake.base_url, retry_policy=FAST_RETRIES, timeout=2.0) as client:
            with pytest.raises(imp.StreamBroken) as info:
                async for _ in client.stream(HI):
                    pass
        assert info.value.retryable and info.value.code == "stream_broken"

    anyio.run(main)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_retryable_failure_after_the_deadline_is_deadline_exceeded(
    backend: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A 503 that lands after the deadline (a loaded loop delivers the cancel late) is not handed
    back as a retryable error: it is the cause of a `DeadlineExceeded`."""
    from imp.models.retry import call_with_retries

    monkeypatch.setattr("imp.runtime.deadline.BACKSTOP_SECONDS", 1.0)
    calls: list[int] = []

    async def late_503(number: int) -> None:
        calls.append(number)
        await anyio.sleep(0.15)
        raise imp.LMError("busy", status=503, provider="p")

    async def busy_now(number: int) -> None:
        calls.append(number)
        raise imp.LMError("busy", status=503, provider="p")

    seen: dict[str, BaseException] = {}

    async def main() -> None:
        try:
            with imp.deadline(0.05):
                await call_with_retries(late_503, FAST_RETRIES)
        except imp.DeadlineExceeded as exc:
            seen["late"] = exc
        try:  # with time left, the provider's own error comes back (after its retries)
            await call_with_retries(busy_now, FAST_RETRIES)
        except imp.LMError as exc:
            seen["busy"] = exc

    anyio.run(main, backend=backend)
    assert isinstance(seen["late"].__cause__, imp.ProviderUnavailable)
    assert isinstance(seen["busy"], imp.ProviderUnavailable) and seen["busy"].attempts == 3
    assert calls == [1, 1, 2, 3]
