"""Tool fan-out: one step that calls eight 0.1 s tools, then an answer, through imp, DSPy and pydantic-ai.

Every framework talks to a scripted model that answers at once: its first step calls the tool
`look` eight times (`i` = 0..7) in one response, its second step gives the answer. Each call of
`look` waits 0.1 s, so a loop that runs a step's calls concurrently ends the turn in about 0.1 s
(the ideal), and one that runs them one after another needs 0.8 s. What is timed is one whole
turn (both model steps and the eight calls), as wall time; the table shows the median over the
timed turns and the ratio to the ideal.

    .venv-bench/bin/python benchmarks/fanout.py               # the table (make bench installs the others)
    .venv-bench/bin/python benchmarks/fanout.py --turns 20    # more timed turns per runner

Each framework is timed with async tools (`await asyncio.sleep(0.1)`) and with sync tools
(`time.sleep(0.1)`), which a loop must run off the event loop to overlap them:

- imp: `await imp.call(imp.react("question -> answer", [look], lm=ScriptedLM))`, all turns on one
  event loop; and `imp.call_sync(...)`, which starts a new event loop (and new worker threads) for
  every turn, as a script would.
- DSPy's `ReActV2` (experimental in DSPy 3.3): `dspy.ReActV2("question -> answer", [look])` with the
  ChatAdapter's native function calling, on a `dspy.BaseLM` subclass that returns OpenAI-shaped
  tool calls; its second step calls `submit`, the way ReActV2 ends a turn. ReActV2 has no async
  path (`acall` is not implemented), and it calls a step's tools one at a time; its async tool
  runs through `allow_tool_async_sync_conversion`.
- pydantic-ai: `await Agent(FunctionModel(...)).run(...)`, the model returning eight
  `ToolCallPart`s in one `ModelResponse`, then a `TextPart`.

The target (issue 4): imp within 10% of the ideal, with sync tools as well as async ones.
Without DSPy or pydantic-ai importable the script times imp alone and says what it skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import statistics
import sys
import threading
import time
import warnings
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

# Put this checkout's imp first, whatever the venv holds (and keep this folder off the path).
_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))  # this checkout's imp, whatever the venv holds
sys.path.append(str(_HERE))  # benchmarks/_same_work.py, after imp

from _same_work import Calls, Side, same_work  # noqa: E402

import imp  # noqa: E402  (after the sys.path fix above)

SENT = Calls()
"""The scripted models' requests, counted: a turn is two (the eight calls, then the answer)."""

CALLS = 8
TOOL_SECONDS = 0.1
IDEAL = TOOL_SECONDS  # every call of the step at once, model steps free
TARGET = 1.10  # within 10% of the ideal
QUESTION = "Look up all eight items."
ANSWER = "All eight found."


@dataclass
class Runner:
    """One framework and tool kind: a turn to time (sync, or async on one loop) and a check of its answer."""

    label: str
    tools: str  # "async" or "sync"
    turn: Callable[[], object] | None = None
    turn_async: Callable[[], Awaitable[object]] | None = None
    check: Callable[[object], str | None] = lambda _: None
    note: str = ""
    seconds: list[float] = field(default_factory=list)
    first: float = float("nan")
    work: dict[str, object] = field(default_factory=dict)


class Tally:
    """Which `look` calls ran, and how many ran at the same time at most."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.seen: list[int] = []
        self.running = 0
        self.peak = 0

    def reset(self) -> None:
        with self._lock:
            self.seen, self.running, self.peak = [], 0, 0

    def enter(self, i: int) -> None:
        with self._lock:
            self.seen.append(i)
            self.running += 1
            self.peak = max(self.peak, self.running)

    def leave(self) -> None:
        with self._lock:
            self.running -= 1


def make_look(tally: Tally) -> tuple[Callable[[int], Awaitable[str]], Callable[[int], str]]:
    """The async and the sync `look` tool: each waits 0.1 s and answers `item i`."""

    async def look_async(i: int) -> str:
        """Look up one item."""
        tally.enter(i)
        try:
            await asyncio.sleep(TOOL_SECONDS)
        finally:
            tally.leave()
        return f"item {i}"

    def look_sync(i: int) -> str:
        """Look up one item."""
        tally.enter(i)
        try:
            time.sleep(TOOL_SECONDS)
        finally:
            tally.leave()
        return f"item {i}"

    look_async.__name__ = look_sync.__name__ = "look"
    return look_async, look_sync


def fanout_check(tally: Tally, answer: Callable[[object], Any]) -> Callable[[object], str | None]:
    def check(result: object) -> str | None:
        got = answer(result)
        if got != ANSWER:
            return f"answered {got!r}, expected {ANSWER!r}"
        if sorted(tally.seen) != list(range(CALLS)):
            return f"ran look for {sorted(tally.seen)}, expected 0..{CALLS - 1}"
        return None

    return check


# --- imp -------------------------------------------------------------------------------------


class CountedScriptedLM(imp.ScriptedLM):
    """imp's scripted model, its requests counted."""

    async def request(self, messages: Any, **options: Any) -> imp.LMResponse:
        SENT.add()
        return await super().request(messages, **options)


