"""How much time imp spends around one `predict` call, side by side with DSPy and pydantic-ai.

Every framework talks to a zero-latency LM that returns a fixed reply at once, so what is timed is
the framework itself: formatting the request, parsing the reply, validating the fields, and the
bookkeeping around them (history, usage, callbacks). Run it with `make bench`, which installs DSPy
3.3 and pydantic-ai beside imp in `.venv-bench`; without them it times imp alone and says so.

    .venv-bench/bin/python benchmarks/overhead.py            # the table
    .venv-bench/bin/python benchmarks/overhead.py -n 500     # fewer calls
    .venv-bench/bin/python benchmarks/overhead.py --profile  # where imp's time goes (cProfile)
    .venv-bench/bin/python benchmarks/overhead.py --budget-only  # the budget check alone

The runners, for each signature (`question -> answer`, and the escalation signature of the ReAct guide):

- DSPy sync: `dspy.Predict(sig)(**inputs)` with `dspy.ChatAdapter`, on a `dspy.BaseLM` subclass
  (no litellm, no network, no cache: DSPy formats and parses every call).
- DSPy async: `await predict.acall(**inputs)`, same LM.
- pydantic-ai: `await agent.run(prompt)` on a `FunctionModel` that answers at once (text for
  `str` output, the output tool for the structured one).
- imp async: `await imp.call(program, inputs)` on a zero-latency `imp.LM`.
- imp sync: `imp.call_sync(program, inputs)` (one event loop per call, as a script would use it).
- imp async, ScriptedLM: the same as imp async, on `imp.ScriptedLM` (which records every request).
- imp async, OpenTelemetry on: the same as imp async with `imp.observe.otel.OtelSink` installed
  process-wide as `imp.instrument_otel()` does, spans made by the OpenTelemetry SDK and handed to an
  exporter that drops them; "API only" is the same sink on the API's no-op tracer (imp's own part).

The headline is imp async / DSPy sync; the target is at most 0.20 (five times faster).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import gc
import io
import platform
import pstats
import statistics
import sys
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(1, str(Path(__file__).resolve().parent.parent))  # this checkout's imp, whatever the venv holds

from _same_work import Calls, Side, same_work

import imp

TARGET_RATIO = 0.20
SENT = Calls()
"""Every fake LM's requests, counted: each runner must make exactly one per call."""
INSTRUCTIONS = (
    "Find the squad that owns the ticket and its on-call engineer. "
    "atlas owns money, harbor the platform, beacon identity, quill the product."
)


@dataclass(frozen=True)
class Case:
    """One signature, its inputs, the fixed reply every LM gives, and the answer expected back."""

    name: str
    imp_signature: imp.Signature
    inputs: Mapping[str, str]
    reply: str
    expected: Mapping[str, str]


CASES = (
    Case(
        name="question -> answer",
        imp_signature=imp.signature("question -> answer"),
        inputs={"question": "What is the capital of France?"},
        reply="[[ ## answer ## ]]\nParis\n\n[[ ## completed ## ]]",
        expected={"answer": "Paris"},
    ),
    Case(
        name="ticket -> team: enum, contact",
        imp_signature=imp.signature("ticket -> team: enum[atlas,harbor,beacon,quill], contact: string", INSTRUCTIONS),
        inputs={"ticket": "We were charged twice this month; please refund the second payment."},
        reply="[[ ## team ## ]]\natlas\n\n[[ ## contact ## ]]\nMaya\n\n[[ ## completed ## ]]",
        expected={"team": "atlas", "contact": "Maya"},
    ),
)


@dataclass
class Runner:
    """One way of calling a program: a sync function or a coroutine function of no arguments."""

    label: str
    check: Callable[[], Mapping[str, Any]]
    sync: Callable[[], object] | None = None
    run_async: Callable[[], Awaitable[object]] | None = None
    results: list[float] = field(default_factory=list)
    requests: Callable[[], int] = SENT.take
    """The LM requests made since it was last asked (the fakes count them)."""
    per_call: float = 0.0
    """LM requests per timed call (1.0: no retry, no fallback request, nothing skipped)."""


# --- imp -------------------------------------------------------------------------------------


