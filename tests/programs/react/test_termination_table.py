"""Every row of docs/react.md's termination tables (reason and cause), reached under each adapter, with
native tool calls and with written ones (an LM without native tool calling), each asserting what the
prediction holds: its outputs, `complete`, the history's last step and `termination_error`."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import pytest
from react_fixtures import ON_CALL, escalation, on_call

import imp
from imp.adapters.base import Adapter

ADAPTERS = [imp.ChatAdapter(), imp.JSONAdapter(), imp.XMLAdapter()]
REPLY = imp.signature("ticket -> reply")
FULL = imp.LMError("the prompt is too long", status=400, provider="openai", context_window_exceeded=True)
DOWN = imp.LMError("upstream unavailable", status=503, provider="openai")


@imp.tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order."""
    return f"refunded {order}"


def calls(*pairs: tuple[str, dict[str, Any]], thought: str | None = None) -> dict[str, Any]:
    step: dict[str, Any] = {"tool_calls": [{"name": name, "arguments": args} for name, args in pairs]}
    if thought is not None:
        step["next_thought"] = thought
    return step


LOOKUP = ("on_call", {"team": "atlas"})
SUBMIT = ("submit", {"team": "atlas", "contact": "Maya"})


def paged(args: dict[str, Any], result: Any, inputs: dict[str, Any]) -> imp.Finish:
    return imp.Finish({"team": args["team"], "contact": result})


def not_maya(prediction: imp.Prediction) -> None:
    raise imp.Retry("ask again")


@dataclass
class Row:
    reason: str
    cause: str | None
    steps: list[Any]
    signature: Any = escalation
    options: dict[str, Any] = field(default_factory=dict)
    answer: dict[str, Any] | None = None
    written_only: bool = False
    past_deadline: bool = False
    error: str | None = None
    """A fragment of `termination_error` (None: the prediction has none; a complete turn never has)."""


ROWS = {
    "answered": Row(
        "answered",
        None,
        [calls(LOOKUP), {"reply": "Maya is on it.", "tool_calls": []}],
        REPLY,
        {},
        {"reply": "Maya is on it."},
    ),
    "submit": Row("submit", None, [calls(LOOKUP), calls(SUBMIT)], answer={"team": "atlas", "contact": "Maya"}),
    "finished_by_tool": Row(
        "finished_by_tool",
        None,
        [calls(LOOKUP)],
        options={"finish_on": {"on_call": paged}},
        answer={"team": "atlas", "contact": "Maya"},
    ),
    "forced_submit/max_iters": Row(
        "forced_submit",
        "max_iters",
        [calls(LOOKUP), calls(SUBMIT)],
        options={"max_iters": 1},
        answer={"team": "atlas", "contact": "Maya"},
    ),
    "forced_submit/prediction_error": Row(
        "forced_submit",
        "prediction_error",
        [DOWN, calls(SUBMIT)],
        answer={"team": "atlas", "contact": "Maya"},
    ),
    "forced_submit/empty_tool_calls": Row(
        "forced_submit",
        "empty_tool_calls",
        [{"next_thought": "atlas, Maya.", "tool_calls": []}, calls(SUBMIT)],
        answer={"team": "atlas", "contact": "Maya"},
    ),
    "forced_submit/parse_error": Row(
        "forced_submit",
        "parse_error",
        [{"next_thought": "atlas.", "tool_calls": "not a list of calls"}, calls(SUBMIT)],
        answer={"team": "atlas", "contact": "Maya"},
        written_only=True,
    ),
    "extracted/max_iters": Row(
        "extracted",
        "max_iters",
        [
            calls(LOOKUP),
            {"next_thought": "atlas, Maya.", "tool_calls": []},
            {"reasoning": "r", "team": "atlas", "contact": "Maya"},
        ],
        options={"max_iters": 1},
        answer={"team": "atlas", "contact": "Maya"},
    ),
    "last_text/max_iters": Row(
        "last_text",
        "max_iters",
        [calls(LOOKUP), {"reply": "Maya is on it.", "tool_calls": []}],
        REPLY,
        {"max_iters": 1},
        {"reply": "Maya is on it."},
    ),
    "incomplete/empty_tool_calls": Row(
        "incomplete",
        "empty_tool_calls",
        [{"next_thought": "Hmm.", "tool_calls": []}, {"next_thought": "Hmm again.", "tool_calls": []}],
        REPLY,
        {"finish": "tools", "finish_on": {"on_call": lambda a, r, i: imp.Finish({"reply": r})}},
    ),
    "incomplete/context_window_exceeded": Row(
        "incomplete", "context_window_exceeded", [FULL], error="the prompt is too long"
    ),
    "incomplete/deadline_exceeded": Row("incomplete", "deadline_exceeded", [calls(SUBMIT)], past_deadline=True),
    "incomplete/invalid_answer": Row(
        "incomplete",
        "invalid_answer",
        [calls(LOOKUP), calls(SUBMIT)],
        options={"max_iters": 1, "validate": not_maya},
        error="ask again",
    ),
    "awaiting_approval": Row("awaiting_approval", None, [calls(("refund", {"order": "A-1"}))]),
}


