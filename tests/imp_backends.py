"""Test helper: `both_backends` runs an async test under asyncio and under trio."""

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

BACKENDS = ["asyncio", "trio"]


def both_backends(test: Callable[[], Awaitable[Any]]) -> Callable[[str], None]:
    """Turn `async def test_x()` into a sync test run once under asyncio and once under trio."""

    def run(backend: str) -> None:
        anyio.run(test, backend=backend)

    run.__name__ = test.__name__
    run.__qualname__ = test.__qualname__
    run.__module__ = test.__module__
    run.__doc__ = test.__doc__
    return pytest.mark.parametrize("backend", BACKENDS)(run)
