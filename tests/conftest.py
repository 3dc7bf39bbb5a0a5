"""Shared by the whole suite: the fixture form of `@both_backends` (tests/imp_backends.py).

pytest-asyncio runs `async def` tests on asyncio. A test that runs under trio as well is either
an `async def` decorated with `@both_backends`, or (when it must check something after the event
loop has closed: threads, processes, servers) a sync test taking the `run` fixture below, which
runs an async body under each of the same `BACKENDS`. See tests/README.md.
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from fake_provider import FakeProvider
from imp_backends import BACKENDS

# The repository's scripts (the import graph and the figures `make measure` counts) for the tests
# of the house's rules.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    """The fake provider on 127.0.0.1 (tests/fake_provider.py), stopped after the test."""
    server = FakeProvider().start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The async library the test's `run` uses (each test taking it runs once per backend)."""
    return str(request.param)


@pytest.fixture
def run(backend: str) -> Callable[[Callable[[], Awaitable[Any]]], Any]:
    """Run an async body to completion under the parametrized backend and return its value."""

    def runner(body: Callable[[], Awaitable[Any]]) -> Any:
        return anyio.run(body, backend=backend)

    return runner
