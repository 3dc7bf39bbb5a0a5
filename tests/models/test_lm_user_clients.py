"""Every way a user may hand imp an HTTP client, and what each does across `imp.call_sync`s (each runs its
own event loop). What works, works; what cannot reaches the user as an `imp.LMError` kind before anything
is sent (or a `TypeError` when the LM is built), never a bare `RuntimeError` from the HTTP library."""

from __future__ import annotations

import json

import anyio
import httpx
import pytest
from fake_provider import FakeProvider, Reply

import imp

ANSWER = {"choices": [{"index": 0, "message": {"role": "assistant", "content": "[[ ## a ## ]]\nyes"}}]}


def _client(kind: str) -> object:
    if kind == "httpx2":
        httpx2 = pytest.importorskip("httpx2")
        return httpx2.AsyncClient()
    return httpx.AsyncClient()


@pytest.mark.parametrize("kind", ["httpx", "httpx2"])
def test_a_function_that_makes_the_client_serves_call_sync_after_call_sync(fake: FakeProvider, kind: str) -> None:
    fake.responder = lambda request: Reply(200, json=ANSWER)
    made: list[object] = []

    def client() -> object:
        made.append(_client(kind))
        return made[-1]

    lm = imp.lm("openai:m", base_url=fake.base_url, http_client=client, max_retries=0)
    program = imp.predict("q -> a", lm=lm)
    assert [imp.call_sync(program, q="x").a for _ in range(3)] == ["yes"] * 3
    assert len(fake.requests) == 3 and len(made) == 3  # one client per event loop
    assert all(type(c).__module__.split(".")[0] == kind for c in made)


@pytest.mark.parametrize("kind", ["httpx", "httpx2"])
def test_a_users_client_from_a_closed_loop_is_refused_before_sending(fake: FakeProvider, kind: str) -> None:
    fake.responder = lambda request: Reply(200, json=ANSWER)
    lm = imp.lm("openai:m", base_url=fake.base_url, http_client=_client(kind))
    program = imp.predict("q -> a", lm=lm)
    assert imp.call_sync(program, q="x").a == "yes"
    for _ in range(2):  # its kept-alive connection belongs to the first call's loop, now closed
        with pytest.raises(imp.LMError) as info:
            imp.call_sync(program, q="x")
        error = info.value
        assert type(error) is imp.LMError and error.code == "http_client" and not error.retryable
        assert "another event loop" in str(error) and "http_client=lambda" in str(error)
    assert len(fake.requests) == 1  # nothing was sent on a connection whose reply would be lost


def test_a_users_client_that_kept_nothing_alive_moves_between_loops(fake: FakeProvider) -> None:
    fake.responder = lambda request: Reply(200, json=ANSWER, headers={"connection": "close"})
    lm = imp.lm("openai:m", base_url=fake.base_url, http_client=httpx.AsyncClient())
    program = imp.predict("q -> a", lm=lm)
    assert [imp.call_sync(program, q="x").a for _ in range(2)] == ["yes", "yes"]


def test_a_mock_transport_client_works_across_loops() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=ANSWER)

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    program = imp.predict("q -> a", lm=imp.lm("openai:m", api_key="sk-x", http_client=client))
    assert imp.call_sync(program, q="x").a == imp.call_sync(program, q="y").a == "yes"


def test_a_closed_client_is_an_lm_error_naming_the_fix(fake: FakeProvider) -> None:
    fake.responder = lambda request: Reply(200, json=ANSWER)

    async def closed() -> httpx.AsyncClient:
        async with httpx.AsyncClient() as client:
            return client

    lm = imp.lm("openai:m", base_url=fake.base_url, http_client=anyio.run(closed))
    with pytest.raises(imp.LMError) as info:
        imp.call_sync(imp.predict("q -> a", lm=lm), q="x")
    error = info.value
    assert "closed" in str(error) and "http_client" in str(error) and not error.retryable
    assert error.code == "http_client" and error.attempts == 1 and not fake.requests


def test_a_client_that_fails_in_its_own_way_is_an_lm_error() -> None:
    def broken(request: httpx.Request) -> httpx.Response:
        raise RuntimeError("the user's transport is broken")

    client = httpx.AsyncClient(transport=httpx.MockTransport(broken))
    lm = imp.lm("openai:m", api_key="sk-x", http_client=client, max_retries=0)
    with pytest.raises(imp.LMError, match="the user's transport is broken"):
        imp.call_sync(imp.predict("q -> a", lm=lm), q="x")


class _OwnError(Exception):
    """What a user's own transport (a signing proxy, a test double) may raise."""


@pytest.mark.parametrize("error", [ValueError("bad header"), _OwnError("signing failed"), KeyError("region")])
@pytest.mark.parametrize("given", ["client", "function"])
def test_whatever_a_users_transport_raises_is_an_lm_error(error: Exception, given: str) -> None:
    def broken(request: httpx.Request) -> httpx.Response:
        raise error

    def make() -> httpx.AsyncClient:
        return httpx.AsyncClient(transport=httpx.MockTransport(broken))

    lm = imp.lm("openai:m", api_key="sk-x", http_client=make() if given == "client" else make, max_retries=2)
    with pytest.raises(imp.LMError) as info:
        imp.call_sync(imp.predict("q -> a", lm=lm), q="x")
    assert info.value.code == "http_client" and type(error).__name__ in str(info.value)
    assert not info.value.retryable and info.value.attempts == 1


def test_the_client_class_itself_makes_one_per_loop(fake: FakeProvider) -> None:
    fake.responder = lambda request: Reply(200, json=ANSWER)
    program = imp.predict("q -> a", lm=imp.lm("openai:m", base_url=fake.base_url, http_client=httpx.AsyncClient))
    assert [imp.call_sync(program, q="x").a for _ in range(2)] == ["yes", "yes"]


def test_a_function_that_makes_no_client_is_a_type_error() -> None:
    lm = imp.lm("openai:m", api_key="sk-x", http_client=lambda: httpx.Client())
    with pytest.raises(TypeError, match="a sync client"):
        imp.call_sync(imp.predict("q -> a", lm=lm), q="x")


@pytest.mark.parametrize(
    ("client", "said"),
    [
        (httpx.Client(), "a sync client"),
        (object(), "builtins.object"),
        ("http://127.0.0.1", "builtins.str"),
    ],
)
def test_what_is_no_async_client_is_refused_when_the_lm_is_built(client: object, said: str) -> None:
    with pytest.raises(TypeError, match=r"http_client is an httpx\.AsyncClient") as info:
        imp.lm("openai:m", api_key="sk-x", http_client=client)
    assert said in str(info.value)


async def test_a_client_made_in_the_loop_and_closed_with_it(fake: FakeProvider) -> None:
    fake.responder = lambda request: Reply(200, json=ANSWER)
    async with httpx.AsyncClient() as client:
        async with imp.lm("openai:m", base_url=fake.base_url, http_client=client) as lm:
            prediction = await imp.call(imp.predict("q -> a", lm=lm), q="x")
        assert not client.is_closed  # imp never closes a client it did not make
    assert prediction.a == "yes" and json.loads(fake.requests[0].raw)["model"] == "m"
