"""A step's tool calls: running them (policy, authorization, deadline) and deciding whether they end the turn."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import anyio

from imp.history import Step, ToolCall, ToolResult
from imp.models.base import LMResponse
from imp.programs.react._state import SUBMIT, Ending, Turn, incomplete
from imp.runtime.deadline import time_left
from imp.runtime.run import current_run, emit
from imp.tools import ToolError, ToolEvent, run_tool_calls

if TYPE_CHECKING:
    from imp.programs.react._program import ReAct

__all__ = ["CONTINUE", "Finish", "FinishOn", "Ran", "act", "check_outputs", "decide", "run_calls"]


@dataclass(frozen=True, slots=True)
class Finish:
    """Returned by a `finish_on` function: end the turn with these outputs."""

    outputs: Mapping[str, Any]


class _Continue:
    """Returned by a `finish_on` function: let the loop go on."""

    def __repr__(self) -> str:
        return "imp.CONTINUE"


CONTINUE = _Continue()
FinishOn = Callable[[Mapping[str, Any], Any, Mapping[str, Any]], "Finish | _Continue"]


@dataclass(frozen=True, slots=True)
class Ran:
    """What running a step's calls gave: the results so far, and whether the deadline cut them short."""

    results: tuple[ToolResult, ...]
    timed_out: bool = False


async def run_calls(program: ReAct, turn: Turn, calls: Sequence[ToolCall], step: Step) -> Ran:
    """Run the calls under the program's policy, the run's authorization and the deadline.

    If anything but the deadline stops them (a cancellation, `ExecutionCancelled`), the step is
    recorded with the results so far before the exception goes on.
    """
    run = current_run()
    results: list[ToolResult] = []
    left = time_left()
    try:
        with anyio.fail_after(left) if left is not None else nullcontext():
            await run_tool_calls(
                list(calls),
                turn.roster,
                policy=program.tool_policy,
                authorize=run.authorize if run is not None else None,
                on_event=_forward_tool_event,
                into=results,
            )
    except TimeoutError:
        return Ran(tuple(results), timed_out=True)
    except BaseException:
        turn.add(_with_results(step, results))
        raise
    return Ran(tuple(results))


def decide(
    program: ReAct, turn: Turn, calls: Sequence[ToolCall], results: tuple[ToolResult, ...]
) -> tuple[Ending | None, tuple[ToolResult, ...]]:
    """Whether the step ends the turn: a valid `submit` first, then the first `finish_on` that finishes.

    A `finish_on` whose outputs do not fit the signature turns its call's result into the error.
    """
    for call, result in zip(calls, results, strict=True):
        if call.name == SUBMIT and result.ok:
            return Ending(result.result, "submit"), results
    if not program.finish_on:
        return None, results
    checked_results = list(results)
    for index, (call, result) in enumerate(zip(calls, results, strict=True)):
        hook = program.finish_on.get(call.name)
        if hook is None or not result.ok:
            continue
        decision = hook(dict(call.arguments), result.result, turn.inputs)
        if isinstance(decision, Finish):
            try:
                outputs = check_outputs(program, decision.outputs, call.name)
            except ToolError as exc:
                checked_results[index] = ToolResult(call.id, call.name, None, "result", exc.message)
                continue
            return Ending(outputs, "finished_by_tool", finished_by=call.name), tuple(checked_results)
    return None, tuple(checked_results)


async def act(
    program: ReAct,
    turn: Turn,
    calls: Sequence[ToolCall],
    thought: str | None,
    *,
    response: LMResponse | None = None,
    forced: bool = False,
    decides: bool = True,
) -> Ending | None:
    """Run a step's calls, record the step, and say how the turn ends if it ends here.

    The deadline passing while the tools run ends the turn `incomplete` (`deadline_exceeded`).
    """
    if thought:
        emit("reasoning", step=turn.step, text=thought, forced=forced)
    step = Step(
        thought=thought or None,
        tool_calls=tuple(calls),
        results=(),
        reasoning=response.reasoning or None if response is not None else None,
        reasoning_data=response.reasoning_data if response is not None else None,
    )
    ran = await run_calls(program, turn, calls, step)
    if ran.timed_out:
        turn.add(_with_results(step, ran.results))
        return incomplete("deadline_exceeded")
    ending, results = decide(program, turn, calls, ran.results) if decides else (None, ran.results)
    step = _with_results(step, results)
    if ending is not None and ending.outputs is not None:
        step = Step(
            fields=dict(ending.outputs),
            thought=step.thought,
            tool_calls=step.tool_calls,
            results=step.results,
            reasoning=step.reasoning,
            reasoning_data=step.reasoning_data,
        )
    turn.add(step)
    return ending


def check_outputs(program: ReAct, values: Mapping[str, Any], tool_name: str) -> dict[str, Any]:
    """Outputs given to `submit` or by a `finish_on`, checked against the signature (a refusal when they do not fit)."""
    from imp.adapters.chat import ChatAdapter
    from imp.errors import AdapterParseError

    signature = program.signature
    missing = [n for n in signature.outputs if n not in values]
    if missing:
        raise ToolError(f"{tool_name} is missing: {', '.join(missing)}", outcome="refused")
    try:
        return ChatAdapter().parse_mapping(signature, values)
    except AdapterParseError as exc:
        detail = str(exc).split(": ", 1)[-1]
        raise ToolError(f"{tool_name} got outputs that do not fit: {detail}", outcome="refused") from None


def _with_results(step: Step, results: Sequence[ToolResult]) -> Step:
    from dataclasses import replace

    return replace(step, results=tuple(results))


def _forward_tool_event(event: ToolEvent) -> None:
    emit(event.kind, **{k: v for k, v in event.dump().items() if k != "kind"})
