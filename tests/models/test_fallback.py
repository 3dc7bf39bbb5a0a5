"""`imp.fallback` and `imp.round_robin`: moving to the next provider on the failures that are the
provider's, never on the request's own; not sitting out a long Retry-After; a cool-down; streams that
fall back only before their first delta; usage and the answering model recorded.

The failures pydantic-ai's `FallbackModel` users reported are cases here: a failed connection, a 200
that is no completion, an error event in a 200 stream before any content, a 503 "high demand", and a
chain whose members all failed (the last failure raised by its own class, not a group).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import anyio
import pytest
from fake_provider import FakeProvider, Reply, chat_completion, sse_chunks, stream_reply
from lm_constants import FAST_RETRIES

import imp
from imp.models._fallback import MOVES_ON, FallbackLM
from imp.runtime.budget import budget_scope

HI = [{"role": "user", "content": "hi"}]
JSON = {"content-type": "application/json"}


@pytest.fixture
def second() -> Iterator[FakeProvider]:
    server = FakeProvider().start()
    try:
        yield server
    finally:
        server.stop()


def _client(server: FakeProvider, name: str, **settings: Any) -> imp.LM:
    settings.setdefault("retry_policy", FAST_RETRIES)
    return imp.lm(f"openai:{name}", base_url=server.base_url, api_key="k", **settings)


def _error(status: int, code: str, message: str = "refused", kind: str = "invalid_request_error") -> Reply:
    return Reply(status, json={"error": {"message": message, "type": kind, "code": code}}, headers=JSON)


def _filtered() -> Reply:
    body = chat_completion("")
    body["choices"][0]["finish_reason"] = "content_filter"
    return Reply(json=body)


FAILURES: dict[str, tuple[Callable[[], Reply], type[imp.LMError], bool]] = {
    "rate limited": (lambda: _error(429, "rate_limit_exceeded", "slow down", "requests"), imp.RateLimited, True),
    "quota": (
        lambda: _error(429, "insufficient_quota", "You exceeded your current quota", "insufficient_quota"),
        imp.QuotaExceeded,
        True,
    ),
    "payment": (lambda: _error(402, "payment_required", "top up"), imp.QuotaExceeded, True),
    "unavailable": (lambda: _error(503, "unavailable", "down", "server_error"), imp.ProviderUnavailable, True),
    "high demand": (
        lambda: Reply(
            503,
            json={
                "error": {
                    "code": 503,
                    "message": "This model is currently experiencing high demand.",
                    "status": "UNAVAILABLE",
                }
            },
            headers=JSON,
        ),
        imp.ProviderUnavailable,
        True,
    ),
    "error event before any content": (
        lambda: Reply(
            headers={"content-type": "text/event-stream"},
            pieces=[b'data: {"error": {"message": "Overloaded", "type": "overloaded_error", "code": 529}}\n\n'],
        ),
        imp.LMError,
        True,
    ),
    "overloaded": (lambda: _error(529, "overloaded", "Overloaded", "overloaded_error"), imp.ProviderUnavailable, True),
    "connection reset": (lambda: Reply(fault="reset"), imp.ConnectionFailed, True),
    "key refused": (lambda: _error(401, "invalid_api_key", "Incorrect API key"), imp.AuthenticationError, True),
    "not a completion": (lambda: Reply(200, body=b'{"id": "cut", "choi', headers=JSON), imp.InvalidResponse, True),
    "bad request": (lambda: _error(400, "invalid_value", "temperature is too high"), imp.BadRequest, False),
    "unknown model": (lambda: _error(404, "model_not_found", "The model does not exist"), imp.NotFound, False),
    "context window": (
        lambda: _error(400, "context_length_exceeded", "This model's maximum context length is 8192 tokens."),
        imp.ContextWindowExceeded,
        False,
    ),
    "content filter": (_filtered, imp.ContentFiltered, False),
}


@pytest.mark.parametrize("kind", list(FAILURES))
async def test_each_failure_moves_on_or_not(kind: str, fake: FakeProvider, second: FakeProvider) -> None:
    make, error_type, moves_on = FAILURES[kind]
    fake.responder = lambda received: make()
    second.add(Reply(json=chat_completion("from b")))
    chain = imp.fallback(_client(fake, "a"), _client(second, "b"))
    if moves_on:
        response = await chain.request(HI)
        assert response.text == "from b" and response.answered_by == "openai:b"
    else:
        with pytest.raises(error_type):
            await chain.request(HI)
        assert second.requests == [], "the next provider would refuse the request too: it is not asked"
    await chain.aclose()


def test_the_default_kinds_are_the_providers_failures_never_the_requests() -> None:
    moves = imp.models._fallback.MOVES_ON
    assert not any(issubclass(k, imp.BadRequest | imp.ContentFiltered) for k in moves)
    assert {imp.RateLimited, imp.QuotaExceeded, imp.ProviderUnavailable, imp.ConnectionFailed} <= set(moves)


async def test_the_kinds_are_configurable(fake: FakeProvider, second: FakeProvider) -> None:
    fake.responder = lambda received: _error(404, "model_not_found", "no such model")
    second.add(Reply(json=chat_completion("from b")))
    chain = imp.fallback(_client(fake, "a"), _client(second, "b"), moves_on=(imp.NotFound,))
    assert (await chain.request(HI)).text == "from b"
    await chain.aclose()


async def test_a_retry_after_longer_than_the_bound_moves_on_at_once(fake: FakeProvider, second: FakeProvider) -> None:
    fake.responder = lambda received: Reply(
        429,
        json={"error": {"message": "slow down", "code": "rate_limit_exceeded"}},
        headers={**JSON, "retry-after": "30"},
    )
    second.add(Reply(json=chat_completion("from b")))
    chain = imp.fallback(_client(fake, "a", max_retries=3), _client(second, "b"), max_wait=1.0)
    started = time.monotonic()
    assert (await chain.request(HI)).text == "from b"
    assert time.monotonic() - started < 1.0
    assert len(fake.requests) == 1, "the 30 s wait was not sat out, nor retried"
    await chain.aclose()


async def test_a_retry_after_shorter_than_the_bound_is_waited_for_on_the_same_provider(
    fake: FakeProvider, second: FakeProvider
) -> None:
    fake.add(
        Reply(
            429,
            json={"error": {"message": "slow", "code": "rate_limit_exceeded"}},
            headers={**JSON, "retry-after": "0.2"},
        ),
        Reply(json=chat_completion("from a")),
    )
    chain = imp.fallback(_client(fake, "a", max_retries=3), _client(second, "b"), max_wait=1.0)
    started = time.monotonic()
    assert (await chain.request(HI)).text == "from a"
    assert time.monotonic() - started >= 0.2 and len(fake.requests) == 2 and second.requests == []
    await chain.aclose()


async def test_a_failing_provider_is_passed_over_for_its_cooldown(
    fake: FakeProvider, second: FakeProvider, monkeypatch: pytest.MonkeyPatch
) -> None:
    now = [1000.0]  # the chain's clock, moved by hand: a loaded machine cannot make the test late
    monkeypatch.setattr(imp.models._fallback.time, "monotonic", lambda: now[0])
    fake.add(_error(503, "unavailable", "down", "server_error"), Reply(json=chat_completion("a is back")))
    second.responder = lambda received: Reply(json=chat_completion("from b"))
    chain = imp.fallback(_client(fake, "a", max_retries=0), _client(second, "b"), cooldown=30)
    assert (await chain.request(HI)).text == "from b"
    now[0] += 29.9
    assert (await chain.request(HI)).text == "from b"
    assert len(fake.requests) == 1, "a cooling provider is not asked"
    now[0] += 0.2
    assert (await chain.request(HI)).text == "a is back"
    await chain.aclose()


async def test_a_longer_retry_after_lengthens_the_cooldown(fake: FakeProvider, second: FakeProvider) -> None:
    fake.responder = lambda received: Reply(
        429, json={"error": {"message": "slow", "code": "rate_limit_exceeded"}}, headers={**JSON, "retry-after": "60"}
    )
    second.responder = lambda received: Reply(json=chat_completion("from b"))
    chain = imp.fallback(_client(fake, "a"), _client(second, "b"), cooldown=0.01)
    assert isinstance(chain, FallbackLM)
    await chain.request(HI)
    await anyio.sleep(0.05)  # past the cool-down, not past the Retry-After's 60 s
    await chain.request(HI)
    assert len(fake.requests) == 1
    assert chain.order() == [1, 0]
    await chain.aclose()


async def test_when_every_member_cools_down_they_are_still_tried(fake: FakeProvider, second: FakeProvider) -> None:
    fake.add(_error(503, "x", "down", "server_error"), Reply(json=chat_completion("a again")))
    second.add(_error(503, "x", "down", "server_error"))
    chain = imp.fallback(_client(fake, "a", max_retries=0), _client(second, "b", max_retries=0), cooldown=60)
    with pytest.raises(imp.ProviderUnavailable):
        await chain.request(HI)
    assert (await chain.request(HI)).text == "a again"
    await chain.aclose()


async def test_when_every_member_fails_the_last_failure_is_raised_with_the_others_as_notes(
    fake: FakeProvider, second: FakeProvider
) -> None:
    fake.add(_error(503, "x", "a is down", "server_error"))
    second.add(_error(429, "insufficient_quota", "b has no quota", "insufficient_quota"))
    chain = imp.fallback(_client(fake, "a", max_retries=0), _client(second, "b", max_retries=0))
    with pytest.raises(imp.QuotaExceeded) as caught:
        await chain.request(HI)
    notes = "\n".join(caught.value.__notes__)
    assert "openai:a failed first: ProviderUnavailable" in notes and "every member" in notes
    await chain.aclose()


async def test_a_stream_falls_back_before_its_first_delta(fake: FakeProvider, second: FakeProvider) -> None:
    fake.add(_error(503, "x", "down", "server_error"))
    second.add(stream_reply("from b", size=2))
    chain = imp.fallback(_client(fake, "a", max_retries=0), _client(second, "b"))
    events = [e async for e in chain.stream(HI)]
    assert "".join(e.delta for e in events if e.kind == "text") == "from b"
    assert events[-1].response is not None and events[-1].response.answered_by == "openai:b"
    await chain.aclose()


async def test_a_stream_that_breaks_after_its_first_delta_does_not_fall_back(
    fake: FakeProvider, second: FakeProvider
) -> None:
    pieces = sse_chunks("hello there, a long reply", 3)
    fake.add(Reply(headers={"content-type": "text/event-stream"}, pieces=pieces[:3], fault="reset_mid_stream"))
    second.add(stream_reply("from b"))
    chain = imp.fallback(_client(fake, "a", max_retries=0), _client(second, "b"))
    seen: list[str] = []
    with pytest.raises((imp.StreamBroken, imp.ConnectionFailed)):
        async for event in chain.stream(HI):
            seen.append(event.delta)
    assert "".join(seen).startswith("hel") and second.requests == []
    await chain.aclose()


async def test_round_robin_starts_each_request_at_the_next_member(fake: FakeProvider, second: FakeProvider) -> None:
    fake.responder = lambda received: Reply(json=chat_completion("a"))
    second.responder = lambda received: Reply(json=chat_completion("b"))
    pool = imp.round_robin(_client(fake, "m"), _client(second, "m"))
    answers = [(await pool.request(HI)).text for _ in range(4)]
    assert answers == ["a", "b", "a", "b"]
    await pool.aclose()


async def test_round_robin_moves_on_as_a_fallback_does(fake: FakeProvider, second: FakeProvider) -> None:
    fake.responder = lambda received: _error(429, "insufficient_quota", "no quota", "insufficient_quota")
    second.responder = lambda received: Reply(json=chat_completion("b"))
    pool = imp.round_robin(_client(fake, "m"), _client(second, "m"))
    assert [(await pool.request(HI)).text for _ in range(3)] == ["b", "b", "b"]
    assert len(fake.requests) == 1
    await pool.aclose()


async def test_the_prediction_says_which_member_answered_and_usage_is_per_member(
    fake: FakeProvider, second: FakeProvider
) -> None:
    fake.add(_error(503, "x", "down", "server_error"))
    second.add(Reply(json=chat_completion("[[ ## answer ## ]]\nParis", prompt=11, completion=2)))
    chain = imp.fallback(_client(fake, "a", max_retries=0), _client(second, "b"))
    prediction = await imp.call(imp.predict("question -> answer", lm=chain), question="capital of France?")
    assert prediction.answer == "Paris" and prediction.metadata.model == "openai:b"
    assert set(prediction.metadata.usage_by_model or {}) == {"openai:b"}
    assert prediction.metadata.usage is not None and prediction.metadata.usage.input_tokens == 11
    await chain.aclose()


async def test_an_evaluation_keeps_running_when_the_first_provider_starts_returning_429s(
    fake: FakeProvider, second: FakeProvider
) -> None:
    answered = 0

    def first(received: Any) -> Reply:
        nonlocal answered
        answered += 1
        if answered > 5:  # part way through, the first provider runs out of rate
            return Reply(
                429,
                json={"error": {"message": "slow", "code": "rate_limit_exceeded"}},
                headers={**JSON, "retry-after": "20"},
            )
        return Reply(json=chat_completion("[[ ## answer ## ]]\nyes"))

    fake.responder = first
    second.responder = lambda received: Reply(json=chat_completion("[[ ## answer ## ]]\nyes"))
    chain = imp.fallback(_client(fake, "a"), _client(second, "b"))
    program = imp.predict("question -> answer", lm=chain)
    devset = [imp.Example(question=f"q{i}", answer="yes").with_inputs("question") for i in range(30)]
    report = await imp.evaluate(program, devset, imp.exact_match, concurrency=4, progress=False)
    assert report.score == 1.0 and not report.errors
    assert set(report.usage_by_model) == {"openai:a", "openai:b"}
    assert report.usage_by_model["openai:a"].requests == 5
    await chain.aclose()


async def test_a_dollar_budget_needs_every_members_price_before_anything_is_sent(
    fake: FakeProvider, second: FakeProvider
) -> None:
    priced = _client(fake, "a", prices=imp.models.Prices(input=1, output=2))
    chain = imp.fallback(priced, _client(second, "local-model"))
    with budget_scope(imp.Budget(usd=1.0)), pytest.raises(ValueError, match="openai:local-model"):
        await chain.request(HI)
    assert fake.requests == [] and second.requests == []
    await chain.aclose()


def test_a_chain_is_checked_when_it_is_made() -> None:
    lm = imp.ScriptedLM([])
    with pytest.raises(ValueError, match="two LMs"):
        imp.fallback(lm)
    with pytest.raises(TypeError, match="member 1"):
        imp.fallback(lm, "openai:gpt-4o")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="moves_on"):
        imp.fallback(lm, lm, moves_on=("RateLimited",))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="max_wait"):
        imp.fallback(lm, lm, max_wait=-1)


def test_the_chain_offers_what_every_member_can_take() -> None:
    strict = imp.ScriptedLM([], response_format="json_schema")
    loose = imp.ScriptedLM([], response_format="none", tool_calling=False)
    caps = imp.fallback(strict, loose).capabilities
    assert caps.response_format == "none" and caps.tool_calling is False


async def test_a_stream_whose_first_event_is_an_error_falls_back(fake: FakeProvider, second: FakeProvider) -> None:
    error_event = b'data: {"error": {"message": "Overloaded", "type": "overloaded_error", "code": 529}}\n\n'
    fake.responder = lambda received: Reply(headers={"content-type": "text/event-stream"}, pieces=[error_event])
    second.add(stream_reply("from b", size=2))
    chain = imp.fallback(_client(fake, "a", max_retries=0), _client(second, "b"))
    events = [e async for e in chain.stream(HI)]
    assert "".join(e.delta for e in events if e.kind == "text") == "from b"
    await chain.aclose()


def _check(prediction: imp.Prediction) -> None:
    """A validator that accepts every answer."""


@pytest.mark.parametrize("way", ["call", "call_sync", "stream"])
@pytest.mark.parametrize(
    "options", [{}, {"validate": _check}, {"max_retries": 1}], ids=["plain", "validate", "retries"]
)
def test_every_predict_says_which_member_answered(way: str, options: dict[str, Any]) -> None:
    """`prediction.metadata.model` names the member that answered on every path of a predict: with a
    validator or re-asks as without, streamed as called, sync as async."""
    down = imp.ScriptedLM([imp.ProviderUnavailable("overloaded", status=529)], model="primary")
    backup = imp.ScriptedLM(["[[ ## answer ## ]]\nParis"], model="backup")
    program = imp.predict("question -> answer", lm=imp.fallback(down, backup), **options)

    async def called() -> imp.Prediction:
        if way == "call":
            return await imp.call(program, question="Capital of France?")
        async for part in imp.stream(program, question="Capital of France?"):
            if part.kind == "final":
                return part.prediction
        raise AssertionError("the stream ended without its final part")

    prediction = imp.call_sync(program, question="Capital of France?") if way == "call_sync" else anyio.run(called)
    assert prediction.answer == "Paris" and prediction.metadata.model == "scripted:backup"
    assert list(prediction.metadata.usage_by_model or {}) == ["scripted:backup"]


def test_counting_tokens_does_not_move_a_round_robin_on() -> None:
    """Each request starts at the next member in turn; a token count is no request, so it counts with the
    member the next request goes to and leaves the turn where it was."""
    keys = [imp.ScriptedLM(["[[ ## answer ## ]]\nok"] * 4, model=f"key-{i}") for i in range(2)]
    pool = imp.round_robin(*keys)
    qa = imp.predict("question -> answer", lm=pool)
    answered = []
    for _ in range(4):
        anyio.run(lambda: pool.count_tokens(HI))
        answered.append(imp.call_sync(qa, question="?").metadata.model)
    assert answered == ["scripted:key-0", "scripted:key-1", "scripted:key-0", "scripted:key-1"]


@pytest.mark.parametrize("how", ["request", "stream"])
async def test_moves_on_may_name_any_exception_class(how: str) -> None:
    """`moves_on=` changes the list, and takes any exception class: a chain told to move on for
    `imp.MediaRefused` goes to the member that takes the medium (the refusal was made before sending)."""

    def text_only(messages: list[dict[str, Any]], options: dict[str, Any]) -> str:
        raise imp.MediaRefused("takes no audio", provider="scripted", origin="the input `clip`")

    refusing = imp.StaticLM(text_only, model="text-only")
    listening = imp.ScriptedLM(["[[ ## transcript ## ]]\nhello"], model="audio")
    chain = imp.fallback(refusing, listening, moves_on=(*MOVES_ON, imp.MediaRefused))
    if how == "request":
        response = await chain.request(HI)
    else:
        events = [event async for event in chain.stream(HI)]
        response = events[-1].response
    assert response is not None and response.answered_by == "scripted:audio"
    with pytest.raises(imp.MediaRefused):  # not named: raised as itself
        await imp.fallback(imp.StaticLM(text_only), listening).request(HI)
