"""Files written by main before the history records were typed still load, and the loop's requests hold.

`fixtures/main_history.json` (a react turn with a thought, tool calls, an error result, provider
reasoning, thought-only steps, a note, a submit; a text turn; a named conversation turn),
`fixtures/main_react_program.json` (a saved react program) and `fixtures/main_requests.json` (the
requests of `fixture_scenarios.SCENARIOS`) were all written by main's code. The system messages in
`main_requests.json` were re-recorded once, when the field notes took DSPy's wording (a JSON-schema
note for `str | None`, `type` first in every schema); nothing else in those requests changed.
"""

import contextlib
import json
from pathlib import Path
from typing import Any

import pytest
from fixture_scenarios import SCENARIOS
from react_fixtures import _on_call, _page

import imp
from imp.records import plain

FIXTURES = Path(__file__).parent / "fixtures"
DIVERGES = {
    # Main replayed the written-mode step whose thought moved to the user side as an assistant
    # message of missing fields; the thought now joins the last user message, as in native mode.
    "written_tools": 2,
}
"""Scenarios whose requests from this index on differ from main's on purpose (tested elsewhere)."""


def finish_with_contact(args: dict[str, Any], contact: str, inputs: dict[str, Any]) -> imp.Finish:
    return imp.Finish({"team": args["team"], "contact": contact})


def test_a_history_saved_by_main_loads_and_dumps_the_same() -> None:
    data = json.loads((FIXTURES / "main_history.json").read_text())
    history = imp.History.load(data)
    assert len(history) == 7
    assert history.dump() == data
    assert imp.History.load(history.dump()) == history
    first = history[0]
    assert first["ticket"] == "We were charged twice this month." and first["user_name"] == "alice"
    assert [c.name for c in first["tool_calls"]] == ["on_call", "on_call"]
    assert [r.outcome for r in first["tool_call_results"]] == ["result", "refused"]
    assert first["reasoning_data"] == {"reasoning_content": "Double charge means money."}
    assert history[3]["last_request_note"] == "Answer now."
    assert history[4]["team"] == "atlas" and history[4]["contact"] == "Maya"
    assert dict(history[6]) == {
        "question": "Who won?",
        "answer": "Blue team.",
        "user_name": "alice",
        "assistant_name": "bot",
    }


def test_a_program_saved_by_main_loads() -> None:
    registry = {"on_call": _on_call, "_page": _page, "finish_with_contact": finish_with_contact}
    program = imp.load(FIXTURES / "main_react_program.json", registry=registry)
    assert isinstance(program, imp.ReAct)
    assert [t.name for t in program.tools] == ["on_call", "page"] and program.tools[0].runner is _on_call
    assert (program.max_iters, program.finish, program.history_replay) == (7, "submit", "actions")
    assert program.finish_on == {"on_call": finish_with_contact} and program.last_request_note == "Answer now."
    assert program.tool_policy == ["on_call", "page", "submit"] and dict(program.config) == {"temperature": 0.1}
    assert [dict(d) for d in program.demos] == [{"ticket": "Login broken", "team": "beacon", "contact": "Ines"}]
    assert isinstance(program.adapter, imp.XMLAdapter)


def _as_main_wrote(message: imp.models.base.Message) -> dict[str, Any]:
    """A message as main handed it to the LM: main wrote each call in OpenAI's shape; the message now
    carries the `ToolCall` record, and each client writes its provider's shape from it."""
    out: dict[str, Any] = dict(message)
    if "tool_calls" in out:
        out["tool_calls"] = [
            {
                "id": c.id,
                "type": "function",
                "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments), ensure_ascii=False)},
            }
            for c in message["tool_calls"]
        ]
    return out


@pytest.mark.parametrize("name", list(SCENARIOS))
async def test_the_loop_sends_what_main_sent(name: str) -> None:
    recorded = json.loads((FIXTURES / "main_requests.json").read_text())[name]
    program, lm, inputs = SCENARIOS[name]()
    with contextlib.suppress(imp.ImpError):
        await imp.call(program, **inputs)
    sent = [{"messages": [_as_main_wrote(m) for m in r.messages], "options": r.options} for r in lm.requests]
    assert len(sent) == len(recorded)
    same = DIVERGES.get(name, len(recorded))
    assert json.loads(json.dumps(plain(sent[:same]), default=str)) == recorded[:same]