class ZeroLM(imp.LM):
    """An imp LM that answers every request at once with the same reply."""

    provider = "bench"

    def __init__(self, reply: str) -> None:
        self.model = "zero"
        self._response = imp.LMResponse(text=reply, model="zero", usage=imp.Usage(requests=1))

    async def request(self, messages: Sequence[dict[str, Any]], **options: Any) -> imp.LMResponse:
        SENT.add()
        return self._response


TEMPLATE_TARGET = 1.20
"""A template-formatted predict costs at most this much of a Chat one."""
TEMPLATE = imp.TemplateAdapter(
    [
        imp.system("{instruction}\n\nAnswer in this form:\n{% for f in outputs %}{f.name}: {f.value}\n{% endfor %}"),
        imp.turns(),
        imp.user("{% for f in inputs %}{f.name}: {f.value}\n{% endfor %}"),
    ]
)


def template_runner(case: Case) -> Runner:
    """`await imp.call` of the same predict through a template (its reply written in the template's form)."""
    reply = TEMPLATE.default_outputs(case.imp_signature, case.expected, "")
    program = imp.predict(case.imp_signature, lm=ZeroLM(reply), adapter=TEMPLATE)
    inputs = dict(case.inputs)

    async def run_async() -> imp.Prediction:
        return await imp.call(program, inputs)

    return Runner("imp  await imp.call (template)", lambda: imp.call_sync(program, inputs).fields, run_async=run_async)


def imp_runners(case: Case) -> list[Runner]:
    program = imp.predict(case.imp_signature, lm=ZeroLM(case.reply))
    scripted_lm = imp.ScriptedLM([], exhausted=case.reply)
    scripted = imp.predict(case.imp_signature, lm=scripted_lm)
    inputs = dict(case.inputs)
    seen = 0

    def scripted_requests() -> int:  # the ScriptedLM records each request it answers
        nonlocal seen
        made, seen = len(scripted_lm.requests) - seen, len(scripted_lm.requests)
        return made

    async def run_async() -> imp.Prediction:
        return await imp.call(program, inputs)

    async def run_scripted() -> imp.Prediction:
        return await imp.call(scripted, inputs)

    def run_sync() -> imp.Prediction:
        return imp.call_sync(program, inputs)

    def check() -> Mapping[str, Any]:
        return imp.call_sync(program, inputs).fields

    runners = [
        Runner("imp  await imp.call", check, run_async=run_async),
        Runner("imp  imp.call_sync", check, sync=run_sync),
        Runner("imp  await imp.call (ScriptedLM)", check, run_async=run_scripted, requests=scripted_requests),
        template_runner(case),
    ]
    traced = otel_sink()
    if traced is not None:
        from imp.runtime.run import add_process_sink, remove_process_sink

        async def run_traced() -> imp.Prediction:
            # as imp.instrument_otel() installs it, for this runner's calls only
            add_process_sink(traced)
            try:
                return await imp.call(program, inputs)
            finally:
                remove_process_sink(traced)

        runners.append(Runner(OTEL_LABEL, check, run_async=run_traced))
    api_only = otel_sink(sdk=False)
    if api_only is not None:
        from imp.runtime.run import add_process_sink, remove_process_sink

        async def run_api_only() -> imp.Prediction:
            add_process_sink(api_only)
            try:
                return await imp.call(program, inputs)
            finally:
                remove_process_sink(api_only)

        runners.append(Runner(OTEL_API_LABEL, check, run_async=run_api_only))
    return runners


OTEL_LABEL = "imp  await imp.call (OpenTelemetry on)"
OTEL_API_LABEL = "imp  await imp.call (OpenTelemetry API only)"
OTEL_GOAL_US = 20.0
"""What OpenTelemetry spans may add per LM request (here one `chat` and one `invoke_agent` span)."""


def otel_sink(sdk: bool = True) -> Any:
    """imp's OpenTelemetry sink on the SDK's tracer provider, its spans handed to an exporter that
    keeps nothing (what is timed is imp and the SDK, not a collector); with `sdk=False`, on the
    API's no-op provider (what imp itself adds). None without the packages."""
    if not sdk:
        try:
            from opentelemetry.trace import NoOpTracerProvider

            from imp.observe.otel import OtelSink
        except ImportError:
            return None
        return OtelSink(NoOpTracerProvider())
    try:
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult

        from imp.observe.otel import OtelSink
    except ImportError:
        return None

    class Drop(SpanExporter):
        def export(self, spans: Any) -> SpanExportResult:
            return SpanExportResult.SUCCESS

    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(Drop()))
    return OtelSink(provider)


