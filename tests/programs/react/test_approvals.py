"""Approvals that pause a turn and resume it later, in this process or another.

The peers' failures are each a test here: a missing decision never runs the call (pydantic-ai
#8060); the arguments that run are the ones approved (#6968); several calls waiting in one step are
decided by one resume (langgraph #4028) and a decided call never waits again (#5952).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

import imp
from imp.programs.pending import Pending

SIG = imp.signature("ticket -> reply")
RAN: list[tuple[str, dict[str, Any]]] = []


@imp.tool(requires_approval=True)
def refund(order: str, amount: float) -> str:
    """Refund part of an order."""
    RAN.append(("refund", {"order": order, "amount": amount}))
    return f"refunded {amount:g} on {order}"


@imp.tool
def lookup(order: str) -> str:
    """Look up an order."""
    RAN.append(("lookup", {"order": order}))
    return f"{order}: paid 20"


@imp.tool
def notify(who: str) -> str:
    """Tell someone."""
    RAN.append(("notify", {"who": who}))
    return f"told {who}"


def call(id: str, name: str, **arguments: Any) -> dict[str, Any]:
    return {"id": id, "name": name, "arguments": arguments}


PARALLEL = {
    "tool_calls": [
        call("a", "lookup", order="o1"),
        call("b", "refund", order="o1", amount=20),
        call("c", "notify", who="ops"),
    ]
}


@pytest.fixture(autouse=True)
def _clear() -> None:
    RAN.clear()


def _through_json(pending: Pending) -> Pending:
    return imp.Pending.load(json.loads(json.dumps(pending.dump())))


async def test_parallel_calls_one_deferred_two_run_and_the_resume_runs_only_the_decided_one() -> None:
    lm = imp.ScriptedLM([PARALLEL, "Refunded 20 on o1."])
    agent = imp.react(SIG, [lookup, refund, notify], lm=lm)
    paused = await imp.call(agent, ticket="Charged twice for o1.")
    assert paused.metadata.termination_reason == "awaiting_approval"
    assert paused.complete is False and paused.reply is None
    assert sorted(name for name, _ in RAN) == ["lookup", "notify"]  # the step's other calls ran
    pending = paused.metadata.pending
    assert [(c.id, c.tool, dict(c.arguments)) for c in pending.calls] == [
        ("b", "refund", {"order": "o1", "amount": 20})
    ]
    assert "approval" in pending.calls[0].reason

    done = await imp.call(agent, resume=_through_json(pending), decisions={"b": imp.Allow()})
    assert done.complete and done.reply == "Refunded 20 on o1."
    assert RAN[2:] == [("refund", {"order": "o1", "amount": 20.0})]  # lookup and notify never ran again
    step = done.metadata.history[-2]
    assert [r.outcome for r in step.results] == ["result", "result", "result"]
    tool_messages = [m["content"] for m in lm.requests[-1].messages if m["role"] == "tool"]
    assert tool_messages == ["o1: paid 20", "refunded 20 on o1", "told ops"]


async def test_a_pending_value_resumes_once() -> None:
    lm = imp.ScriptedLM([PARALLEL, "Refunded.", "again"])
    agent = imp.react(SIG, [lookup, refund, notify], lm=lm)
    pending = (await imp.call(agent, ticket="t")).metadata.pending
    with pytest.raises(imp.ResumeError):  # refused decisions do not use it up
        await imp.call(agent, resume=pending, decisions={})
    await imp.call(agent, resume=pending, decisions={"b": imp.Allow()})
    with pytest.raises(imp.ResumeError, match="already resumed"):
        await imp.call(agent, resume=pending, decisions={"b": imp.Allow()})
    assert [name for name, _ in RAN].count("refund") == 1


async def test_edited_arguments_run_exactly_and_the_history_shows_what_ran() -> None:
    lm = imp.ScriptedLM([PARALLEL, "Refunded 5."])
    agent = imp.react(SIG, [lookup, refund, notify], lm=lm)
    pending = (await imp.call(agent, ticket="t")).metadata.pending
    done = await imp.call(agent, resume=pending, decisions={"b": imp.Allow(arguments={"order": "o1", "amount": 5})})
    assert ("refund", {"order": "o1", "amount": 5.0}) in RAN
    assert ("refund", {"order": "o1", "amount": 20.0}) not in RAN
    ran_call = next(c for c in done.metadata.history[-2].tool_calls if c.id == "b")
    assert dict(ran_call.arguments) == {"order": "o1", "amount": 5}


@pytest.mark.parametrize(
    "arguments",
    [{"order": "o1"}, {"order": "o1", "amount": "lots"}, {"order": 3, "amount": 1}, ["o1", 5]],
)
async def test_edited_arguments_that_do_not_fit_the_schema_are_refused_before_anything_runs(arguments: Any) -> None:
    lm = imp.ScriptedLM([PARALLEL, "never"])
    agent = imp.react(SIG, [lookup, refund, notify], lm=lm)
    pending = (await imp.call(agent, ticket="t")).metadata.pending
    before = list(RAN)
    with pytest.raises(imp.ResumeError, match="'b'"):
        await imp.call(agent, resume=pending, decisions={"b": imp.Allow(arguments=arguments)})
    assert before == RAN and len(lm.requests) == 1


async def test_a_denial_is_a_refusal_the_model_reads_and_the_tool_never_runs() -> None:
    lm = imp.ScriptedLM([PARALLEL, "I could not refund it."])
    agent = imp.react(SIG, [lookup, refund, notify], lm=lm)
    pending = (await imp.call(agent, ticket="t")).metadata.pending
    done = await imp.call(agent, resume=pending, decisions={"b": imp.Deny("over the limit")})
    assert done.complete and not any(name == "refund" for name, _ in RAN)
    result = next(r for r in done.metadata.history[-2].results if r.id == "b")
    assert result.outcome == "refused" and result.error == "refund was not allowed; over the limit."
    assert "Error: refund was not allowed; over the limit." in [m["content"] for m in lm.requests[-1].messages]


@pytest.mark.parametrize("decisions", [{}, {"x": imp.Allow()}, {"a": imp.Allow()}, None])
async def test_a_missing_decision_never_runs_the_call_and_names_the_undecided_ids(decisions: Any) -> None:
    lm = imp.ScriptedLM([PARALLEL, "never"])
    agent = imp.react(SIG, [lookup, refund, notify], lm=lm)
    pending = (await imp.call(agent, ticket="t")).metadata.pending
    before = list(RAN)
    with pytest.raises(imp.ResumeError) as caught:
        await imp.call(agent, resume=pending, decisions=decisions)
    assert caught.value.undecided == ("b",) or decisions is None
    assert "'b'" in str(caught.value) or decisions is None
    assert before == RAN and len(lm.requests) == 1


async def test_decisions_for_calls_that_are_not_pending_are_refused() -> None:
    lm = imp.ScriptedLM([PARALLEL, "never"])
    agent = imp.react(SIG, [lookup, refund, notify], lm=lm)
    pending = (await imp.call(agent, ticket="t")).metadata.pending
    with pytest.raises(imp.ResumeError, match="not pending"):
        await imp.call(agent, resume=pending, decisions={"b": imp.Allow(), "a": imp.Allow()})
    with pytest.raises(imp.ResumeError, match=r"imp\.Allow"):
        await imp.call(agent, resume=pending, decisions={"b": True})
    assert not any(name == "refund" for name, _ in RAN)


async def test_two_pauses_in_one_turn_and_several_calls_decided_by_one_resume() -> None:
    script = [
        {"tool_calls": [call("r1", "refund", order="o1", amount=1), call("r2", "refund", order="o2", amount=2)]},
        {"tool_calls": [call("r3", "refund", order="o3", amount=3)]},
        "Done.",
    ]
    lm = imp.ScriptedLM(script)
    agent = imp.react(SIG, [refund], lm=lm)
    first = (await imp.call(agent, ticket="t")).metadata.pending
    assert first.ids == ("r1", "r2")
    second_turn = await imp.call(
        agent, resume=_through_json(first), decisions={"r1": imp.Allow(), "r2": imp.Deny("no")}
    )
    assert second_turn.metadata.termination_reason == "awaiting_approval"
    second = second_turn.metadata.pending
    assert second.ids == ("r3",)  # a decided call never waits again
    done = await imp.call(agent, resume=_through_json(second), decisions={"r3": imp.Allow()})
    assert done.complete and done.reply == "Done."
    assert [a["order"] for name, a in RAN] == ["o1", "o3"]
    with pytest.raises(imp.ResumeError):  # the first pending's state no longer matches: nothing runs twice
        await imp.call(imp.react(SIG, [refund], lm=imp.ScriptedLM(["x"])), resume=second, decisions={})


async def test_an_authorizer_defers_a_call_and_a_result_from_outside_answers_it() -> None:
    lm = imp.ScriptedLM([{"tool_calls": [call("n1", "notify", who="ops")]}, "Sent."])
    agent = imp.react(SIG, [notify], lm=lm)

    def authorize(request: imp.tools.AuthorizationRequest) -> imp.Defer:
        return imp.Defer("a person sends this")

    paused = await imp.call(agent, ticket="t", authorize=authorize)
    pending = paused.metadata.pending
    assert pending.calls[0].reason == "notify was deferred: a person sends this."
    given = imp.ToolResult("n1", "notify", "sent by hand")
    done = await imp.call(agent, resume=pending, decisions={"n1": given}, authorize=authorize)
    assert done.complete and RAN == []
    assert "sent by hand" in [m["content"] for m in lm.requests[-1].messages]
    with pytest.raises(imp.ResumeError, match="answers `notify`"):
        await imp.call(agent, resume=pending, decisions={"n1": imp.ToolResult("zz", "notify", "x")})


async def test_a_submit_beside_a_deferred_call_ends_the_turn_once_the_call_is_decided() -> None:
    sig = imp.signature("ticket -> team: enum[atlas,harbor], contact: string")
    step = {"tool_calls": [call("r", "refund", order="o", amount=1), call("s", "submit", team="atlas", contact="Maya")]}
    lm = imp.ScriptedLM([step])
    agent = imp.react(sig, [refund], lm=lm)
    pending = (await imp.call(agent, ticket="t")).metadata.pending
    done = await imp.call(agent, resume=pending, decisions={"r": imp.Allow()})
    assert done.complete and done.metadata.termination_reason == "submit" and done.team == "atlas"
    assert RAN == [("refund", {"order": "o", "amount": 1.0})] and len(lm.requests) == 1


TEMPLATE = imp.TemplateAdapter(
    [imp.system("Handle the ticket. {instruction}"), imp.turns(), imp.user("Ticket: {ticket}")]
)


@pytest.mark.parametrize(
    "adapter",
    [imp.ChatAdapter(), imp.JSONAdapter(), imp.XMLAdapter(), TEMPLATE],
    ids=["chat", "json", "xml", "template"],
)
async def test_each_adapter_pauses_and_resumes(adapter: imp.Adapter) -> None:
    lm = imp.ScriptedLM([PARALLEL, {"reply": "ok"}])
    agent = imp.react(SIG, [lookup, refund, notify], lm=lm, adapter=adapter)
    pending = (await imp.call(agent, ticket="t")).metadata.pending
    done = await imp.call(agent, resume=_through_json(pending), decisions={"b": imp.Allow()})
    assert done.complete and done.reply == "ok" and done.metadata.adapter == adapter.name
    assert [m["content"] for m in lm.requests[-1].messages if m["role"] == "tool"][1] == "refunded 20 on o1"


async def test_written_tool_calls_pause_and_resume() -> None:
    """An LM without native tool calling writes its calls as text: the pause is the same."""
    step = {"tool_calls": [call("w", "refund", order="o9", amount=9)]}
    lm = imp.ScriptedLM([step, "Refunded."], tool_calling=False)
    agent = imp.react(SIG, [refund], lm=lm)
    pending = (await imp.call(agent, ticket="t")).metadata.pending
    assert pending.calls[0].tool == "refund"
    done = await imp.call(agent, resume=pending, decisions={pending.ids[0]: imp.Allow()})
    assert done.complete and RAN == [("refund", {"order": "o9", "amount": 9.0})]


async def test_streaming_ends_with_a_pending_part_and_the_resume_streams_the_rest() -> None:
    lm = imp.ScriptedLM([PARALLEL, "Refunded."])
    agent = imp.react(SIG, [lookup, refund, notify], lm=lm)
    parts = [part async for part in imp.stream(agent, ticket="t")]
    assert parts[-1].kind == "pending" and all(p.kind != "final" for p in parts)
    assert parts[-1].pending.ids == ("b",) and parts[-1].prediction.complete is False
    deferred = [p for p in parts if p.kind == "tool_result" and p.outcome == "deferred"]
    assert [p.tool_call_id for p in deferred] == ["b"]
    rest = [part async for part in imp.stream(agent, resume=parts[-1].pending, decisions={"b": imp.Allow()})]
    assert [p.kind for p in rest if p.kind in ("tool_result", "final")] == ["tool_result", "final"]
    assert rest[-1].prediction.reply == "Refunded."


async def test_the_pause_is_not_a_timeout() -> None:
    lm = imp.ScriptedLM([PARALLEL, "Refunded."])
    agent = imp.react(SIG, [lookup, refund, notify], lm=lm)
    started = time.monotonic()
    with imp.deadline(0.5):
        paused = await imp.call(agent, ticket="t")
    assert time.monotonic() - started < 0.5  # the pause answers at once; nothing waits for a person
    assert paused.metadata.termination_reason == "awaiting_approval" and paused.metadata.termination_cause is None
    await anyio.sleep(0.6)  # the person takes longer than the first call's deadline
    with imp.deadline(5):
        done = await imp.call(agent, resume=paused.metadata.pending, decisions={"b": imp.Allow()})
    assert done.complete and done.metadata.termination_cause is None


async def test_a_resume_whose_deadline_has_passed_runs_nothing() -> None:
    lm = imp.ScriptedLM([PARALLEL, "never"])
    agent = imp.react(SIG, [lookup, refund, notify], lm=lm)
    pending = (await imp.call(agent, ticket="t")).metadata.pending
    with imp.deadline(0.01):
        time.sleep(0.05)  # noqa: ASYNC251 - no checkpoint: the deadline passes before the resume starts
        done = await imp.call(agent, resume=pending, decisions={"b": imp.Allow()})
    assert done.metadata.termination_cause == "deadline_exceeded" and not done.complete
    assert not any(name == "refund" for name, _ in RAN)
    # Nothing ran, so the turn still waits: its pending turn comes back, usable again (as is the value
    # given, which this resume did not use up), the call still `deferred` in the history.
    again = done.metadata.pending
    assert again is not None and again.ids == ("b",) and done.metadata.termination_reason == "incomplete"
    assert [r.outcome for r in done.metadata.history[-1].result_list()] == ["result", "deferred", "result"]
    assert done.metadata.usage.requests == 0
    assert _through_json(again).dump() == _through_json(pending).dump()
    finished = await imp.call(agent, resume=again, decisions={"b": imp.Allow()})
    assert finished.complete and finished.reply == "never"
    assert [name for name, _ in RAN].count("refund") == 1
    with pytest.raises(imp.ResumeError, match="already resumed"):  # used now: its approved call ran
        await imp.call(agent, resume=again, decisions={"b": imp.Allow()})


async def test_resume_takes_a_pending_of_its_own_kind_and_no_new_inputs() -> None:
    lm = imp.ScriptedLM([PARALLEL])
    agent = imp.react(SIG, [lookup, refund, notify], lm=lm)
    pending = (await imp.call(agent, ticket="t")).metadata.pending
    with pytest.raises(TypeError, match=r"imp\.Pending\.load"):
        await imp.call(agent, resume=pending.dump(), decisions={"b": imp.Allow()})
    with pytest.raises(TypeError, match="inputs from the pending"):
        await imp.call(agent, {"ticket": "other"}, resume=pending, decisions={"b": imp.Allow()})
    with pytest.raises(TypeError, match="never pauses"):
        await imp.call(imp.predict(SIG, lm=lm), resume=pending, decisions={})
    with pytest.raises(TypeError, match="resume="):
        await imp.call(agent, ticket="t", decisions={"b": imp.Allow()})
    assert not any(name == "refund" for name, _ in RAN)


# --- hostile pending data --------------------------------------------------------------------------


async def _paused_dump() -> tuple[imp.ReAct, dict[str, Any]]:
    agent = imp.react(SIG, [lookup, refund, notify], lm=imp.ScriptedLM([PARALLEL, "ok", "ok"]))
    paused = await imp.call(agent, ticket="t", config={"api_key": "sk-live-1234567890abcdef", "temperature": 0})
    return agent, json.loads(json.dumps(paused.metadata.pending.dump()))


async def test_pending_data_holds_no_credential_and_no_code() -> None:
    _agent, data = await _paused_dump()
    text = json.dumps(data)
    assert "sk-live" not in text and "api_key" not in text
    assert data["options"]["config"] == {"temperature": 0}
    assert "<function" not in text and "runner" not in text


@pytest.mark.parametrize(
    ("change", "error"),
    [
        (lambda d: d["calls"][0].update(tool="os.system"), imp.ResumeError),  # a tool the program does not hold
        (lambda d: d["calls"][0].update(tool="lookup"), imp.ResumeError),  # its state says otherwise
        (lambda d: d["calls"][0].update(id="a"), imp.ResumeError),  # a call that already ran
        (lambda d: d["calls"][0].update(arguments={"order": "o1", "amount": "all"}), imp.ResumeError),
        (lambda d: d["state"]["steps"].clear(), imp.ResumeError),
        (lambda d: d["state"].update(step="9"), imp.ResumeError),
        (lambda d: d["inputs"].update(shell="rm -rf /"), imp.ResumeError),
    ],
)
async def test_tampered_pending_data_is_refused_before_anything_runs(change: Any, error: type[Exception]) -> None:
    agent, data = await _paused_dump()
    change(data)
    before = list(RAN)
    with pytest.raises(error):
        await imp.call(agent, resume=imp.Pending.load(data), decisions={data["calls"][0]["id"]: imp.Allow()})
    assert before == RAN


@pytest.mark.parametrize(
    "change",
    [
        lambda d: d.update(type="react_turn"),
        lambda d: d.update(version=99),
        lambda d: d.update(program="shell"),
        lambda d: d.update(calls=[]),
        lambda d: d.update(calls=[{"id": 1, "tool": "refund"}]),
        lambda d: d.update(calls=[{"id": "b", "tool": "refund", "arguments": "rm"}]),
        lambda d: d.update(calls=[d["calls"][0], d["calls"][0]]),
        lambda d: d.update(calls=[d["calls"][0]] * 2000),
        lambda d: d.update(state=[1, 2]),
    ],
)
async def test_malformed_pending_data_is_a_value_error_naming_the_key(change: Any) -> None:
    _, data = await _paused_dump()
    change(data)
    with pytest.raises(ValueError):
        imp.Pending.load(data)


# --- across two processes --------------------------------------------------------------------------

PROCESS = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import anyio, imp

    where = Path(sys.argv[2])

    @imp.tool(requires_approval=True)
    def refund(order: str, amount: float) -> str:
        '''Refund part of an order.'''
        with open(where / "runs.txt", "a") as f:
            f.write(f"{order} {amount:g}\\n")
        return f"refunded {amount:g}"

    lm = imp.ScriptedLM([
        {"tool_calls": [{"id": "r1", "name": "refund", "arguments": {"order": "o1", "amount": 20}}]},
        "Refunded.",
    ][int(sys.argv[3]):])
    agent = imp.react("ticket -> reply", [refund], lm=lm)

    async def main() -> None:
        if sys.argv[1] == "start":
            paused = await imp.call(agent, ticket="Charged twice.")
            (where / "pending.json").write_text(json.dumps(paused.metadata.pending.dump()))
        else:
            pending = imp.Pending.load(json.loads((where / "pending.json").read_text()))
            done = await imp.call(agent, resume=pending, decisions={"r1": imp.Allow(arguments={"order": "o1", "amount": 7})})
            print(json.dumps({"reply": done.reply, "complete": done.complete}))

    anyio.run(main)
    """
)