def imp_runners(tally: Tally) -> list[Runner]:
    look_async, look_sync = make_look(tally)
    first = {"tool_calls": [{"name": "look", "arguments": {"i": i}} for i in range(CALLS)]}
    second = {"answer": ANSWER, "tool_calls": []}
    check = fanout_check(tally, lambda p: p.answer if isinstance(p, imp.Prediction) else p)
    runners: list[Runner] = []
    for kind, fn in (("async", look_async), ("sync", look_sync)):
        look = imp.tool(fn, name="look")

        def program(look: imp.Tool = look) -> imp.ReAct:
            # A fresh script per turn: the scripted model records its requests and runs out of steps.
            return imp.react("question -> answer", [look], lm=CountedScriptedLM([first, second]))

        async def turn_async(program: Callable[[], imp.ReAct] = program) -> imp.Prediction:
            return await imp.call(program(), question=QUESTION)

        def turn_sync(program: Callable[[], imp.ReAct] = program) -> imp.Prediction:
            return imp.call_sync(program(), question=QUESTION)

        runners.append(Runner(f"imp {imp.__version__}  await imp.call", kind, turn_async=turn_async, check=check))
        runners.append(Runner(f"imp {imp.__version__}  imp.call_sync", kind, turn=turn_sync, check=check))
    return runners


# --- DSPy ------------------------------------------------------------------------------------


def dspy_runners(tally: Tally) -> tuple[list[Runner], str]:
    try:
        import dspy
        from dspy.dsp.utils.utils import dotdict
    except ImportError as exc:
        return [], f"DSPy is not importable here ({exc}); skipped. `make .venv-bench/.installed` installs it."
    react_v2 = getattr(dspy, "ReActV2", None)
    version = getattr(dspy, "__version__", "?")
    if react_v2 is None:
        return [], f"DSPy {version} has no ReActV2 (its ReAct calls one tool per step); skipped."

    def tool_call(index: int, name: str, arguments: dict[str, Any]) -> Any:
        function = dotdict(name=name, arguments=json.dumps(arguments))
        return dotdict(id=f"call_{index}", type="function", function=function)

    class FanoutDSPyLM(dspy.BaseLM):  # type: ignore[misc]
        """First step: eight native `look` calls; once tool results are in the messages: `submit`."""

        forward_contract = "legacy"

        def __init__(self) -> None:
            super().__init__(model="bench/fanout", model_type="chat", temperature=0.0, max_tokens=1000, cache=False)

        @property
        def supports_function_calling(self) -> bool:
            return True

        def forward(self, prompt: Any = None, messages: Any = None, **kwargs: Any) -> Any:
            SENT.add()
            if any(m.get("role") == "tool" for m in messages or ()):
                calls = [tool_call(0, "submit", {"answer": ANSWER})]
            else:
                calls = [tool_call(i, "look", {"i": i}) for i in range(CALLS)]
            message = dotdict(content=None, tool_calls=calls)
            return dotdict(
                choices=[dotdict(message=message, finish_reason="tool_calls")],
                usage=dotdict(prompt_tokens=0, completion_tokens=0, total_tokens=0),
                model="bench/fanout",
            )

    look_async, look_sync = make_look(tally)
    lm = FanoutDSPyLM()
    adapter = dspy.ChatAdapter(use_native_function_calling=True)
    check = fanout_check(tally, lambda p: getattr(p, "answer", None))
    runners: list[Runner] = []
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ReActV2 is @experimental
        for kind, fn in (("async", look_async), ("sync", look_sync)):
            agent = react_v2("question -> answer", tools=[dspy.Tool(fn, name="look")])

            def turn(agent: Any = agent, kind: str = kind) -> object:
                with dspy.context(lm=lm, adapter=adapter, allow_tool_async_sync_conversion=kind == "async"):
                    return agent(question=QUESTION)

            note = "sync only (no acall); tools one at a time" + (", each via asyncio.run" if kind == "async" else "")
            runners.append(Runner(f"DSPy {version}  ReActV2(...)", kind, turn=turn, check=check, note=note))
    return runners, ""


# --- pydantic-ai -----------------------------------------------------------------------------


