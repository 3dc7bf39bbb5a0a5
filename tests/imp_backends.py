"""The suite's one way to run a test under asyncio and under trio: `@both_backends` (see tests/README.md).

pytest-asyncio is the suite's async runner (auto mode: it claims every `async def` test, and runs
it on asyncio). A test that must also hold under trio is decorated with `@both_backends`: the
decorator turns it into a plain (sync) test, parametrized over `BACKENDS`, that runs the async
body with `anyio.run(..., backend=...)`. pytest-asyncio leaves sync tests alone, so no hook into
pytest is needed, and the test passes when run alone.

The decorated test may take sync fixtures by name as usual, and `backend` (the async library's
name) when it wants to know which one it runs under. Async fixtures belong to pytest-asyncio's
loop, not to the test's: open async resources inside the test body instead.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest

BACKENDS = ("asyncio", "trio")
"""The async libraries imp supports; every `@both_backends` test runs once under each."""


def both_backends(test: Callable[..., Awaitable[Any]]) -> Callable[..., None]:
    """Turn `async def test_x(fixtures...)` into a sync test run once under asyncio and once under trio."""
    if not inspect.iscoroutinefunction(test):
        raise TypeError(f"@both_backends decorates an `async def` test; {test.__name__} is not one")
    signature = inspect.signature(test)
    wants_backend = "backend" in signature.parameters
    others = [p for p in signature.parameters.values() if p.name != "backend"]
    backend_param = inspect.Parameter("backend", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=str)

    def run(backend: str, **fixtures: Any) -> None:
        if wants_backend:
            fixtures["backend"] = backend

        async def body() -> None:
            await test(**fixtures)

        anyio.run(body, backend=backend)

    run.__name__ = test.__name__
    run.__qualname__ = test.__qualname__
    run.__module__ = test.__module__
    run.__doc__ = test.__doc__
    # pytest reads a test's fixtures from its signature: the test's own, plus `backend`.
    run.__signature__ = signature.replace(parameters=[backend_param, *others], return_annotation=None)  # type: ignore[attr-defined]
    # Marks put on the async test (below this decorator) stay on the sync one.
    run.pytestmark = list(getattr(test, "pytestmark", []))  # type: ignore[attr-defined]
    return pytest.mark.parametrize("backend", BACKENDS)(run)
