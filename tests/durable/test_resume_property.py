"""The journaled approvals' property: for random scripts of calls, random decisions and a crash at a
random point (an LM request or a tool run that never returns), a run re-driven from its journal by
its run id never runs a gated call without an approval, runs each approved call with exactly the
arguments approved, runs it again only if it was the call the crash cut (with the same idempotency
key), sends no recorded request again, and ends as an uncrashed run ends."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import anyio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import imp

SIG = imp.signature("question -> answer")
TOOLS = ("free", "gated")

steps = st.lists(
    st.lists(st.tuples(st.integers(0, 1), st.integers(0, 99)), min_size=1, max_size=3), min_size=1, max_size=3
)
choices = st.lists(st.sampled_from(["allow", "edit", "deny"]), min_size=9, max_size=9)
crash_points = st.integers(1, 30)


class Crash(BaseException):
    """Stands in for a killed process."""


class World:
    """The model (a function of the request), the tools, the log of what ran, and the crash."""

    def __init__(self, script: list[list[tuple[int, int]]], crash_at: int | None) -> None:
        self.script = script
        self.crash_at = crash_at
        self.events = 0
        self.sent = 0
        self.ran: list[tuple[str, str | None, int]] = []

    def tick(self) -> None:
        self.events += 1
        if self.events == self.crash_at:
            raise Crash

    def reply(self, messages: list[Any], options: Any) -> Any:
        self.sent += 1
        self.tick()
        done = sum(1 for m in messages if m.get("role") == "assistant" and m.get("tool_calls"))
        if done < len(self.script):
            calls = [
                {"id": f"c{done}_{j}", "name": TOOLS[t], "arguments": {"n": n}}
                for j, (t, n) in enumerate(self.script[done])
            ]
            return {"tool_calls": calls}
        return "done " + ";".join(str(m.get("content")) for m in messages if m.get("role") == "tool")

    def program(self) -> imp.ReAct:
        def make(name: str, gated: bool) -> imp.Tool:
            async def run(n: int) -> str:
                self.ran.append((name, imp.idempotency_key(), n))
                self.tick()
                return f"{name}:{n}"

            return imp.tool(run, name=name, description=f"The {name} tool.", requires_approval=gated)

        return imp.react(SIG, [make("free", False), make("gated", True)], lm=imp.StaticLM(self.reply), max_iters=10)


def decide(pending: imp.Pending, picks: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for call in pending.calls:
        step, index = (int(x) for x in call.id[1:].split("_"))
        pick = picks[3 * step + index]
        n = int(call.arguments["n"])
        out[call.id] = (
            imp.Allow()
            if pick == "allow"
            else imp.Allow(arguments={"n": n + 1000})
            if pick == "edit"
            else imp.Deny("no")
        )
    return out


async def drive(world: World, journal: Any, picks: list[str]) -> imp.Prediction:
    """The application: start the run, then decide each pause and resume by the run id."""
    program = world.program()
    p = await imp.call(program, question="go", run_id="r", journal=journal)
    while p.metadata.pending is not None:
        p = await imp.call(program, run_id="r", journal=journal, decisions=decide(p.metadata.pending, picks))
    return p


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(steps, choices, crash_points)
def test_a_crash_anywhere_in_a_paused_and_resumed_run_repeats_nothing_recorded(
    script: list[list[tuple[int, int]]], picks: list[str], crash_at: int
) -> None:
    async def run() -> None:
        reference_world = World(script, None)
        with tempfile.TemporaryDirectory() as folder:
            reference = await drive(reference_world, imp.SQLiteJournal(Path(folder) / "ref.db"), picks)
            journal = imp.SQLiteJournal(Path(folder) / "runs.db")
            world = World(script, crash_at)
            crashed = False
            try:
                await drive(world, journal, picks)
            except BaseException as exc:  # the Crash, maybe wrapped by the tool step's task group
                crashed = True
                assert isinstance(exc, Crash) or "Crash" in repr(exc)
            sent_before = world.sent
            recorded = {s.key for s in journal.steps("r")}
            world.crash_at = None
            final = await drive(world, journal, picks)
        assert final == reference
        # Every run of a gated call was approved, with the arguments approved.
        approved = set(_approvals(script, picks))
        for name, key, n in world.ran:
            if name == "gated":
                call_id = str(key).rsplit(":", 1)[1]
                assert (call_id, n) in approved, f"gated {call_id} ran with n={n} without that approval"
        # A call runs twice only when the crash cut it (never one the journal held), with one key.
        keys = [key for _, key, _ in world.ran]
        repeated = {k for k in keys if keys.count(k) > 1}
        assert crashed or not repeated
        for key in repeated:
            assert str(key).split(":", 1)[1] not in recorded, f"{key} was recorded and ran again"
        assert sorted(set(keys)) == sorted(key for _, key, _ in reference_world.ran)
        # The resumed drive sent only the requests the journal did not hold.
        lm_recorded = sum(1 for k in recorded if ":" not in k)
        assert world.sent - sent_before == reference_world.sent - lm_recorded

    anyio.run(run)


def _approvals(script: list[list[tuple[int, int]]], picks: list[str]) -> list[tuple[str, int]]:
    out = []
    for step, calls in enumerate(script):
        for index, (tool, n) in enumerate(calls):
            pick = picks[3 * step + index]
            if TOOLS[tool] == "gated" and pick != "deny":
                out.append((f"c{step}_{index}", n + 1000 if pick == "edit" else n))
    return out
