"""The clients run under trio too (anyio only, no asyncio-specific calls)."""

from __future__ import annotations

import anyio
from fake_provider import FakeProvider, Reply, fixture_replies

from imp.errors import DeadlineExceeded
from imp.models import lm
from imp.runtime.deadline import deadline

HI = [{"role": "user", "content": "hi"}]


def test_request_stream_retry_and_deadline_under_trio(fake: FakeProvider) -> None:
    fake.add(Reply(503, json={"error": {"message": "busy"}}), *fixture_replies("llama_cpp/plain.json"))
    fake.add(*fixture_replies("anthropic/stream_thinking.json"))
    fake.add(Reply(200, json={"choices": []}, delay=2.0))
    outcome: dict[str, object] = {}

    async def main() -> None:
        from imp.models.retry import RetryPolicy

        fast = RetryPolicy(initial_backoff=0.001, jitter=0.0)
        async with lm("openai:m", base_url=fake.base_url, retry_policy=fast) as client:
            outcome["text"] = (await client.request(HI)).text
        async with lm("anthropic:c", api_key="k", base_url=fake.base_url) as client:
            events = [e async for e in client.stream(HI)]
            outcome["final"] = events[-1].kind
        async with lm("openai:m", base_url=fake.base_url) as client:
            try:
                with deadline(0.2):
                    await client.request(HI)
            except DeadlineExceeded:
                outcome["deadline"] = True

    anyio.run(main, backend="trio")
    assert outcome == {"text": "Your friend,\n#BridgettoLemmage", "final": "final", "deadline": True}
