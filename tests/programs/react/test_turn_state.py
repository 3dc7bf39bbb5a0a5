"""A turn's state as plain data: dumped between steps, loaded in another process, and continued.

The loop keeps everything that changes in `TurnState` and everything fixed for the call in
`TurnSpec`, so a turn dumped at a step's end and loaded again sends the same requests and ends the
same way as one that never stopped: what a journal (a crashed run replayed) and a pending approval
(a paused turn with calls not yet run) keep.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from react_fixtures import escalation, on_call

import imp
from imp.programs.react import TurnSpec, TurnState
from imp.programs.react._loop import run_turn
from imp.programs.react._messages import step_messages
from imp.programs.react._state import STATE_VERSION
from imp.records import UnreadArguments

FIXTURES = Path(__file__).parent / "fixtures"

# The calls carry their own ids, as a provider's do (a scripted model numbers its own requests).
LOOK = {"next_thought": "Money: atlas.", "tool_calls": [{"id": "a", "name": "on_call", "arguments": {"team": "atlas"}}]}
THINK = {"next_thought": "Let me check once more."}
AGAIN = {"tool_calls": [{"id": "b", "name": "on_call", "arguments": {"team": "harbor"}}]}
SUBMIT = {"tool_calls": [{"id": "c", "name": "submit", "arguments": {"team": "atlas", "contact": "Maya"}}]}
SCRIPT = [LOOK, THINK, AGAIN, SUBMIT]
INPUTS = {"ticket": "We were charged twice."}


class Crash(BaseException):
    """The process dies here (nothing in imp catches it)."""


def _through_json(state: TurnState) -> TurnState:
    return TurnState.load(json.loads(json.dumps(state.dump())))


async def _whole_turn(program: imp.ReAct, lm: imp.ScriptedLM) -> tuple[Any, TurnState]:
    spec, state = program.with_lm(lm).start(INPUTS)
    return await run_turn(spec, state), state


@pytest.mark.parametrize("crash_at", [2, 3, 4])
async def test_a_turn_dumped_at_a_step_end_and_loaded_continues_as_if_it_never_stopped(crash_at: int) -> None:
    program = imp.react(escalation, [on_call], finish="submit", max_iters=6)
    whole = imp.ScriptedLM(list(SCRIPT))
    ending, state = await _whole_turn(program, whole)
    assert ending.reason == "submit" and ending.outputs == {"team": "atlas", "contact": "Maya"}

    holder: dict[str, TurnState] = {}
    replies = iter(SCRIPT)

    def crashing(messages: list[Any], options: dict[str, Any]) -> Any:
        live = holder["state"]
        if live.step == crash_at:  # the loop has just numbered this request: the state is that of the step before's end
            holder["saved"] = TurnState.load({**live.dump(), "step": live.step - 1})
            raise Crash
        return next(replies)

    spec, live = program.with_lm(imp.StaticLM(crashing)).start(INPUTS)
    holder["state"] = live
    with pytest.raises(Crash):
        await run_turn(spec, live)
    saved = _through_json(holder["saved"])
    assert len(saved.steps) == crash_at - 1 and saved.step == crash_at - 1

    rest = imp.ScriptedLM(list(SCRIPT[crash_at - 1 :]))
    spec, _ = program.with_lm(rest).start(INPUTS)  # a new process: the same program and inputs, a fresh spec
    resumed_ending = await run_turn(spec, saved)
    assert resumed_ending == ending
    assert saved.dump() == state.dump()
    assert [r.messages for r in rest.requests] == [r.messages for r in whole.requests[crash_at - 1 :]]
    assert [r.options for r in rest.requests] == [r.options for r in whole.requests[crash_at - 1 :]]


async def test_a_paused_turn_keeps_the_calls_that_ran_and_those_that_did_not() -> None:
    """A step whose calls ran only in part (the others wait, say for a person's decision) is kept as it
    is: its calls, the results it has, and the inputs; the next request shows it the same way."""
    program = imp.react(escalation, [on_call], lm=imp.ScriptedLM([]))
    spec, state = program.start(INPUTS)
    state.step = 1
    waiting = imp.ToolCall("c2", "on_call", {"team": "harbor"})
    ran = imp.ToolCall("c1", "on_call", {"team": "atlas"})
    state.add(
        imp.Step(
            thought="Two squads may own this.",
            tool_calls=(ran, waiting),
            results=(imp.ToolResult("c1", "on_call", "Maya"),),
        )
    )
    loaded = _through_json(state)
    assert loaded.steps[0].tool_calls == (ran, waiting)
    assert [r.id for r in loaded.steps[0].result_list()] == ["c1"]
    assert loaded.steps[0]["ticket"] == INPUTS["ticket"] and loaded.unrecorded == {}
    roster = spec.roster()
    assert step_messages(spec, loaded, roster, thought_as_user=False) == step_messages(
        spec, state, roster, thought_as_user=False
    )


async def test_a_replayed_step_sends_the_request_the_original_sent() -> None:
    """Every request is rebuilt from the spec and the steps: a loaded state gives the request the
    live one gave, under every adapter, with the context projection kept."""
    for adapter in (imp.ChatAdapter(), imp.JSONAdapter(), imp.XMLAdapter()):
        lm = imp.ScriptedLM(list(SCRIPT))
        program = imp.react(escalation, [on_call], finish="submit", adapter=adapter)
        ending, state = await _whole_turn(program, lm)
        assert ending.reason == "submit"
        state.cut, state.omitted_groups, state.projection_retries = 0, 0, 1
        spec, _ = program.with_lm(lm).start(INPUTS)
        loaded = _through_json(state)
        roster = spec.roster()
        assert step_messages(spec, loaded, roster, thought_as_user=True) == step_messages(
            spec, state, roster, thought_as_user=True
        )
        assert loaded.projection() == state.projection()


def test_the_dump_is_json_data_with_a_version_and_no_tool_or_client() -> None:
    program = imp.react(escalation, [on_call], lm=imp.ScriptedLM([]))
    spec, state = program.start(INPUTS)
    assert isinstance(spec, TurnSpec) and spec.rule.kind == "submit"
    data = state.dump()
    assert data["type"] == "react_turn" and data["version"] == STATE_VERSION
    assert data["unrecorded"] == INPUTS and data["steps"] == []
    assert json.loads(json.dumps(data)) == data


def test_a_state_dumped_by_the_first_version_still_loads() -> None:
    """The fixture was written by version 1; every later imp must read it (and say so if it cannot)."""
    data = json.loads((FIXTURES / "turn_state_v1.json").read_text())
    state = TurnState.load(data)
    assert state.step == 3 and state.thoughts == 1 and state.forgiven == 0
    assert (state.cut, state.omitted_groups, state.projection_retries) == (2, 1, 1)
    first = state.steps[0]
    assert first["ticket"] == "We were charged twice." and first.calls[0].arguments == {"team": "atlas"}
    unread = state.steps[1].calls[0].arguments
    assert isinstance(unread, UnreadArguments) and unread.text == "look up atlas please"
    assert state.steps[1].result_list()[0].outcome == "refused"
    assert state.steps[2].thought == "Let me think." and state.steps[2].results == ()
    assert state.errors == ["LMError: upstream broke"]
    assert state.unexecuted == (imp.ToolCall("c9", "page", {"who": "Maya"}),)
    assert state.dump() == data


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"type": "history"}, "not a dumped react turn"),
        ({"version": STATE_VERSION + 1}, "newer imp"),
        ({"version": "1"}, "version"),
        ({"step": -1}, "`step`"),
        ({"thoughts": True}, "`thoughts`"),
        ({"steps": {"0": {}}}, "`steps`"),
        ({"errors": [1]}, "`errors`"),
        ({"projection": [1]}, "`projection`"),
        ({"unrecorded": "x"}, "`unrecorded`"),
        ({"unexecuted": ["call"]}, "`unexecuted`"),
        ({"finish_reason": 3}, "`finish_reason`"),
        ({"last": {"cause": "bored", "text": "t"}}, "`last`"),
        ({"last": {"cause": "max_iters", "text": 3}}, "`last`"),
        ({"last": ["max_iters"]}, "`last`"),
    ],
)
def test_a_bad_dump_is_refused_naming_the_key(change: dict[str, Any], message: str) -> None:
    data = {**TurnState(unrecorded={"ticket": "t"}).dump(), **change}
    with pytest.raises(ValueError, match=message):
        TurnState.load(data)


_text = st.text(max_size=20)
_json = st.recursive(
    st.none() | st.booleans() | st.integers() | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)


def _unread(text: str) -> bool:
    """Text a provider's call may carry that no JSON reading (or repair) makes an object of."""
    try:
        return isinstance(imp.ToolCall.load({"arguments": text}).arguments, UnreadArguments)
    except ValueError:
        return False


_calls = st.builds(
    imp.ToolCall,
    st.text(alphabet="abc123_", min_size=1, max_size=6),
    st.sampled_from(["on_call", "page", "submit"]),
    st.dictionaries(st.text(alphabet="abcdef", min_size=1, max_size=5), _json, max_size=3)
    | st.builds(UnreadArguments, _text.filter(_unread)),
)
_results = st.builds(
    imp.ToolResult,
    st.text(alphabet="abc123_", min_size=1, max_size=6),
    st.sampled_from(["on_call", "page"]),
    _json,
    st.sampled_from(["result", "refused", "auth_refused", "not_sent", "unknown"]),
    st.none() | _text,
)
_steps = st.builds(
    imp.Step,
    fields=st.dictionaries(st.sampled_from(["ticket", "team", "contact"]), _text, max_size=2),
    thought=st.none() | _text,
    tool_calls=st.none() | st.lists(_calls, max_size=3).map(tuple),
    results=st.none() | st.lists(_results, max_size=3).map(tuple),
    note=st.none() | _text,
    reasoning=st.none() | _text,
    reasoning_data=_json,
)
_counts = st.integers(min_value=0, max_value=50)


@settings(max_examples=80, deadline=None)
@given(
    steps=st.lists(_steps, max_size=4),
    counts=st.tuples(_counts, _counts, _counts, _counts, _counts, _counts),
    errors=st.lists(_text, max_size=2),
    finish_reason=st.none() | st.sampled_from(["stop", "tool_calls", "length"]),
    unexecuted=st.lists(_calls, max_size=2).map(tuple),
    unrecorded=st.dictionaries(st.sampled_from(["ticket", "user_name"]), _text, max_size=2),
)
def test_any_state_round_trips_through_json(
    steps: list[imp.Step],
    counts: tuple[int, int, int, int, int, int],
    errors: list[str],
    finish_reason: str | None,
    unexecuted: tuple[imp.ToolCall, ...],
    unrecorded: dict[str, str],
) -> None:
    step, thoughts, forgiven, cut, groups, retries = counts
    state = TurnState(
        unrecorded=unrecorded,
        steps=list(steps),
        step=step,
        thoughts=thoughts,
        forgiven=forgiven,
        cut=cut,
        omitted_groups=groups,
        projection_retries=retries,
        errors=errors,
        finish_reason=finish_reason,
        unexecuted=unexecuted,
    )
    data = state.dump()
    again = _through_json(state)
    assert again.dump() == data
    assert [s.dump() for s in again.steps] == [s.dump() for s in state.steps]
    assert (again.step, again.thoughts, again.forgiven, again.cut) == (step, thoughts, forgiven, cut)
    assert again.unexecuted == tuple(imp.ToolCall.load(c.dump()) for c in unexecuted)


def test_a_paused_last_request_keeps_its_cause_and_text_through_json() -> None:
    state = TurnState(last_cause="prediction_error", last_text="Paged Maya.")
    again = _through_json(state)
    assert (again.last_cause, again.last_text) == ("prediction_error", "Paged Maya.")
    assert "last" not in TurnState().dump()  # every other turn dumps as it always did
