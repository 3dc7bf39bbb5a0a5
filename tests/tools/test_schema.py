"""The argument checker and decoder: readable problems for the JSON-schema subset tools use."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from imp.tools import check_arguments, decode_arguments
from imp.tools.schema import describe_problems

TEAM = {
    "type": "object",
    "properties": {
        "team": {"type": "string", "enum": ["atlas", "harbor"]},
        "count": {"type": "integer", "minimum": 1, "maximum": 10},
        "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
        "code": {"type": "string", "minLength": 2, "maxLength": 4, "pattern": "^[A-Z]+$"},
        "urgent": {"type": "boolean"},
        "owner": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "age": {"type": "integer", "minimum": 0}},
            "required": ["name"],
            "additionalProperties": False,
        },
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
        "note": {"anyOf": [{"type": "string"}, {"type": "null"}]},
        "kind": {"$ref": "#/$defs/Kind"},
    },
    "required": ["team"],
    "additionalProperties": False,
    "$defs": {"Kind": {"type": "string", "enum": ["bug", "task"]}},
}


def problems(arguments: dict[str, Any], schema: dict[str, Any] = TEAM) -> str:
    return describe_problems(check_arguments(schema, arguments))


def test_valid_arguments_have_no_problems() -> None:
    args = {
        "team": "atlas",
        "count": 3,
        "ratio": 0.5,
        "code": "AB",
        "urgent": True,
        "owner": {"name": "Maya", "age": 3},
        "tags": ["x"],
        "note": None,
        "kind": "bug",
    }
    assert check_arguments(TEAM, args) == []


@pytest.mark.parametrize(
    ("arguments", "expected"),
    [
        ({}, "`team` is required"),
        ({"team": "zeus"}, '`team` must be one of "atlas", "harbor" (got "zeus")'),
        ({"team": 3}, "`team` must be a string, not an integer (3)"),
        ({"team": None}, "`team` must be a string, not null"),
        ({"team": "atlas", "count": 0}, "`count` must be at least 1 (got 0)"),
        ({"team": "atlas", "count": 11}, "`count` must be at most 10 (got 11)"),
        ({"team": "atlas", "count": "3"}, '`count` must be an integer, not a string ("3")'),
        ({"team": "atlas", "count": True}, "`count` must be an integer, not true or false (true)"),
        ({"team": "atlas", "count": 2.5}, "`count` must be an integer, not a number (2.5)"),
        ({"team": "atlas", "ratio": 0}, "`ratio` must be greater than 0 (got 0)"),
        ({"team": "atlas", "ratio": 1}, "`ratio` must be less than 1 (got 1)"),
        ({"team": "atlas", "code": "A"}, "`code` must be at least 2 characters long"),
        ({"team": "atlas", "code": "ABCDE"}, "`code` must be at most 4 characters long"),
        ({"team": "atlas", "code": "ab"}, "`code` must match the pattern `^[A-Z]+$`"),
        ({"team": "atlas", "urgent": "yes"}, '`urgent` must be true or false, not a string ("yes")'),
        ({"team": "atlas", "owner": {}}, "`owner.name` is required"),
        ({"team": "atlas", "owner": {"name": "x", "age": -1}}, "`owner.age` must be at least 0 (got -1)"),
        ({"team": "atlas", "owner": {"name": "x", "pet": 1}}, "`owner.pet` is not a known field"),
        ({"team": "atlas", "owner": "Maya"}, '`owner` must be an object, not a string ("Maya")'),
        ({"team": "atlas", "tags": []}, "`tags` must have at least 1 item"),
        ({"team": "atlas", "tags": ["a", "b", "c"]}, "`tags` must have at most 2 items"),
        ({"team": "atlas", "tags": ["a", 2]}, "`tags[1]` must be a string, not an integer (2)"),
        ({"team": "atlas", "note": 5}, "`note` must be a string or null, not 5"),
        ({"team": "atlas", "kind": "epic"}, '`kind` must be one of "bug", "task" (got "epic")'),
        ({"team": "atlas", "extra": 1}, "`extra` is not a known argument"),
    ],
)
def test_each_rule_gives_a_readable_problem(arguments: dict[str, Any], expected: str) -> None:
    assert problems(arguments) == expected


def test_several_problems_are_joined_and_capped() -> None:
    text = problems({"team": "zeus", "count": 0, "code": "a", "urgent": 1})
    assert text.count(";") == 2  # at most three problems
    assert text.startswith('`team` must be one of "atlas", "harbor"')


def test_optional_nested_model_reports_the_branch_that_fits() -> None:
    schema = {
        "type": "object",
        "properties": {"owner": {"anyOf": [{"$ref": "#/$defs/Owner"}, {"type": "null"}]}},
        "$defs": {"Owner": {"type": "object", "properties": {"age": {"type": "integer"}}, "required": ["age"]}},
    }
    assert problems({"owner": {}}, schema) == "`owner.age` is required"
    assert problems({"owner": None}, schema) == ""


def test_empty_schema_accepts_anything() -> None:
    assert check_arguments({}, {"anything": [1, 2]}) == []


def test_integer_accepts_whole_floats_and_number_rejects_bools() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "x": {"type": "number"}}}
    assert check_arguments(schema, {"n": 3.0, "x": 2}) == []
    assert problems({"x": False}, schema) == "`x` must be a number, not true or false (false)"


def test_enum_does_not_confuse_true_with_one() -> None:
    schema = {"type": "object", "properties": {"v": {"enum": [1, 2]}}}
    assert problems({"v": True}, schema) == "`v` must be one of 1, 2 (got true)"
    assert problems({"v": 1.0}, schema) == ""


def test_root_must_be_an_object_when_properties_are_declared() -> None:
    assert problems([], {"properties": {}}) == "the arguments must be an object, not an array"  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ({"a": 1}, {"a": 1}),
        ('{"a": 1}', {"a": 1}),
        ("{'a': 1, 'b': True}", {"a": 1, "b": True}),  # Python-dict spelling, repaired
        ('{"a": 1', {"a": 1}),  # cut short, repaired
        ("", {}),
        (None, {}),
        (b'{"a": "x"}', {"a": "x"}),
    ],
)
def test_decode_accepts_mappings_and_json_text(raw: object, expected: dict[str, Any]) -> None:
    assert decode_arguments(raw) == (expected, None)


@pytest.mark.parametrize("raw", ["[1, 2]", "42", '"text"', 42])
def test_decode_refuses_what_is_not_an_object(raw: object) -> None:
    arguments, reason = decode_arguments(raw)
    assert arguments is None
    assert reason is not None and reason.startswith("are not a JSON object")


_KEYWORDS = (
    "type",
    "properties",
    "required",
    "additionalProperties",
    "minProperties",
    "items",
    "prefixItems",
    "enum",
    "const",
    "allOf",
    "anyOf",
    "oneOf",
    "$ref",
    "minLength",
    "maximum",
    "multipleOf",
)
_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.floats(allow_nan=False) | st.text(max_size=4),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.sampled_from(_KEYWORDS), inner, max_size=3),
    max_leaves=10,
)


@settings(max_examples=300, deadline=None)
@given(st.dictionaries(st.sampled_from(_KEYWORDS), _JSON_VALUES, max_size=4), _JSON_VALUES)
def test_any_schema_from_a_server_checks_any_arguments_without_raising(schema: dict[str, Any], value: object) -> None:
    """A schema is read as data (an MCP server's, a saved tool's): a keyword of the wrong JSON kind
    (a `type` that is a number, an `allOf` that is text, a `minProperties` that is a string) is
    ignored, never a crash, and the answer is a list of readable problems."""
    problems = check_arguments(schema, {"x": value})
    assert isinstance(problems, list)
    assert all(isinstance(p.path, str) and isinstance(p.message, str) for p in problems)
