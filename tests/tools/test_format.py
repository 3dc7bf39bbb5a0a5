"""`format_tool_result`: the text a model reads for a tool result."""

from __future__ import annotations

import enum
from typing import Any

import pytest
from pydantic import BaseModel

from imp.tools import ToolResult, format_tool_result


class Color(enum.Enum):
    RED = "red"


class Point(BaseModel):
    x: int
    y: int


@pytest.mark.parametrize(
    ("value", "text"),
    [
        ("Maya", "Maya"),
        ("", ""),
        ({"ok": True}, '{"ok": true}'),
        ({"a": [1, 2], "b": None}, '{"a": [1, 2], "b": null}'),
        ([1, "two"], '[1, "two"]'),
        (3, "3"),
        (None, "null"),
        ({"name": "Inès"}, '{"name": "Inès"}'),
        (Point(x=1, y=2), '{"x": 1, "y": 2}'),
        (Color.RED, "red"),  # an enum is its value, written as prompt text
    ],
)
def test_success_renders_the_value(value: Any, text: str) -> None:
    assert format_tool_result(ToolResult(id="1", name="t", result=value)) == text


def test_failure_renders_error_sentence() -> None:
    result = ToolResult(id="1", name="post", outcome="unknown", error="post failed: boom")
    assert format_tool_result(result) == "Error: post failed: boom"


def test_error_wins_over_a_result() -> None:
    result = ToolResult(id="1", name="t", result="partial", error="t failed: late")
    assert format_tool_result(result) == "Error: t failed: late"
