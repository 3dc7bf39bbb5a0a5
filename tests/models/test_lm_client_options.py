"""A client's base URL and timeouts are checked when it is built, naming the option and the fix."""

from __future__ import annotations

from typing import Any

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
