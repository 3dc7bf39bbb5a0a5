"""Fixtures for the LM layer's tests: a fake provider on 127.0.0.1 and clients pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
from fake_provider import FakeProvider
from lm_constants import FAST_RETRIES, SECRET

from imp.models import lm
from imp.models._http import HTTPLM


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    server = FakeProvider().start()
    try:
        yield server
    finally:
        server.stop()


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
