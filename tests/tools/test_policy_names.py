"""A tool policy that names a tool the program does not hold is refused when the program is built."""

from __future__ import annotations

from typing import Any

import pytest

import imp


@imp.tool
def on_call(team: str) -> str:
    """Look up the on-call engineer for a squad."""
    return "Maya"


ESCALATION = imp.signature("ticket -> team, contact")


def _react(policy: Any) -> Any:
    return imp.react(ESCALATION, [on_call], lm=imp.ScriptedLM([]), tool_policy=policy)


def _trajectory(policy: Any) -> Any:
    return imp.react_trajectory(ESCALATION, [on_call], lm=imp.ScriptedLM([]), tool_policy=policy)


@pytest.mark.parametrize("build", [_react, _trajectory], ids=["react", "react_trajectory"])
@pytest.mark.parametrize("policy", ["oncall", ["on_call", "on-call"], ("search",)])
def test_a_policy_naming_an_unknown_tool_is_refused_listing_the_tools(build: Any, policy: Any) -> None:
    with pytest.raises(
        ValueError, match=r"tool_policy names \[.*\], which the program does not hold; its tools are \["
    ) as info:
        build(policy)
    assert "'on_call'" in str(info.value)


@pytest.mark.parametrize(
    ("build", "own"), [(_react, "submit"), (_trajectory, "finish")], ids=["react", "react_trajectory"]
)
def test_policies_naming_held_tools_and_the_loops_own_tool_are_kept(build: Any, own: str) -> None:
    for policy in ("allow", "on_call", ["on_call", own], [own], (lambda call: True)):
        assert build(policy).tool_policy == policy


def test_a_policy_of_the_wrong_type_is_still_a_type_error() -> None:
    with pytest.raises(TypeError, match="a tool policy is 'allow', a tool name, a list of names or a function"):
        _react(3)
