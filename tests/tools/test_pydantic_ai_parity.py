"""Behaviours pydantic-ai's tests/test_tools.py checks, in meaning: schemas from annotations and
docstrings, and arguments validated into typed values before the function runs."""

from __future__ import annotations

import dataclasses
import datetime
import enum
from typing import Annotated, Any, Literal, TypedDict

import anyio
import pydantic
import pytest

import imp
from imp.records import ToolCall, ToolResult
from imp.tools.run import run_tool_calls


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Address(pydantic.BaseModel):
    street: str


@dataclasses.dataclass
class Box:
    width: int


class Tag(TypedDict):
    key: str


SEEN: list[dict[str, Any]] = []


def plan(
    city: str,
    days: int = 2,
    *,
    budget: float | None = None,
    color: Color = Color.RED,
    pace: Literal["slow", "fast"] = "slow",
    address: Address | None = None,
    box: Box | None = None,
    tag: Tag | None = None,
    start: datetime.date | None = None,
    people: Annotated[int, pydantic.Field(ge=1, le=5, description="how many travel")] = 1,
    stops: list[str] | None = None,
) -> str:
    """Plan a trip.

    Args:
        city: where to go.
        days: how long to stay.
    """
    SEEN.append(dict(locals()))
    return "planned"


TOOL = imp.tool(plan)


def test_the_schema_reads_types_defaults_constraints_and_docstring_descriptions() -> None:
    schema = TOOL.parameters
    props = schema["properties"]
    assert TOOL.description == "Plan a trip."
    assert schema["required"] == ["city"] and schema["additionalProperties"] is False
    assert props["city"] == {"type": "string", "description": "where to go."}
    assert props["days"] == {"type": "integer", "default": 2, "description": "how long to stay."}
    assert props["budget"]["anyOf"] == [{"type": "number"}, {"type": "null"}]
    assert props["pace"]["enum"] == ["slow", "fast"]
    assert schema["$defs"]["Color"]["enum"] == ["red", "green"]
    assert props["people"] == {
        "type": "integer",
        "default": 1,
        "minimum": 1,
        "maximum": 5,
        "description": "how many travel",
    }
    assert {"format": "date", "type": "string"} in props["start"]["anyOf"]
    for name in ("Address", "Box", "Tag"):
        assert schema["$defs"][name]["type"] == "object"


def run(arguments: dict[str, Any]) -> ToolResult:
    async def main() -> ToolResult:
        into: list[ToolResult] = []
        await run_tool_calls([ToolCall(id="1", name="plan", arguments=arguments)], [TOOL], into=into)
        return into[0]

    SEEN.clear()
    return anyio.run(main)


def test_checked_arguments_become_the_function_s_typed_values() -> None:
    result = run(
        {
            "city": "Oslo",
            "color": "green",
            "address": {"street": "Main"},
            "box": {"width": 3},
            "tag": {"key": "k"},
            "start": "2024-05-01",
            "people": 3,
        }
    )
    assert result.ok and result.result == "planned"
    (seen,) = SEEN
    assert seen["color"] is Color.GREEN and seen["address"] == Address(street="Main")
    assert seen["box"] == Box(3) and seen["tag"] == {"key": "k"}
    assert seen["start"] == datetime.date(2024, 5, 1) and seen["days"] == 2 and seen["people"] == 3


@pytest.mark.parametrize(
    ("arguments", "sentence"),
    [
        ({}, "`city` is required"),
        ({"city": "Oslo", "days": "two"}, "`days` must be an integer"),
        ({"city": "Oslo", "people": 9}, "`people` must be at most 5"),
        ({"city": "Oslo", "color": "blue"}, '`color` must be one of "red", "green"'),
        ({"city": "Oslo", "address": {"street": 1}}, "`address.street` must be a string"),
        ({"city": "Oslo", "hotel": "x"}, "`hotel` is not a known argument"),
    ],
)
def test_arguments_that_do_not_fit_are_refused_before_the_function_runs(
    arguments: dict[str, Any], sentence: str
) -> None:
    result = run(arguments)
    assert result.outcome == "refused" and sentence in (result.error or "")
    assert SEEN == []


def test_a_tool_without_docstring_or_hints_takes_anything_and_describes_nothing() -> None:
    def bare(x, y=3):  # type: ignore[no-untyped-def]
        return x

    tool = imp.tool(bare)
    assert tool.description == ""
    assert tool.parameters["properties"] == {"x": {}, "y": {"default": 3}}
    assert tool.parameters["required"] == ["x"]