# --- DSPy ------------------------------------------------------------------------------------


def dspy_runners(case: Case) -> tuple[list[Runner], str]:
    try:
        import dspy
        from dspy.dsp.utils.utils import dotdict
    except ImportError as exc:
        return [], f"DSPy is not importable here ({exc}); skipped. `make bench` installs it in .venv-bench."

    class ZeroDSPyLM(dspy.BaseLM):  # type: ignore[misc]
        """A DSPy LM on the legacy forward contract: an OpenAI-shaped reply at once, no cache."""

        forward_contract = "legacy"

        def __init__(self, reply: str) -> None:
            super().__init__(model="bench/zero", model_type="chat", temperature=0.0, max_tokens=1000, cache=False)
            self._reply = reply

        def _response(self) -> Any:
            message = dotdict(content=self._reply, tool_calls=None)
            return dotdict(
                choices=[dotdict(message=message, finish_reason="stop")],
                usage=dotdict(prompt_tokens=0, completion_tokens=0, total_tokens=0),
                model="bench/zero",
            )

        def forward(self, prompt: Any = None, messages: Any = None, **kwargs: Any) -> Any:
            SENT.add()
            return self._response()

        async def aforward(self, prompt: Any = None, messages: Any = None, **kwargs: Any) -> Any:
            SENT.add()
            return self._response()

    if "team" in case.expected:

        class Escalation(dspy.Signature):  # type: ignore[misc]
            __doc__ = INSTRUCTIONS
            ticket: str = dspy.InputField()
            team: Literal["atlas", "harbor", "beacon", "quill"] = dspy.OutputField()
            contact: str = dspy.OutputField()

        predict = dspy.Predict(Escalation)
    else:
        predict = dspy.Predict("question -> answer")
    # Set once, as a DSPy program would: the LM on the predictor, the adapter in the global settings.
    predict.lm = ZeroDSPyLM(case.reply)
    dspy.configure(adapter=dspy.ChatAdapter())
    inputs = dict(case.inputs)

    def run_sync() -> object:
        return predict(**inputs)

    async def run_async() -> object:
        return await predict.acall(**inputs)

    def check() -> Mapping[str, Any]:
        return dict(run_sync().items())  # type: ignore[attr-defined]

    version = getattr(dspy, "__version__", "?")
    return [
        Runner(f"DSPy {version}  predict(...)", check, sync=run_sync),
        Runner(f"DSPy {version}  await predict.acall(...)", check, run_async=run_async),
    ], ""


# --- pydantic-ai -----------------------------------------------------------------------------


def pydantic_ai_runners(case: Case) -> tuple[list[Runner], str]:
    try:
        import pydantic
        import pydantic_ai
        from pydantic_ai import Agent
        from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart
        from pydantic_ai.models.function import AgentInfo, FunctionModel
    except ImportError as exc:
        return [], f"pydantic-ai is not importable here ({exc}); skipped."

    structured = "team" in case.expected
    expected = dict(case.expected)

    def answer(messages: list[Any], info: AgentInfo) -> ModelResponse:
        SENT.add()
        if structured:
            return ModelResponse(parts=[ToolCallPart(info.output_tools[0].name, expected)])
        return ModelResponse(parts=[TextPart(expected["answer"])])

    model = FunctionModel(answer, model_name="zero")
    prompt = "\n".join(case.inputs.values())
    if structured:

        class Escalation(pydantic.BaseModel):
            team: Literal["atlas", "harbor", "beacon", "quill"]
            contact: str

        agent: Any = Agent(model, output_type=Escalation, instructions=INSTRUCTIONS)
    else:
        agent = Agent(model, output_type=str)

    async def run_async() -> object:
        return await agent.run(prompt)

    def check() -> Mapping[str, Any]:
        output = asyncio.run(agent.run(prompt)).output
        return output.model_dump() if structured else {"answer": output}

    version = getattr(pydantic_ai, "__version__", "?")
    return [Runner(f"pydantic-ai {version}  await agent.run", check, run_async=run_async)], ""


# --- timing ----------------------------------------------------------------------------------


