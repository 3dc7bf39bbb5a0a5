"""A ReAct program saves its tools, options and finish_on by name and loads back the same."""

import stat
from pathlib import Path
from typing import Any

import pytest
from react_fixtures import _on_call, escalation, on_call, script

import imp


def finish_with_contact(args: dict[str, Any], contact: str, inputs: dict[str, Any]) -> imp.Finish:
    return imp.Finish({"team": args["team"], "contact": contact})


def test_save_and_load_a_react_program(tmp_path: Path) -> None:
    program = imp.react(
        escalation,
        [on_call],
        max_iters=7,
        finish_on={"on_call": finish_with_contact},
        last_request_note="Answer now.",
        history_replay="actions",
        tool_policy=["on_call", "submit"],
        config={"temperature": 0.1, "api_key": "sk-secretsecretsecret1234"},
    )
    path = tmp_path / "agent.json"
    registry = {"on_call": _on_call, "finish_with_contact": finish_with_contact}
    imp.save(program, path, registry=registry)
    text = path.read_text()
    assert "sk-secretsecretsecret1234" not in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    loaded = imp.load(path, registry=registry)
    assert isinstance(loaded, imp.ReAct)
    assert loaded.signature == escalation
    assert loaded.max_iters == 7 and loaded.history_replay == "actions" and loaded.last_request_note == "Answer now."
    assert [t.name for t in loaded.tools] == ["on_call"] and loaded.tools[0].runner is _on_call
    assert dict(loaded.tools[0].parameters) == dict(on_call.parameters)
    assert loaded.finish_on["on_call"] is finish_with_contact
    assert loaded.tool_policy == ["on_call", "submit"]
    assert loaded.config == {"temperature": 0.1}


async def test_a_loaded_agent_runs_the_same(tmp_path: Path) -> None:
    program = imp.react(escalation, [on_call], finish_on={"on_call": finish_with_contact})
    path = tmp_path / "agent.json"
    imp.save(program, path, registry={"on_call": _on_call, "finish_with_contact": finish_with_contact})
    loaded = imp.load(path, registry={"on_call": _on_call, "finish_with_contact": finish_with_contact})
    lm = script([{"tool_calls": [{"name": "on_call", "arguments": {"team": "beacon"}}]}])
    prediction = await imp.call(loaded.with_lm(lm), ticket="I can't log in.")  # type: ignore[attr-defined]
    assert prediction.contact == "Ines"


def test_a_runner_missing_from_the_registry_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "agent.json"
    imp.save(imp.react(escalation, [on_call]), path, registry={"on_call": _on_call})
    with pytest.raises(imp.LoadError, match="on_call"):
        imp.load(path)


async def test_with_demos_shows_them_before_the_turn() -> None:
    lm = script([{"tool_calls": [{"name": "submit", "arguments": {"team": "atlas", "contact": "Maya"}}]}])
    program = imp.react(escalation, [on_call], lm=lm)
    demo = {"ticket": "Login broken", "team": "beacon", "contact": "Ines"}
    taught = program.with_demos([demo])
    assert taught.demos == (demo,) and program.demos == () and taught.tools == program.tools
    with pytest.raises(TypeError, match="demos"):
        program.with_demos("not demos")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"demos\[0\]"):
        program.with_demos(["nope"])  # type: ignore[list-item]
    await imp.call(taught, ticket="Charged twice.")
    messages = lm.requests[0].messages
    assert messages[1] == {"role": "user", "content": "[[ ## ticket ## ]]\nLogin broken"}
    assert messages[2]["role"] == "assistant" and messages[2]["tool_calls"][0].name == "submit"
    assert messages[2]["tool_calls"][0].arguments["team"] == "beacon"
    assert messages[3]["role"] == "tool" and "Ines" in str(messages[3]["content"])
    assert messages[-1] == {"role": "user", "content": "[[ ## ticket ## ]]\nCharged twice."}


async def test_a_text_answer_demo_is_the_plain_answer() -> None:
    lm = script([{"reply": "Maya.", "tool_calls": []}])
    program = imp.react("ticket -> reply", [on_call], lm=lm, demos=[{"ticket": "Who?", "reply": "Ines."}])
    await imp.call(program, ticket="Charged twice.")
    messages = lm.requests[0].messages
    assert messages[1:3] == [
        {"role": "user", "content": "[[ ## ticket ## ]]\nWho?"},
        {"role": "assistant", "content": "Ines."},
    ]
