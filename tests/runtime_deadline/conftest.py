"""Fixtures for the deadline tests: `@pytest.mark.anyio` tests run under asyncio and trio, and the
LM layer's fake provider (tests/lm/fake_provider.py) is importable.
(The root tests/conftest.py hands `anyio`-marked tests to anyio's plugin.)
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "lm"))

from fake_provider import FakeProvider


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    """A fake OpenAI/Anthropic provider on 127.0.0.1."""
    server = FakeProvider().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The async library an `anyio`-marked test runs under."""
    return str(request.param)
