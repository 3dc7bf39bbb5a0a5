"""Fixtures for the runtime tests: `@pytest.mark.anyio` tests run under asyncio and trio.
(The root tests/conftest.py hands `anyio`-marked tests to anyio's plugin.)
"""

from __future__ import annotations

import pytest


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """The async library an `anyio`-marked test runs under."""
    return str(request.param)