def time_sync(fn: Callable[[], object], warmup: int, rounds: int, per_round: int) -> list[float]:
    for _ in range(warmup):
        fn()
    out: list[float] = []
    for _ in range(rounds):
        gc.collect()
        start = time.perf_counter()
        for _ in range(per_round):
            fn()
        out.append((time.perf_counter() - start) / per_round * 1e6)
    return out


async def _time_async(fn: Callable[[], Awaitable[object]], warmup: int, rounds: int, per_round: int) -> list[float]:
    for _ in range(warmup):
        await fn()
    out: list[float] = []
    for _ in range(rounds):
        gc.collect()
        start = time.perf_counter()
        for _ in range(per_round):
            await fn()
        out.append((time.perf_counter() - start) / per_round * 1e6)
    return out


def measure(runner: Runner, warmup: int, rounds: int, per_round: int) -> None:
    runner.requests()
    if runner.sync is not None:
        runner.results = time_sync(runner.sync, warmup, rounds, per_round)
    else:
        assert runner.run_async is not None
        runner.results = asyncio.run(_time_async(runner.run_async, warmup, rounds, per_round))
    runner.per_call = runner.requests() / (warmup + rounds * per_round)


def verify(runner: Runner, case: Case) -> None:
    got = {k: str(v) for k, v in runner.check().items() if k in case.expected}
    if got != dict(case.expected):
        raise SystemExit(f"{runner.label} answered {got}, expected {dict(case.expected)}: the benchmark is wrong")


def median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def print_table(case: Case, runners: list[Runner], n: int) -> None:
    dspy_sync = next((r for r in runners if r.label.startswith("DSPy") and r.sync is not None), None)
    base = median(dspy_sync.results) if dspy_sync else None
    width = max(len(r.label) for r in runners)
    print(f"\n{case.name}   ({n} calls per runner, median of rounds)")
    print(f"  {'runner':<{width}}  {'µs/call':>9}  {'spread':>13}  {'vs DSPy sync':>12}")
    print(f"  {'-' * width}  {'-' * 9}  {'-' * 13}  {'-' * 12}")
    for r in runners:
        mid = median(r.results)
        spread = f"{min(r.results):.1f}-{max(r.results):.1f}"
        ratio = f"{mid / base:.3f}" if base else "n/a"
        print(f"  {r.label:<{width}}  {mid:>9.1f}  {spread:>13}  {ratio:>12}")
    answer = ", ".join(f"{k}={v}" for k, v in case.expected.items())
    same_work(
        case.name,
        [Side(r.label, {"LM requests per call": f"{r.per_call:g}", "answer": answer}) for r in runners],
    )
    imp_async = median(next(r for r in runners if r.label == "imp  await imp.call").results)
    if base:
        ratio = imp_async / base
        verdict = "meets" if ratio <= TARGET_RATIO else "MISSES"
        print(
            f"  => imp await imp.call / DSPy sync = {ratio:.3f} ({base / imp_async:.1f}x faster); "
            f"target <= {TARGET_RATIO:.2f}: {verdict}"
        )
    traced = next((r for r in runners if r.label == OTEL_LABEL), None)
    if traced is not None:
        added = median(traced.results) - imp_async
        verdict = "meets" if added <= OTEL_GOAL_US else "MISSES"
        print(f"  => OpenTelemetry on adds {added:.1f} µs per LM request; goal < {OTEL_GOAL_US:.0f} µs: {verdict}")
    api_only = next((r for r in runners if r.label == OTEL_API_LABEL), None)
    if api_only is not None:
        own = median(api_only.results) - imp_async
        print(f"  => of which imp's own part (events and the sink, no SDK): {own:.1f} µs")
    template = next((r for r in runners if r.label == "imp  await imp.call (template)"), None)
    if template is not None:
        ratio = median(template.results) / imp_async
        verdict = "meets" if ratio <= TEMPLATE_TARGET else "MISSES"
        print(f"  => template / Chat (await imp.call) = {ratio:.3f}; target <= {TEMPLATE_TARGET:.2f}: {verdict}")
    dspy_fastest = min((median(r.results) for r in runners if r.label.startswith("DSPy")), default=None)
    if dspy_fastest and dspy_fastest < (base or float("inf")):
        print(
            f"  => against DSPy's faster path (acall): {imp_async / dspy_fastest:.3f} ({dspy_fastest / imp_async:.1f}x)"
        )