def pydantic_ai_runners(tally: Tally) -> tuple[list[Runner], str]:
    try:
        import pydantic_ai
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel
    except ImportError as exc:
        return [], f"pydantic-ai is not importable here ({exc}); skipped."

    def respond(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        SENT.add()
        returned = any(isinstance(part, ToolReturnPart) for m in messages for part in getattr(m, "parts", ()))
        if returned:
            return ModelResponse(parts=[TextPart(ANSWER)])
        return ModelResponse(parts=[ToolCallPart("look", {"i": i}, tool_call_id=f"call_{i}") for i in range(CALLS)])

    look_async, look_sync = make_look(tally)
    check = fanout_check(tally, lambda r: getattr(r, "output", None))
    version = getattr(pydantic_ai, "__version__", "?")
    runners: list[Runner] = []
    for kind, fn in (("async", look_async), ("sync", look_sync)):
        agent: Any = Agent(FunctionModel(respond, model_name="fanout"), output_type=str)
        agent.tool_plain(name="look")(fn)

        async def turn_async(agent: Any = agent) -> object:
            return await agent.run(QUESTION)

        runners.append(Runner(f"pydantic-ai {version}  await agent.run", kind, turn_async=turn_async, check=check))
    return runners, ""


# --- timing ----------------------------------------------------------------------------------


def _timed(fn: Callable[[], object], tally: Tally) -> tuple[float, object]:
    tally.reset()
    start = time.perf_counter()
    result = fn()
    return time.perf_counter() - start, result


async def _timed_async(fn: Callable[[], Awaitable[object]], tally: Tally) -> tuple[float, object]:
    tally.reset()
    start = time.perf_counter()
    result = await fn()
    return time.perf_counter() - start, result


def measure(runner: Runner, tally: Tally, turns: int, warmup: int) -> None:
    """Time `warmup + turns` turns; the very first is kept as `first` (cold), the rest after warmup timed."""
    results: list[tuple[float, object, int]] = []
    SENT.take()
    if runner.turn is not None:
        fn = runner.turn
        for _ in range(warmup + turns):
            seconds, result = _timed(fn, tally)
            results.append((seconds, result, tally.peak))
            problem = runner.check(result)
            if problem:
                raise SystemExit(f"{runner.label} ({runner.tools} tools) {problem}: the benchmark is wrong")
    else:
        assert runner.turn_async is not None
        fn_async = runner.turn_async

        async def loop() -> None:
            for _ in range(warmup + turns):
                seconds, result = await _timed_async(fn_async, tally)
                results.append((seconds, result, tally.peak))
                problem = runner.check(result)
                if problem:
                    raise SystemExit(f"{runner.label} ({runner.tools} tools) {problem}: the benchmark is wrong")

        asyncio.run(loop())
    runner.first = results[0][0]
    runner.seconds = [s for s, _, _ in results[warmup:]]
    peak = max(p for _, _, p in results)
    runner.work = {
        "model requests per turn": f"{SENT.take() / len(results):g}",
        "look calls per turn": CALLS,  # each turn's check saw look run for 0..7
        "answer": ANSWER,
    }
    runner.note = "; ".join(x for x in (f"at most {peak} at once", runner.note) if x)


def print_table(runners: Sequence[Runner], turns: int) -> None:
    width = max(len(r.label) for r in runners)
    print(f"\n{CALLS} calls of {TOOL_SECONDS} s in one step, then an answer ({turns} timed turns each, median)")
    print(f"ideal {IDEAL:.3f} s per turn; target for imp <= {IDEAL * TARGET:.3f} s (x{TARGET:.2f})\n")
    head = (
        f"  {'runner':<{width}}  {'tools':<5}  {'s/turn':>7}  {'min-max':>13}  {'x ideal':>7}  {'1st turn':>8}  notes"
    )
    print(head)
    print("  " + "-" * (len(head) - 2 + 20))
    for r in runners:
        mid = statistics.median(r.seconds)
        spread = f"{min(r.seconds):.3f}-{max(r.seconds):.3f}"
        print(
            f"  {r.label:<{width}}  {r.tools:<5}  {mid:>7.3f}  {spread:>13}  {mid / IDEAL:>7.2f}  "
            f"{r.first:>8.3f}  {r.note}"
        )
    same_work("one turn", [Side(f"{r.label} ({r.tools})", r.work) for r in runners])
    for r in runners:
        if r.label.startswith("imp"):
            mid = statistics.median(r.seconds)
            verdict = "meets" if mid <= IDEAL * TARGET else "MISSES"
            print(f"  => {r.label}, {r.tools} tools: x{mid / IDEAL:.3f} of ideal; target x{TARGET:.2f}: {verdict}")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=10, help="timed turns per runner (default 10)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed turns first (default 1)")
    args = parser.parse_args(argv)
    turns, warmup = max(1, args.turns), max(0, args.warmup)

    print("tool fan-out per ReAct turn: one step with eight 0.1 s tool calls, then the answer")
    print(f"Python {platform.python_version()} on {platform.machine()}, imp {imp.__version__}")
    started = time.perf_counter()
    tally = Tally()
    notes: list[str] = []
    runners: list[Runner] = []
    for build in (dspy_runners, pydantic_ai_runners):
        found, note = build(tally)
        runners.extend(found)
        if note:
            notes.append(note)
    runners.extend(imp_runners(tally))
    for runner in runners:
        measure(runner, tally, turns, warmup)
    print_table(runners, turns)
    for note in notes:
        print(f"\nnote: {note}")
    print("\n1st turn: the very first turn of that runner, untimed in the median (cold imports, threads, caches).")
    print(f"(finished in {time.perf_counter() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
