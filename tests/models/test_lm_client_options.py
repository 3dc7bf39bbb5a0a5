"""A client's base URL and timeouts are checked when it is built, naming the option and the fix."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

import imp

PROVIDERS = ["openai:gpt-4o", "anthropic:claude-sonnet-4-5", "openrouter:openai/gpt-4o"]


@pytest.mark.parametrize("model", PROVIDERS)
def test_a_base_url_without_a_scheme_is_refused_showing_the_fix(model: str) -> None:
    with pytest.raises(ValueError, match=r"base_url starts with http:// or https://, as in 'http://localhost:8000/v1'"):
        imp.lm(model, api_key="k", base_url="localhost:8000/v1")


@pytest.mark.parametrize("model", PROVIDERS)
@pytest.mark.parametrize(
    ("option", "value"), [("timeout", -1), ("timeout", 0), ("connect_timeout", "5"), ("timeout", True)]
)
def test_a_timeout_that_is_no_time_is_refused_naming_the_option(model: str, option: str, value: Any) -> None:
    with pytest.raises(ValueError, match=f"{option} is a positive number of seconds"):
        imp.lm(model, api_key="k", **{option: value})


@pytest.mark.parametrize("base_url", ["http://127.0.0.1:8080/v1", "https://example.test/v1/", "HTTPS://Example.test"])
def test_good_base_urls_and_timeouts_are_kept(base_url: str) -> None:
    client = imp.lm("openai:m", api_key="k", base_url=base_url, timeout=0.5, connect_timeout=2)
    assert client.base_url == base_url.rstrip("/")


WRONG_TYPES = [
    ("temperature", "0.2"),
    ("top_p", True),
    ("max_tokens", "100"),
    ("max_tokens", 1.5),
    ("seed", "7"),
    ("timeout", "10"),
    ("max_retries", "2"),
]


@pytest.mark.parametrize("model", ["openai:m", "openai-responses:m", "anthropic:m"])
@pytest.mark.parametrize(("option", "value"), WRONG_TYPES)
async def test_a_request_option_of_the_wrong_type_is_a_type_error_before_sending(
    model: str, option: str, value: Any
) -> None:
    """A number option that is no number is refused, naming it, as a program's `config` is: as a default
    of `imp.lm(...)` when the LM is built, and in a call (read whole or streamed) before anything is sent."""
    if option == "seed" and not model.startswith("openai:"):
        return  # Anthropic and the Responses API take no seed at all (a ValueError, tested with the options they refuse)
    sent: list[object] = []

    def provider(request: Any) -> Any:
        sent.append(request)
        raise AssertionError("nothing is sent")

    client = httpx.AsyncClient(transport=httpx.MockTransport(provider))
    with pytest.raises((TypeError, ValueError), match=option):  # `timeout` is also the client's own setting
        imp.lm(model, base_url="http://127.0.0.1:9/v1", **{option: value})
    lm = imp.lm(model, base_url="http://127.0.0.1:9/v1", http_client=client)
    with pytest.raises(TypeError, match=option):
        await lm.request([{"role": "user", "content": "hi"}], **{option: value})
    with pytest.raises(TypeError, match=option):
        [event async for event in lm.stream([{"role": "user", "content": "hi"}], **{option: value})]
    assert sent == []


@pytest.mark.parametrize("option", ["timeout", "max_retries", "max_tokens"])
def test_a_negative_count_or_time_is_refused_naming_it(option: str) -> None:
    with pytest.raises(ValueError, match=option):
        imp.lm("openai:m", base_url="http://127.0.0.1:9/v1", **{option: -1})


def test_an_http_backend_imp_does_not_speak_is_refused_when_the_lm_is_built(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ValueError, match="http_backend is 'httpx' or 'httpx2', got 'requests'"):
        imp.lm("openai:m", base_url="http://127.0.0.1:9/v1", http_backend="requests")
    monkeypatch.setenv("IMP_HTTP_BACKEND", "aiohttp")
    with pytest.raises(ValueError, match="IMP_HTTP_BACKEND is 'httpx' or 'httpx2'"):
        imp.lm("openai:m", base_url="http://127.0.0.1:9/v1")
