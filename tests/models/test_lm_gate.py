"""The request gate (`imp.models._gate`): asked before every HTTP attempt, told of every 429's wait hint."""

from __future__ import annotations

import anyio
import pytest
from fake_provider import FakeProvider, Reply, fixture_replies
from imp_backends import both_backends
from lm_constants import FAST_RETRIES, SECRET

from imp.errors import BadRequest
from imp.models import lm
from imp.models._gate import request_gate

HI = [{"role": "user", "content": "hi"}]
THROTTLED = Reply(
    429, json={"error": {"message": "slow down", "code": "rate_limit_exceeded"}}, headers={"retry-after": "0.01"}
)


class Recorder:
    """A gate that lets everything through and writes down what it was asked and told."""

    def __init__(self) -> None:
        self.log: list[tuple[str, object]] = []
        self.open = 0

    async def enter(self) -> object:
        self.open += 1
        self.log.append(("enter", self.open))
        await anyio.lowlevel.checkpoint()
        return len(self.log)

    def leave(self, ticket: object) -> None:
        self.open -= 1
        self.log.append(("leave", ticket))

    def rate_limited(self, retry_after: float | None) -> None:
        self.log.append(("429", retry_after))


@pytest.mark.parametrize("stream", [False, True], ids=["request", "stream"])
@both_backends
async def test_every_attempt_passes_the_gate_and_a_429_is_told(fake: FakeProvider, stream: bool) -> None:
    relative = "llama_cpp/plain.json" if not stream else "llama_cpp/stream_text.sse"
    fake.add(THROTTLED, *fixture_replies(relative))
    gate = Recorder()
    async with lm("openai:gpt-4o", api_key=SECRET, base_url=fake.base_url, retry_policy=FAST_RETRIES) as client:
        token = request_gate.set(gate)
        try:
            if stream:
                async for _ in client.stream(HI):
                    pass
            else:
                await client.request(HI)
        finally:
            request_gate.reset(token)
    assert len(fake.requests) == 2
    # a request's slot is given back when the response is in; a stream's when it is closed
    first = ["enter", "leave", "429"] if not stream else ["enter", "429", "leave"]
    assert [entry[0] for entry in gate.log] == [*first, "enter", "leave"]
    assert ("429", 0.01) in gate.log
    assert gate.open == 0  # every slot given back, the streamed one once the stream closed


@both_backends
async def test_a_failed_request_gives_its_slot_back_and_no_gate_means_no_calls(fake: FakeProvider) -> None:
    fake.add(Reply(400, json={"error": {"message": "bad"}}), *fixture_replies("llama_cpp/plain.json"))
    gate = Recorder()
    async with lm("openai:gpt-4o", api_key=SECRET, base_url=fake.base_url, retry_policy=FAST_RETRIES) as client:
        token = request_gate.set(gate)
        try:
            with pytest.raises(BadRequest):
                await client.request(HI)
        finally:
            request_gate.reset(token)
        assert gate.open == 0 and [e[0] for e in gate.log] == ["enter", "leave"]
        await client.request(HI)  # outside the block: the gate is not asked
    assert len(gate.log) == 2


async def test_the_client_is_made_before_the_gate_lets_a_request_through(fake: FakeProvider) -> None:
    # Making a client loads the TLS certificates (a few hundred ms): done after a shared rate limit
    # granted the start, it delayed the first requests until they reached the server together.
    import httpx

    fake.add(*fixture_replies("llama_cpp/plain.json"))
    gate = Recorder()

    def make_client() -> httpx.AsyncClient:
        gate.log.append(("client", None))
        return httpx.AsyncClient()

    async with lm("openai:gpt-4o", api_key=SECRET, base_url=fake.base_url, http_client=make_client) as client:
        token = request_gate.set(gate)
        try:
            await client.request(HI)
        finally:
            request_gate.reset(token)
    assert [entry[0] for entry in gate.log] == ["client", "enter", "leave"]


def test_a_client_of_another_event_loop_is_refused_before_the_gate_is_asked(fake: FakeProvider) -> None:
    import httpx

    from imp.errors import LMError

    fake.add(*fixture_replies("llama_cpp/plain.json"), *fixture_replies("llama_cpp/plain.json"))
    gate = Recorder()
    own = httpx.AsyncClient()
    client = lm("openai:gpt-4o", api_key=SECRET, base_url=fake.base_url, http_client=own)
    anyio.run(client.request, HI)  # keeps a connection of this (now closed) loop alive

    async def gated() -> None:
        token = request_gate.set(gate)
        try:
            await client.request(HI)
        finally:
            request_gate.reset(token)

    with pytest.raises(LMError, match="another event loop"):
        anyio.run(gated)
    assert gate.log == [] and len(fake.requests) == 1
