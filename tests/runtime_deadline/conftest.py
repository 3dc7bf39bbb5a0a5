"""Fixtures for the deadline tests: `@pytest.mark.anyio` tests run under asyncio and trio, and the
LM layer's fake provider (tests/lm/fake_provider.py) is importable.

pytest-asyncio's auto mode claims every `async def` test, even one marked `anyio`, and would run
the trio case on asyncio. The hook below hands tests marked `anyio` back to anyio's plugin.
"""

from __future__ import annotations

import sys
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest
from pluggy import Result

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


@pytest.hookimpl(hookwrapper=True)
def pytest_pycollect_makeitem(collector: Any, name: str, obj: object) -> Generator[None, Result[Any], None]:
    """Turn pytest-asyncio's items for `anyio`-marked tests back into plain functions."""
    outcome = yield
    result = outcome.get_result()
    if not result:
        return
    nodes = result if isinstance(result, list) else [result]
    converted: list[Any] = []
    for node in nodes:
        if isinstance(node, pytest.Function) and type(node) is not pytest.Function and node.get_closest_marker("anyio"):
            plain = pytest.Function.from_parent(
                node.parent,
                name=node.name,
                callspec=getattr(node, "callspec", None),
                callobj=node.obj,
                fixtureinfo=node._fixtureinfo,
                keywords={k: v for k, v in node.keywords.items() if k != "asyncio"},
                originalname=node.originalname,
            )
            plain.own_markers = [m for m in node.own_markers if m.name != "asyncio"]
            node = plain
        converted.append(node)
    outcome.force_result(converted)
