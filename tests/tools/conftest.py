"""Fixtures for the tools tests: every async scenario runs under asyncio and trio.

pytest-asyncio's auto mode claims every `async def` test (even one marked `anyio`), so the
scenarios here are sync tests that run an async body with `anyio.run(..., backend=...)`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest


@pytest.fixture(params=["asyncio", "trio"])
def backend(request: pytest.FixtureRequest) -> str:
    """The async library a scenario runs under."""
    return str(request.param)


@pytest.fixture
def run(backend: str) -> Callable[[Callable[[], Awaitable[Any]]], Any]:
    """Run an async body to completion under the parametrized backend and return its value."""

    def runner(body: Callable[[], Awaitable[Any]]) -> Any:
        return anyio.run(body, backend=backend)

    return runner
