"""The approvals' property: for random scripts of calls and decisions, no tool that needs approval
ever runs without one, and every approved call runs exactly once, with the arguments approved."""

from __future__ import annotations

import json
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import imp

SIG = imp.signature("question -> answer")
TOOLS = ("free", "gated_a", "gated_b")

# One step: a list of (tool index, argument) calls. One decision per waiting call.
steps = st.lists(
    st.lists(st.tuples(st.integers(0, 2), st.integers(0, 99)), min_size=1, max_size=4), min_size=1, max_size=4
)
decisions = st.lists(st.sampled_from(["allow", "edit", "deny", "result", "skip"]), min_size=64, max_size=64)
defer_free = st.booleans()


def _program(log: list[tuple[str, str, int]], script: list[Any]) -> imp.ReAct:
    def make(name: str, gated: bool) -> imp.Tool:
        async def run(n: int) -> str:
            log.append((name, imp.tools.events.current_tool_call_id() or "", n))
            return f"{name}:{n}"

        return imp.tool(run, name=name, description=f"The {name} tool.", requires_approval=gated)

    tools = [make("free", False), make("gated_a", True), make("gated_b", True)]
    return imp.react(SIG, tools, lm=imp.ScriptedLM(script), max_iters=10)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, decisions, defer_free)
def test_no_tool_runs_without_approval_and_each_approved_call_runs_once_as_approved(
    script_steps: list[list[tuple[int, int]]], choices: list[str], authorizer_defers: bool
) -> None:
    log: list[tuple[str, str, int]] = []
    script: list[Any] = [
        {"tool_calls": [{"id": f"c{i}_{j}", "name": TOOLS[t], "arguments": {"n": n}} for j, (t, n) in enumerate(step)]}
        for i, step in enumerate(script_steps)
    ]
    script.append("done")
    program = _program(log, script)
    approved: dict[str, int] = {}
    withheld: set[str] = set()
    picks = iter(choices)

    def authorize(request: imp.tools.AuthorizationRequest) -> Any:
        # An authorizer may defer calls to a tool that does not need approval: they wait the same way.
        return (
            imp.Defer("checked by a person") if authorizer_defers and request.arguments.get("n", 0) % 2 else imp.Allow()
        )

    async def run() -> imp.Prediction:
        prediction = await imp.call(program, question="q", authorize=authorize)
        while prediction.metadata.pending is not None:
            pending = imp.Pending.load(json.loads(json.dumps(prediction.metadata.pending.dump())))
            decided: dict[str, Any] = {}
            for waiting in pending.calls:
                pick = next(picks)
                if pick == "skip":  # an undecided call: the resume is refused and nothing runs
                    before = list(log)
                    try:
                        await imp.call(program, resume=pending, decisions=decided, authorize=authorize)
                    except imp.ResumeError:
                        pass
                    else:
                        raise AssertionError("a resume without every decision ran")
                    assert log == before
                    pick = "deny"
                if pick == "allow":
                    decided[waiting.id] = imp.Allow()
                    approved[waiting.id] = waiting.arguments["n"]
                elif pick == "edit":
                    edited = (waiting.arguments["n"] + 1000) % 5000
                    decided[waiting.id] = imp.Allow(arguments={"n": edited})
                    approved[waiting.id] = edited
                elif pick == "deny":
                    decided[waiting.id] = imp.Deny("no")
                    withheld.add(waiting.id)
                else:
                    decided[waiting.id] = imp.ToolResult(waiting.id, waiting.tool, "given")
                    withheld.add(waiting.id)
            prediction = await imp.call(program, resume=pending, decisions=decided, authorize=authorize)
        return prediction

    final = anyio.run(run)
    assert final.complete and final.answer == "done"
    runs = [(call_id, n) for name, call_id, n in log if call_id in approved or name != "free" or authorizer_defers]
    ran_ids = [call_id for call_id, _ in runs]
    for name, call_id, n in log:
        if name != "free" or call_id in approved or call_id in withheld:
            assert call_id in approved, f"{name} ran without an approval ({call_id})"
            assert approved[call_id] == n, "an approved call ran with other arguments than approved"
    for call_id in approved:
        assert ran_ids.count(call_id) == 1, f"approved call {call_id} ran {ran_ids.count(call_id)} times"
    assert not withheld & set(ran_ids)
    every_call = [c["id"] for step in script[:-1] for c in step["tool_calls"]]
    assert len(log) == len(set(c for _, c, _ in log))  # no call ran twice
    assert set(c for _, c, _ in log) <= set(every_call)