def written(adapter: Adapter, program: imp.ReAct, step: Any) -> Any:
    """A scripted step as an LM without native tool calling writes it: the step's fields in the adapter's layout."""
    if not isinstance(step, dict) or "tool_calls" not in step:
        return step
    rule = program.rule(program.finish)
    text = step.get("next_thought", step.get(rule.text_field))
    fields = {rule.text_field: text or "", "tool_calls": step["tool_calls"]}
    return adapter.reply_text(program.step_signature(program.finish, written=True), fields)


@pytest.mark.parametrize("native", [True, False], ids=["native", "written"])
@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.name)
@pytest.mark.parametrize("name", list(ROWS))
async def test_every_row_of_the_termination_tables(name: str, adapter: Adapter, native: bool) -> None:
    row = ROWS[name]
    if row.written_only and native:
        pytest.skip("a native step's text is a thought, never unreadable")
    program = imp.react(row.signature, [on_call, refund], adapter=adapter, **row.options)
    steps = row.steps if native else [written(adapter, program, s) for s in row.steps]
    lm = imp.ScriptedLM(steps, tool_calling=native, exhausted={"tool_calls": []})
    if row.past_deadline:
        with imp.deadline(0.01):
            time.sleep(0.03)  # noqa: ASYNC251 - no checkpoint: the deadline passes before the turn starts
            prediction = await imp.call(program.with_lm(lm), ticket="We were charged twice.")
    else:
        prediction = await imp.call(program.with_lm(lm), ticket="We were charged twice.")
    meta = prediction.metadata
    assert (meta.termination_reason, meta.termination_cause) == (row.reason, row.cause)
    complete = row.reason not in ("incomplete", "awaiting_approval")
    assert prediction.complete is complete
    outputs = list(program.signature.outputs)
    assert prediction.fields == (row.answer if row.answer is not None else dict.fromkeys(outputs))
    history = meta.history
    assert history[0]["ticket"] == "We were charged twice.", "the inputs are kept on every ending"
    if complete:
        assert {k: history[-1].fields.get(k) for k in outputs} == row.answer, "the history ends with the answer"
    elif row.cause == "invalid_answer":  # the refused `submit` is recorded refused, its outputs in its arguments
        (refused,) = history[-1].result_list()
        assert refused.outcome == "refused" and "not accepted: ask again" in str(refused.error)
        assert dict(history[-1].calls[0].arguments) == {"team": "atlas", "contact": "Maya"}
        assert not any(all(k in step.fields for k in outputs) for step in history), "no step holds the refused answer"
    else:
        assert not all(k in history[-1].fields for k in outputs), "an unanswered turn records no answer"
    if row.error is None:
        assert meta.termination_error is None
    else:
        assert meta.termination_error and any(row.error in e for e in meta.termination_error)
    assert (meta.pending is not None) is (row.reason == "awaiting_approval")
    assert (meta.finished_by_tool is not None) is (row.reason == "finished_by_tool")
    assert ON_CALL["atlas"] == "Maya"
