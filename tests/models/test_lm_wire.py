"""Wire helpers: tool-call arguments read the way every other model-written JSON is, finish reasons, tool choice."""

from __future__ import annotations

from typing import Any

import pytest

from imp.models._wire import finish_reason, forces_tool, parse_arguments, tool_choice_mode, tool_choice_name


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ('{"city": "Paris"}', {"city": "Paris"}),
        ({"city": "Paris"}, {"city": "Paris"}),
        ("{'city': 'Paris', 'days': 3,}", {"city": "Paris", "days": 3}),  # Python spelling, trailing comma
        ('```json\n{"city": "Paris"}\n```', {"city": "Paris"}),  # a fence
        ('{"city": "Par', {"city": "Par"}),  # cut off
        ("", {}),
        (None, {}),
        ("   ", {}),
        ("not json at all", {}),
        ("[]", {}),
        ("[1, 2]", {"value": [1, 2]}),
        ('"Paris"', {"value": "Paris"}),
        (7, {"value": 7}),
    ],
)
def test_arguments_are_read_leniently(raw: Any, parsed: dict[str, Any]) -> None:
    assert parse_arguments(raw) == parsed


@pytest.mark.parametrize(
    ("raw", "has_calls", "normal"),
    [
        ("stop", False, "stop"),
        ("end_turn", False, "stop"),
        ("length", False, "length"),
        ("max_tokens", False, "length"),
        ("tool_use", True, "tool_calls"),
        ("refusal", False, "content_filter"),
        (None, True, "tool_calls"),
        (None, False, "stop"),
        ("something_new", False, "other"),
    ],
)
def test_finish_reasons_are_normalised(raw: Any, has_calls: bool, normal: str) -> None:
    assert finish_reason(raw, has_calls=has_calls) == normal


@pytest.mark.parametrize(
    ("choice", "mode", "name", "forced"),
    [
        ("auto", "auto", None, False),
        ("none", "none", None, False),
        ("required", "required", None, True),
        ("any", "required", None, True),
        ("submit", "named", "submit", True),
        ({"name": "submit"}, "named", "submit", True),
        ({"type": "function", "function": {"name": "submit"}}, "named", "submit", True),
        ({"type": "any"}, "required", None, True),
    ],
)
def test_tool_choice_forms(choice: Any, mode: str, name: str | None, forced: bool) -> None:
    assert tool_choice_mode(choice) == mode and tool_choice_name(choice) == name
    wire = {"type": "function", "function": {"name": name}} if name else ("required" if forced else mode)
    assert forces_tool({"tool_choice": wire}) is forced


def test_a_malformed_tool_choice_is_refused_naming_the_forms() -> None:
    with pytest.raises(ValueError, match="tool_choice must be 'auto', 'none', 'required', a tool name"):
        tool_choice_name({"type": "function", "function": {}})
