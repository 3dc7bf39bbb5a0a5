"""Fixtures for the deadline tests: the LM layer's fake provider (tests/models/fake_provider.py)."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "models"))

from fake_provider import FakeProvider


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    """A fake OpenAI/Anthropic provider on 127.0.0.1."""
    server = FakeProvider().start()
    try:
        yield server
    finally:
        server.stop()
