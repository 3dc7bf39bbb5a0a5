"""The key rule: a key given as `api_key=` goes wherever the LM sends; a key read from the environment goes
only to the provider's own service (its default `base_url`), never to a local server, a proxy or an
endpoint a saved file names."""

from __future__ import annotations

import httpx
import pytest
from fake_provider import FakeProvider, Reply

import imp

ENV_KEY = "sk-from-the-environment-0123456789"
PROVIDERS = [
    ("openai:m", "OPENAI_API_KEY", "authorization"),
    ("openai-responses:m", "OPENAI_API_KEY", "authorization"),
    ("openrouter:m", "OPENROUTER_API_KEY", "authorization"),
    ("anthropic:m", "ANTHROPIC_API_KEY", "x-api-key"),
]
OK = {
    "openai": {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]},
    "openrouter": {"choices": [{"index": 0, "message": {"role": "assistant", "content": "ok"}}]},
    "openai-responses": {"status": "completed", "output": []},
    "anthropic": {"type": "message", "content": [{"type": "text", "text": "ok"}], "stop_reason": "end_turn"},
}
HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize(("model", "env", "header"), PROVIDERS)
async def test_the_environments_key_is_not_sent_to_another_base_url(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch, model: str, env: str, header: str
) -> None:
    monkeypatch.setenv(env, ENV_KEY)
    fake.responder = lambda request: Reply(200, json=OK[model.split(":")[0]])
    async with imp.lm(model, base_url=fake.base_url) as client:
        await client.request(HI)
        assert ENV_KEY not in client.secrets
    (sent,) = fake.requests
    assert header not in {k.lower() for k in sent.headers} and ENV_KEY not in str(sent.headers)


@pytest.mark.parametrize(("model", "env", "header"), PROVIDERS)
async def test_a_key_given_is_sent_to_any_base_url(
    fake: FakeProvider, monkeypatch: pytest.MonkeyPatch, model: str, env: str, header: str
) -> None:
    monkeypatch.setenv(env, ENV_KEY)
    fake.responder = lambda request: Reply(200, json=OK[model.split(":")[0]])
    async with imp.lm(model, base_url=fake.base_url, api_key="sk-given-0123456789") as client:
        await client.request(HI)
    (sent,) = fake.requests
    assert "sk-given-0123456789" in {k.lower(): v for k, v in sent.headers.items()}[header]


@pytest.mark.parametrize(("model", "env", "header"), PROVIDERS)
async def test_the_environments_key_goes_to_the_providers_own_service(
    monkeypatch: pytest.MonkeyPatch, model: str, env: str, header: str
) -> None:
    monkeypatch.setenv(env, ENV_KEY)
    seen: list[httpx.Request] = []

    def service(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        return httpx.Response(200, json=OK[model.split(":")[0]])

    stand_in = httpx.AsyncClient(transport=httpx.MockTransport(service))
    async with imp.lm(model, http_client=stand_in) as client:
        await client.request(HI)
    assert ENV_KEY in seen[0].headers[header]


async def test_one_header_of_a_name_whatever_its_case(fake: FakeProvider) -> None:
    fake.responder = lambda request: Reply(200, json=OK["openai"])
    settings = {"headers": {"X-Title": "settings"}, "extra_headers": {"x-title": "default"}}
    async with imp.lm("openai:m", base_url=fake.base_url, api_key="sk-key-0123456789", **settings) as client:  # type: ignore[arg-type]
        await client.request(HI, extra_headers={"Authorization": "Bearer sk-other", "X-TITLE": "call"})
    (sent,) = fake.requests
    lowered = [k.lower() for k in sent.headers]
    assert lowered.count("authorization") == 1 and lowered.count("x-title") == 1
    assert {k.lower(): v for k, v in sent.headers.items()}["x-title"] == "call"
