"""A request to a provider's own service without a key is refused before it is sent, naming the fix."""

from __future__ import annotations

import httpx
import pytest

import imp

PROVIDERS = [
    ("openai:gpt-4o", "OPENAI_API_KEY"),
    ("openai-responses:gpt-5.4-mini", "OPENAI_API_KEY"),
    ("anthropic:claude-sonnet-4-5", "ANTHROPIC_API_KEY"),
    ("openrouter:openai/gpt-4o", "OPENROUTER_API_KEY"),
]


@pytest.fixture(autouse=True)
def _no_keys(monkeypatch: pytest.MonkeyPatch) -> None:
    for _, env in PROVIDERS:
        monkeypatch.delenv(env, raising=False)


def _ask(lm: imp.LM) -> BaseException:
    with pytest.raises(imp.LMError) as caught:
        imp.call_sync(imp.predict("q -> a", lm=lm), q="x")
    return caught.value


@pytest.mark.parametrize(("model", "env"), PROVIDERS)
def test_no_key_for_the_providers_own_service_is_refused_before_sending(model: str, env: str) -> None:
    error = _ask(imp.lm(model, max_retries=0))
    assert isinstance(error, imp.AuthenticationError) and not error.retryable
    assert env in str(error) and "api_key=" in str(error) and "base_url=" in str(error)


@pytest.mark.parametrize(("model", "env"), PROVIDERS)
def test_a_local_server_needs_no_key(model: str, env: str) -> None:
    # Nothing listens on port 9: the request is sent, and fails to connect.
    error = _ask(imp.lm(model, base_url="http://127.0.0.1:9/v1", max_retries=0))
    assert isinstance(error, imp.ConnectionFailed)


@pytest.mark.parametrize("header", ["Authorization", "x-api-key"])
def test_a_key_in_the_headers_counts(header: str) -> None:
    seen: list[httpx.Headers] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request.headers)
        reply = {"role": "assistant", "content": "[[ ## a ## ]]\nyes"}
        return httpx.Response(200, json={"choices": [{"index": 0, "message": reply, "finish_reason": "stop"}]})

    client = httpx.AsyncClient(transport=httpx.MockTransport(answer))
    lm = imp.lm("openai:gpt-4o", headers={header: "sk-in-a-header"}, http_client=client, max_retries=0)
    assert imp.call_sync(imp.predict("q -> a", lm=lm), q="x").a == "yes"
    assert seen[0][header] == "sk-in-a-header"
