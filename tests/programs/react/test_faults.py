"""A bounded fault-injection run: every fault kind, both backends, every turn ends typed, the outcomes counted."""

import random
from collections import Counter
from typing import Any

import anyio
import pytest
from react_fixtures import escalation, on_call

import imp
from imp.models.base import LMResponse

BACKENDS = ["asyncio", "trio"]
TURNS = 120
FAULTS = [
    "lookup",
    "submit",
    "bad_submit",
    "thought",
    "empty",
    "garbage",
    "server_error",
    "rate_limited",
    "overflow",
    "unauthorized",
    "quota",
    "tool_choice_refused",
    "hang",
]


def reply(kind: str, step: int) -> Any:
    """One scripted reply (or the error it raises) of the given fault kind."""
    calls = {
        "lookup": [imp.ToolCall(f"c{step}", "on_call", {"team": "atlas"})],
        "submit": [imp.ToolCall(f"c{step}", "submit", {"team": "atlas", "contact": "Maya"})],
        "bad_submit": [imp.ToolCall(f"c{step}", "submit", {"team": "nowhere"})],
    }
    errors = {
        "server_error": imp.LMError("upstream broke", status=500),
        "rate_limited": imp.LMError("slow down", status=429, retryable=True),
        "overflow": imp.LMError("maximum context length exceeded", status=400, context_window_exceeded=True),
        "unauthorized": imp.LMError("invalid api key", status=401),
        "quota": imp.LMError("quota", status=429, code="insufficient_quota"),
        "tool_choice_refused": imp.ToolChoiceUnsupported("tool_choice: only `auto` is supported", status=400),
    }
    if kind in calls:
        return LMResponse(tool_calls=tuple(calls[kind]), finish_reason="tool_calls")
    if kind in errors:
        raise errors[kind]
    if kind == "thought":
        return LMResponse(text="Let me think about it.")
    if kind == "garbage":
        return LMResponse(text='[[ ## team ## ]]\n{"oops')
    return LMResponse(text="")


def faulty_lm(seed: int) -> imp.StaticLM:
    rng = random.Random(seed)
    step = 0

    async def handler(messages: list[dict[str, Any]], options: dict[str, Any]) -> Any:
        nonlocal step
        step += 1
        kind = rng.choice(FAULTS)
        if kind == "hang":
            await anyio.sleep(30)
        return reply(kind, step)

    return imp.StaticLM(handler=handler)


async def run_faults() -> Counter[str]:
    program = imp.react(escalation, [on_call], max_iters=4)
    outcomes: Counter[str] = Counter()

    async def one(index: int) -> None:
        ticket = f"ticket #{index}"
        try:
            # Only a hanging model reaches the deadline: 3 s leaves the other turns time to end their
            # own way on a loaded machine (each of their steps answers at once).
            with imp.deadline(3.0):
                prediction = await imp.call(program.with_lm(faulty_lm(index)), ticket=ticket)
        except (imp.LMError, imp.ReActStepError) as exc:
            history = exc.history  # type: ignore[union-attr]
            assert isinstance(history, imp.History) and history[0]["ticket"] == ticket, "the history is kept"
            outcomes[f"raised {type(exc).__name__}"] += 1
            return
        meta = prediction.metadata
        assert meta.history[0]["ticket"] == ticket
        if prediction.complete:
            assert prediction.team == "atlas" and prediction.contact == "Maya", "complete means answered"
            assert meta.termination_reason != "incomplete"
        else:
            assert meta.termination_reason == "incomplete" and meta.termination_cause is not None
        outcomes[f"{meta.termination_reason}/{meta.termination_cause}"] += 1

    async with anyio.create_task_group() as group:
        for index in range(TURNS):
            group.start_soon(one, index)
    return outcomes


@pytest.mark.parametrize("backend", BACKENDS)
def test_every_faulty_turn_ends_typed(backend: str) -> None:
    outcomes = anyio.run(run_faults, backend=backend)
    assert sum(outcomes.values()) == TURNS
    kinds = {key.split("/")[0] for key in outcomes}
    assert {"submit", "incomplete"} <= kinds, outcomes
    raised = {kind for kind in kinds if kind.startswith("raised ")}
    assert raised and raised <= {
        "raised AuthenticationError",
        "raised QuotaExceeded",
        "raised BadRequest",
        "raised ReActStepError",
    }, outcomes
    assert outcomes["incomplete/deadline_exceeded"] > 0, outcomes
