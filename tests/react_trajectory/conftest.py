"""Fixtures for the trajectory ReAct tests: every scenario runs under asyncio and trio."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest


@pytest.fixture(params=["asyncio", "trio"])
def run(request: pytest.FixtureRequest) -> Callable[[Callable[[], Awaitable[Any]]], Any]:
    """Run an async body to completion under the parametrized backend and return its value."""

    def runner(body: Callable[[], Awaitable[Any]]) -> Any:
        return anyio.run(body, backend=str(request.param))

    return runner
