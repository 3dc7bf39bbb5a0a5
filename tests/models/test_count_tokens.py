"""`await lm.count_tokens(messages)`: Anthropic's counting endpoint, a local server's tokenizer
(llama.cpp's `/apply-template` and `/tokenize`, llama-cpp-python's `/extras/tokenize/count`), else an
estimate marked as such; and a request that cannot fit a known context window refused before sending."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_provider import FakeProvider, Received, Reply, chat_completion

import imp
from imp.models._tokens import tokens_at_least, tokens_at_most

HI = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "How many tokens is this?"}]
JSON = {"content-type": "application/json"}
NOT_FOUND = Reply(404, json={"detail": "Not Found"}, headers=JSON)


def _anthropic(fake: FakeProvider, **settings: Any) -> imp.LM:
    return imp.lm("anthropic:claude-sonnet-4-5", base_url=fake.base_url, api_key="sk-ant-test", **settings)


def _local(fake: FakeProvider, **settings: Any) -> imp.LM:
    return imp.lm("openai:local-model", base_url=fake.base_url, **settings)


async def test_anthropic_counts_with_its_endpoint_and_its_documented_shapes(fake: FakeProvider) -> None:
    fake.add(Reply(json={"input_tokens": 42}, headers=JSON))
    lm = _anthropic(fake)
    tools = [
        {
            "type": "function",
            "function": {"name": "lookup", "description": "Look up.", "parameters": {"type": "object"}},
        }
    ]
    counted = await lm.count_tokens(HI, tools=tools, max_tokens=500)
    assert counted == imp.TokenCount(42, "provider", exact=True) and int(counted) == 42
    (received,) = fake.requests
    assert received.path == "/v1/messages/count_tokens"
    assert received.headers.get("x-api-key") == "sk-ant-test" and received.headers.get("anthropic-version")
    body = received.json
    assert body["model"] == "claude-sonnet-4-5"
    assert body["system"][0]["text"] == "Be brief."
    (message,) = body["messages"]
    assert message["role"] == "user" and message["content"][0]["text"] == "How many tokens is this?"
    assert body["tools"][0]["name"] == "lookup" and "input_schema" in body["tools"][0]
    assert "max_tokens" not in body and "stream" not in body  # the endpoint takes neither
    await lm.aclose()


async def test_anthropic_without_its_endpoint_gives_an_estimate_marked_as_one(fake: FakeProvider) -> None:
    fake.add(NOT_FOUND)
    lm = _anthropic(fake)
    counted = await lm.count_tokens(HI)
    assert counted.method == "estimate" and counted.exact is False and counted.input_tokens > 0
    await lm.aclose()


async def test_a_refused_key_is_raised_not_estimated(fake: FakeProvider) -> None:
    fake.add(
        Reply(
            401,
            json={"type": "error", "error": {"type": "authentication_error", "message": "invalid x-api-key"}},
            headers=JSON,
        )
    )
    lm = _anthropic(fake)
    with pytest.raises(imp.AuthenticationError):
        await lm.count_tokens(HI)
    await lm.aclose()


def _llama_cpp(received: Received) -> Reply:
    if received.path == "/apply-template":
        messages = received.json["messages"]
        prompt = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
        return Reply(json={"prompt": prompt + "<|im_start|>assistant\n"}, headers=JSON)
    if received.path == "/tokenize":
        return Reply(json={"tokens": list(range(len(received.json["content"].split())))}, headers=JSON)
    return NOT_FOUND


async def test_llama_cpp_renders_the_template_and_tokenizes_it_exactly(fake: FakeProvider) -> None:
    fake.responder = _llama_cpp
    lm = _local(fake)
    counted = await lm.count_tokens(HI)
    assert counted.method == "tokenizer" and counted.exact is True
    paths = [r.path for r in fake.requests]
    assert paths == ["/apply-template", "/tokenize"]
    template = fake.requests[0].json
    assert template["messages"][0] == {"role": "system", "content": "Be brief."}
    rendered = fake.requests[1].json["content"]
    assert counted.input_tokens == len(rendered.split())
    await lm.count_tokens(HI)
    assert [r.path for r in fake.requests[2:]] == ["/apply-template", "/tokenize"]
    await lm.aclose()


def _llama_cpp_python(received: Received) -> Reply:
    if received.path == "/extras/tokenize/count":
        return Reply(json={"count": len(received.json["input"].split())}, headers=JSON)
    return NOT_FOUND


async def test_llama_cpp_python_counts_the_text_with_its_tokenizer_and_says_the_template_is_estimated(
    fake: FakeProvider,
) -> None:
    fake.responder = _llama_cpp_python
    lm = _local(fake)
    counted = await lm.count_tokens(HI)
    assert counted.method == "tokenizer" and counted.exact is False
    words = len(["Be", "brief.", "How", "many", "tokens", "is", "this?"])
    assert counted.input_tokens > words
    assert [r.path for r in fake.requests] == ["/apply-template", "/extras/tokenize/count"]
    await lm.count_tokens(HI)  # the server's kind is remembered: one request
    assert [r.path for r in fake.requests[2:]] == ["/extras/tokenize/count"]
    await lm.aclose()


async def test_a_server_without_a_tokenizer_is_asked_once_then_estimated(fake: FakeProvider) -> None:
    fake.responder = lambda received: NOT_FOUND
    lm = _local(fake)
    assert (await lm.count_tokens(HI)).method == "estimate"
    asked = len(fake.requests)
    assert (await lm.count_tokens(HI)).method == "estimate"
    assert len(fake.requests) == asked
    await lm.aclose()


async def test_openais_own_service_and_other_lms_estimate_without_sending() -> None:
    openai = imp.lm("openai:gpt-4o-mini", api_key="sk-test")
    for lm in (openai, imp.ScriptedLM([])):
        counted = await lm.count_tokens(HI)
        assert counted.method == "estimate" and not counted.exact
        assert 8 <= counted.input_tokens <= 30
    await openai.aclose()


def test_the_bounds_hold_around_the_estimate() -> None:
    text = "The quick brown fox jumps over the lazy dog. " * 50
    messages = [{"role": "user", "content": text}]
    assert tokens_at_least(messages, {}) <= len(text.split()) <= tokens_at_most(messages, {})


# --- context windows ---------------------------------------------------------------------------


async def test_a_request_that_cannot_fit_a_known_window_is_refused_before_sending(fake: FakeProvider) -> None:
    lm = _local(fake, context_window=100)
    long = [{"role": "user", "content": "word " * 400}]
    with pytest.raises(imp.ContextWindowExceeded, match="context window of 100"):
        await lm.request(long)
    assert fake.requests == []
    await lm.aclose()


async def test_max_tokens_counts_against_the_window(fake: FakeProvider) -> None:
    fake.responder = lambda received: (
        NOT_FOUND if received.path != "/v1/chat/completions" else Reply(json=chat_completion("ok"))
    )
    lm = _local(fake, context_window=1_000)
    prompt = [{"role": "user", "content": "word " * 100}]
    await lm.request(prompt, max_tokens=100)
    with pytest.raises(imp.ContextWindowExceeded, match="max_tokens=990"):
        await lm.request(prompt, max_tokens=990)
    await lm.aclose()


async def test_near_the_window_an_exact_count_decides(fake: FakeProvider) -> None:
    counts = iter([300, 90])

    def server(received: Received) -> Reply:
        if received.path == "/apply-template":
            return Reply(json={"prompt": "rendered"}, headers=JSON)
        if received.path == "/tokenize":
            return Reply(json={"tokens": [0] * next(counts)}, headers=JSON)
        return Reply(json=chat_completion("ok"))

    fake.responder = server
    lm = _local(fake, context_window=100)
    prompt = [{"role": "user", "content": "short words here " * 20}]  # 60 words, 340 bytes: near the window
    with pytest.raises(imp.ContextWindowExceeded, match="holds 300 input tokens"):
        await lm.request(prompt)
    assert [r.path for r in fake.requests] == ["/apply-template", "/tokenize"]
    await lm.request(prompt)  # counted at 90: it fits, and is sent
    assert fake.requests[-1].path == "/v1/chat/completions"
    await lm.aclose()


def test_the_window_comes_from_the_table_on_the_providers_own_service_or_from_the_client() -> None:
    assert imp.lm("openai:gpt-4o-mini-2024-07-18", api_key="k").context_window == 128_000
    assert imp.lm("anthropic:claude-3-5-haiku-latest", api_key="k").context_window == 200_000
    assert imp.lm("openai:gpt-4o", api_key="k", base_url="http://127.0.0.1:1/v1").context_window is None
    assert imp.lm("openai:x", api_key="k", base_url="http://127.0.0.1:1/v1", context_window=8192).context_window == 8192
    with pytest.raises(ValueError, match="context_window"):
        imp.lm("openai:x", api_key="k", context_window=0)


def test_every_table_entry_is_priced_sourced_and_dated() -> None:
    from imp.models._catalog import CARDS, READ_ON

    assert READ_ON == "2026-12-05"
    for key, card in CARDS.items():
        assert card.prices.input > 0 and card.prices.output >= card.prices.input, key
        assert card.source.startswith("https://"), key
        assert card.context_window and card.max_output and card.max_output <= card.context_window, key
    json.dumps({k: c.prices.dump() for k, c in CARDS.items()})