def test_a_pause_and_resume_across_two_processes(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(PROCESS)
    first = subprocess.run(
        [sys.executable, str(script), "start", str(tmp_path), "0"], capture_output=True, text=True, timeout=120
    )
    assert first.returncode == 0, first.stderr
    assert not (tmp_path / "runs.txt").exists()
    assert json.loads((tmp_path / "pending.json").read_text())["calls"][0]["arguments"] == {"order": "o1", "amount": 20}
    second = subprocess.run(
        [sys.executable, str(script), "resume", str(tmp_path), "1"], capture_output=True, text=True, timeout=120
    )
    assert second.returncode == 0, second.stderr
    assert json.loads(second.stdout) == {"reply": "Refunded.", "complete": True}
    assert (tmp_path / "runs.txt").read_text() == "o1 7\n"


# --- react_trajectory ------------------------------------------------------------------------------


def _trajectory_step(name: str, **arguments: Any) -> dict[str, Any]:
    return {"next_thought": f"use {name}", "next_tool_name": name, "next_tool_args": arguments}


@pytest.mark.parametrize("decision", ["allow", "edit", "deny"])
async def test_react_trajectory_pauses_and_resumes(decision: str) -> None:
    script = [
        _trajectory_step("lookup", order="o1"),
        _trajectory_step("refund", order="o1", amount=20),
        _trajectory_step("finish"),
        {"reasoning": "done", "reply": "Handled."},
    ]
    lm = imp.ScriptedLM(script)
    agent = imp.react_trajectory(SIG, [lookup, refund], lm=lm)
    paused = await imp.call(agent, ticket="t")
    assert paused.metadata.termination_reason == "awaiting_approval" and not paused.complete
    pending = _through_json(paused.metadata.pending)
    assert pending.program == "react_trajectory"
    assert [(c.id, c.tool, dict(c.arguments)) for c in pending.calls] == [
        ("call_2", "refund", {"order": "o1", "amount": 20})
    ]
    assert RAN == [("lookup", {"order": "o1"})]
    chosen = {
        "allow": imp.Allow(),
        "edit": imp.Allow(arguments={"order": "o1", "amount": 3}),
        "deny": imp.Deny("too much"),
    }[decision]
    with pytest.raises(imp.ResumeError):
        await imp.call(agent, resume=pending, decisions={})
    done = await imp.call(agent, resume=pending, decisions={"call_2": chosen})
    assert done.complete and done.reply == "Handled."
    refunds = [a for name, a in RAN if name == "refund"]
    assert (
        refunds
        == {"allow": [{"order": "o1", "amount": 20.0}], "edit": [{"order": "o1", "amount": 3.0}], "deny": []}[decision]
    )
    assert [n for n, _ in RAN].count("lookup") == 1  # the step before the pause never runs again
    trajectory = done.metadata["trajectory"]
    assert (
        trajectory["observation_1"]
        == {
            "allow": "refunded 20 on o1",
            "edit": "refunded 3 on o1",
            "deny": "Error: refund was not allowed; too much.",
        }[decision]
    )
    with pytest.raises(imp.ResumeError, match="paused by react_trajectory"):
        await imp.call(imp.react(SIG, [refund], lm=lm), resume=pending, decisions={"call_2": imp.Allow()})


async def test_a_submit_beside_a_deferred_call_is_checked_by_the_validator_once_the_call_is_decided() -> None:
    # The submit was made before the call waited; the resumed step is settled as any step is, so the
    # validator reads its outputs, refuses them, and the model reads why before it calls submit again.
    sig = imp.signature("ticket -> team: enum[atlas,harbor], contact: string")
    reasons: list[str] = []

    def maya(prediction: imp.Prediction) -> None:
        if prediction.contact != "Maya":
            reasons.append(prediction.contact)
            raise imp.Retry("atlas's on-call engineer is Maya")

    step = {"tool_calls": [call("r", "refund", order="o", amount=1), call("s", "submit", team="atlas", contact="Bob")]}
    lm = imp.ScriptedLM([step, {"tool_calls": [call("s2", "submit", team="atlas", contact="Maya")]}])
    agent = imp.react(sig, [refund], lm=lm, validate=maya)
    pending = _through_json((await imp.call(agent, ticket="t")).metadata.pending)
    assert reasons == []  # nothing decides a step while one of its calls waits
    done = await imp.call(agent, resume=pending, decisions={"r": imp.Allow()})
    assert done.complete and done.metadata.termination_reason == "submit" and done.contact == "Maya"
    assert reasons == ["Bob"] and len(lm.requests) == 2
    assert "atlas's on-call engineer is Maya" in str(lm.requests[1].messages[-1]["content"])
    paused_step = done.metadata.history[-2]
    assert [(r.name, r.outcome) for r in paused_step.result_list()] == [("refund", "result"), ("submit", "refused")]
    assert RAN == [("refund", {"order": "o", "amount": 1.0})]


@pytest.mark.parametrize("interrupted", ["max_iters", "prediction_error"])
@pytest.mark.parametrize("decision", ["allow", "deny"])
async def test_a_last_request_whose_tool_waits_ends_with_its_own_text_once_decided(
    interrupted: str, decision: str
) -> None:
    # The last request of an interrupted turn is the last: a `last_request_tools` call in it that waits
    # for approval pauses the turn there, and the resumed turn ends with that request's text
    # (`last_text`, with the cause that interrupted it), never with a second last request.
    first: Any = {"tool_calls": [call("a", "lookup", order="o1")]}
    if interrupted == "prediction_error":
        first = imp.LMError("upstream unavailable", status=503, provider="openai")
    last = {"reply": "Refunded o1.", "tool_calls": [call("r", "refund", order="o1", amount=20)]}
    lm = imp.ScriptedLM([first, last, "a second last request"])
    agent = imp.react(SIG, [lookup, refund], lm=lm, max_iters=1, last_request_tools=["refund"])
    paused = await imp.call(agent, ticket="t")
    assert paused.metadata.termination_reason == "awaiting_approval" and len(lm.requests) == 2
    chosen = imp.Allow() if decision == "allow" else imp.Deny("too much")
    done = await imp.call(agent, resume=_through_json(paused.metadata.pending), decisions={"r": chosen})
    assert len(lm.requests) == 2
    assert (done.reply, done.complete) == ("Refunded o1.", True)
    assert (done.metadata.termination_reason, done.metadata.termination_cause) == ("last_text", interrupted)
    newest = done.metadata.history[-1]
    assert newest["reply"] == "Refunded o1."
    assert [r.outcome for r in newest.results] == (["result"] if decision == "allow" else ["refused"])
    assert [name for name, _ in RAN].count("refund") == (1 if decision == "allow" else 0)


async def test_a_paused_last_text_the_validator_refuses_is_recorded_as_a_thought_then_the_reason() -> None:
    # The same record as a refused last text that paused nowhere: the text is the calls' step's
    # thought, then the reason; no step holds it as the answer, so a later call reads no answered turn.
    def never(prediction: imp.Prediction) -> None:
        raise imp.Retry("say how much was refunded")

    last = {"reply": "Refunded o1.", "tool_calls": [call("r", "refund", order="o1", amount=20)]}
    lm = imp.ScriptedLM([{"tool_calls": [call("a", "lookup", order="o1")]}, last])
    agent = imp.react(SIG, [lookup, refund], lm=lm, max_iters=1, last_request_tools=["refund"], validate=never)
    paused = await imp.call(agent, ticket="t")
    done = await imp.call(agent, resume=_through_json(paused.metadata.pending), decisions={"r": imp.Allow()})
    assert (done.complete, done.metadata.termination_cause) == (False, "invalid_answer")
    history = done.metadata.history
    assert not any("reply" in step.fields for step in history)
    assert (history[-2].thought, [c.name for c in history[-2].calls]) == ("Refunded o1.", ["refund"])
    assert history[-1].note == "Your answer was not accepted: say how much was refunded"
    assert [name for name, _ in RAN].count("refund") == 1


@pytest.mark.parametrize("decision", ["allow", "deny", "given"])
async def test_both_loops_report_a_decided_call_once_however_it_was_decided(decision: str) -> None:
    # A resumed call is reported as a call and its result whether it ran, was denied, or was answered
    # from outside: `imp.react` always did; `imp.react_trajectory` reported only the call that ran.
    def chosen(call_id: str) -> Any:
        return {
            "allow": imp.Allow(),
            "deny": imp.Deny("too much"),
            "given": imp.ToolResult(call_id, "refund", "refunded by hand"),
        }[decision]

    expected = {"allow": "result", "deny": "refused", "given": "result"}[decision]

    def trajectory() -> Any:
        script = [
            _trajectory_step("refund", order="o1", amount=20),
            _trajectory_step("finish"),
            {"reasoning": "r", "reply": "ok"},
        ]
        return imp.react_trajectory(SIG, [refund], lm=imp.ScriptedLM(script))

    def react() -> Any:
        return imp.react(
            SIG, [refund], lm=imp.ScriptedLM([{"tool_calls": [call("r", "refund", order="o1", amount=20)]}, "ok"])
        )

    for make, call_id in ((trajectory, "call_1"), (react, "r")):
        agent = make()
        pending = (await imp.call(agent, ticket="t")).metadata.pending
        events: list[Any] = []
        await imp.call(agent, resume=pending, decisions={call_id: chosen(call_id)}, on_event=events.append)
        tools = [e for e in events if e.kind.startswith("tool_")]
        assert [e.kind for e in tools[:2]] == ["tool_call", "tool_result"], make
        assert (tools[0].payload["tool_name"], tools[1].payload["outcome"]) == ("refund", expected)
        assert tools[0].payload["tool_call_id"] == tools[1].payload["tool_call_id"] == call_id
        agent = make()
        parts = [p async for p in imp.stream(agent, ticket="t")]
        rest = [p async for p in imp.stream(agent, resume=parts[-1].pending, decisions={call_id: chosen(call_id)})]
        assert [(p.kind, p.outcome) for p in rest if p.kind.startswith("tool_")][:2] == [
            ("tool_call", None),
            ("tool_result", expected),
        ]


async def test_a_resume_the_budget_refuses_raises_with_the_turn_so_far() -> None:
    # docs/cost.md: a react turn the budget stops raises with its history; a resume refused before its
    # approved calls run is such a turn (and its pending turn can still be resumed).
    lm = imp.ScriptedLM([PARALLEL, "Refunded."])
    agent = imp.react(SIG, [lookup, refund, notify], lm=lm)
    pending = (await imp.call(agent, ticket="t")).metadata.pending
    with pytest.raises(imp.BudgetExceeded) as refused:
        await imp.call(agent, resume=pending, decisions={"b": imp.Allow()}, budget=imp.Budget(tool_calls=0))
    history = refused.value.history
    assert history is not None and history[0]["ticket"] == "t"
    assert [r.outcome for r in history[-1].results] == ["result", "deferred", "result"]
    assert not any(name == "refund" for name, _ in RAN)
    done = await imp.call(agent, resume=pending, decisions={"b": imp.Allow()})
    assert done.complete and done.reply == "Refunded."


@pytest.mark.parametrize("kind", ["react", "react_trajectory"])
async def test_a_call_that_waits_is_counted_in_the_budget_once_when_it_runs(kind: str) -> None:
    # docs/cost.md: `tool_calls` counts the tools a turn runs. A `requires_approval` call does not run
    # in the call that pauses; the resume reserves it when it runs, so one budget over both counts it once.
    if kind == "react":
        steps: list[Any] = [
            {"tool_calls": [call("a", "lookup", order="o1"), call("b", "refund", order="o1", amount=20)]},
            "Done.",
        ]
        agent: Any = imp.react(SIG, [lookup, refund], lm=imp.ScriptedLM(steps))
    else:
        steps = [
            _trajectory_step("lookup", order="o1"),
            _trajectory_step("refund", order="o1", amount=20),
            _trajectory_step("finish"),
            {"reasoning": "r", "reply": "Done."},
        ]
        agent = imp.react_trajectory(SIG, [lookup, refund], lm=imp.ScriptedLM(steps))
    budget = imp.Budget(tool_calls=2)
    paused = await imp.call(agent, ticket="t", budget=budget)  # one call ran: not refused for two
    assert paused.metadata.termination_reason == "awaiting_approval" and budget.spent.tool_calls == 1
    decisions = {c.id: imp.Allow() for c in paused.metadata.pending.calls}
    done = await imp.call(agent, resume=paused.metadata.pending, decisions=decisions, budget=budget)
    assert done.complete and budget.spent.tool_calls == 2
    assert [name for name, _ in RAN] == ["lookup", "refund"]