def profile_imp(case: Case, calls: int, top: int) -> None:
    """cProfile imp's async path for one case and print the functions with the most own time."""
    (runner, *_) = imp_runners(case)
    assert runner.run_async is not None
    run_async = runner.run_async

    async def loop() -> None:
        for _ in range(calls):
            await run_async()

    asyncio.run(loop())  # warm up
    profiler = cProfile.Profile()
    profiler.enable()
    asyncio.run(loop())
    profiler.disable()
    buffer = io.StringIO()
    stats = pstats.Stats(profiler, stream=buffer).strip_dirs()
    stats.sort_stats("tottime").print_stats(top)
    print(f"\n--- cProfile: {case.name}, {calls} calls of await imp.call, by own time ---")
    print(buffer.getvalue())


BUDGET_GOAL_US = 1.0
"""The budget check's cost per request when no budget is open (docs/cost.md)."""


def budget_check(calls: int = 1_000_000) -> None:
    """What each request of imp's HTTP clients pays for budgets and context windows: with no budget
    open and no window known, the check `open_budgets.get() or lm.context_window is not None` (what
    `HTTPLM.request` runs before sending); with a budget open, a reservation and its settling."""
    from imp.runtime.budget import budget_scope, open_budgets, reserve, settle

    lm = imp.lm("openai:local", base_url="http://127.0.0.1:9/v1")  # never sent to: only the check runs
    loop = range(calls)
    started = time.perf_counter()
    for _ in loop:
        if open_budgets.get() or lm.context_window is not None:
            raise AssertionError("no budget is open and no window is known")
    check_us = (time.perf_counter() - started) / calls * 1e6
    started = time.perf_counter()
    for _ in loop:
        pass
    empty_us = (time.perf_counter() - started) / calls * 1e6
    cost = max(0.0, check_us - empty_us)
    verdict = "met" if cost < BUDGET_GOAL_US else "NOT met"
    print(
        f"\nthe budget check per request, no budget open: {cost * 1000:.0f} ns; goal < {BUDGET_GOAL_US:.0f} µs: {verdict}"
    )
    usage = imp.Usage(100, 20, requests=1)
    reservations = max(1, calls // 10)
    with budget_scope(imp.Budget(total_tokens=10**15)):
        started = time.perf_counter()
        for _ in range(reservations):
            held = reserve("p:m", input_tokens=120, output_tokens=50, usd_in=None, usd_out=None, default_output=4096)
            settle(held, usage)
        held_us = (time.perf_counter() - started) / reservations * 1e6
    print(f"  with a budget open, one reservation and its settling: {held_us:.2f} µs per request")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("-n", type=int, default=2000, help="timed calls per runner (default 2000)")
    parser.add_argument("--rounds", type=int, default=5, help="the timed calls are split into this many rounds")
    parser.add_argument("--warmup", type=int, default=200, help="untimed calls first")
    parser.add_argument("--profile", action="store_true", help="also cProfile imp's async path")
    parser.add_argument("--budget-only", action="store_true", help="only time the budget check")
    args = parser.parse_args(argv)
    if args.budget_only:
        budget_check()
        return 0
    rounds = max(1, args.rounds)
    per_round = max(1, args.n // rounds)

    print("imp overhead per predict call, zero-latency LM (format + parse + validation)")
    print(f"Python {platform.python_version()} on {platform.machine()}, imp {imp.__version__}")
    notes: set[str] = set()
    started = time.perf_counter()
    for case in CASES:
        runners: list[Runner] = []
        for build in (dspy_runners, pydantic_ai_runners):
            found, note = build(case)
            runners.extend(found)
            if note:
                notes.add(note)
        runners.extend(imp_runners(case))
        for runner in runners:
            verify(runner, case)
            measure(runner, args.warmup, rounds, per_round)
        print_table(case, runners, per_round * rounds)
    budget_check()
    for note in sorted(notes):
        print(f"\nnote: {note}")
    print(f"\n(finished in {time.perf_counter() - started:.1f} s)")
    if args.profile:
        for case in CASES:
            profile_imp(case, calls=args.n, top=25)
    return 0


if __name__ == "__main__":
    sys.exit(main())
