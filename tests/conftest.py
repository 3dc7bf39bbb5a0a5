"""Shared by the whole suite: tests marked `anyio` run under anyio's plugin, not pytest-asyncio's.

pytest-asyncio's auto mode claims every `async def` test, even one marked `anyio`, and would run
the trio case on asyncio. The hook below hands tests marked `anyio` back to anyio's plugin.
"""

from __future__ import annotations

from collections.abc import Generator
from typing import Any

import pytest
from pluggy import Result


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
