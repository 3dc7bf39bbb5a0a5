"""Fixtures for the LM layer's tests: clients pointed at the fake provider (`fake`, tests/conftest.py)."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from fake_provider import FakeProvider
from lm_constants import FAST_RETRIES, SECRET

from imp.models import lm
from imp.models._http import HTTPLM


@pytest.fixture
async def openai_lm(fake: FakeProvider) -> AsyncIterator[HTTPLM]:
    client = lm("openai:gpt-4o", api_key=SECRET, base_url=fake.base_url, retry_policy=FAST_RETRIES, timeout=5.0)
    async with client:
        yield client


@pytest.fixture
async def anthropic_lm(fake: FakeProvider) -> AsyncIterator[HTTPLM]:
    client = lm(
        "anthropic:claude-sonnet-4-5", api_key=SECRET, base_url=fake.base_url, retry_policy=FAST_RETRIES, timeout=5.0
    )
    async with client:
        yield client
