"""Many concurrent `predict` calls against a 50 ms in-process LM: imp, DSPy and pydantic-ai side by side.

Every runner sends N calls of `question -> answer` at once (N = 1,000 and 10,000) to a model that
sleeps 50 ms and then answers. With unlimited concurrency all N overlap, so the ideal wall time
is 50 ms whatever N is; what the table shows is the wall time as a multiple of that ideal, and
the peak memory per call in flight: the growth of the process's peak RSS (VmHWM, reset through
/proc/self/clear_refs after a warm-up) divided by N. Each (runner, N) runs in a fresh
subprocess, so one runner's heap never counts against another's.

    .venv-bench/bin/python benchmarks/concurrency.py                   # the table (1,000 and 10,000)
    .venv-bench/bin/python benchmarks/concurrency.py -n 1000           # one size
    .venv-bench/bin/python benchmarks/concurrency.py --only imp --profile   # where imp's time goes
    .venv-bench/bin/python benchmarks/concurrency.py --only imp --gc-threshold  # with the collector tuned
    .venv-bench/bin/python benchmarks/concurrency.py --only imp --loop trio     # or uvloop (floor and imp on trio)

Besides wall time and memory, each row shows the process CPU time per call, the garbage
collector's share of it, and the GC-tracked objects per call while all N wait (an untimed run);
imp's rows add their cost above the floor of the same run, wall and CPU.

The runners (the model answers in the framework's own format, and the framework parses it):

- imp, `asyncio.gather` of N `imp.call(predict, ...)`, on an `imp.LM` whose `request` sleeps 50 ms
  and returns the ChatAdapter's `[[ ## answer ## ]]` text;
- imp, `imp.parallel(predict, inputs, concurrency=N)`;
- DSPy, `asyncio.gather` of N `predict.acall(...)` on a `dspy.BaseLM` whose `aforward` sleeps 50 ms
  (no cache, no litellm);
- DSPy, `dspy.Parallel(num_threads=...)` on the same LM's `forward` (`time.sleep(0.05)`), with as
  many threads as calls up to 1,000 (DSPy runs one call per thread);
- pydantic-ai, `asyncio.gather` of N `agent.run(...)` on a `FunctionModel` that sleeps 50 ms;
- the floor: `asyncio.gather` of N bare coroutines that `await asyncio.sleep(0.05)`, no framework:
  what the event loop itself needs to start, time and finish N waits on this machine.

Every model waits with `asyncio.sleep`, so the frameworks differ only in their own work.

Targets, against the floor of the same run (the event loop alone takes 3-4x of the ideal at
10,000 here): imp's cost above the floor at 10,000 within 1.3x of its cost at 1,000, imp's wall
time at 10,000 at most 2x the floor's, and under 3 KB per call in flight, with the collector's
default settings. The verdicts at the end say which hold in this run (docs/runtime.md, "Cost per
call in flight").
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != _HERE]
sys.path.insert(0, str(_HERE.parent))
sys.path.append(str(_HERE))  # benchmarks/_same_work.py, after imp

from _same_work import Calls, Side, same_work  # noqa: E402

SENT = Calls()
"""The fake models' requests (and the floor's stand-in calls) in this process: one per call."""

LATENCY = 0.05
SIZES = (1_000, 10_000)
TARGET_GROWTH = 1.3
"""imp's cost above the floor at 10,000 over its cost at 1,000."""
TARGET_OVER_FLOOR = 2.0
"""imp's wall time at 10,000 over the floor's."""
TARGET_BYTES = 3 * 1000
"""Peak memory per call in flight."""
DSPY_THREADS = 1_000
CHILD_TIMEOUT = 600.0
RUNNERS = ("floor", "imp-gather", "imp-parallel", "dspy-acall", "dspy-parallel", "pydantic-ai")
LABELS = {
    "floor": "(floor)  gather(asyncio.sleep)",
    "imp-gather": "imp  gather(imp.call)",
    "imp-parallel": "imp  imp.parallel(concurrency=N)",
    "dspy-acall": "DSPy  gather(predict.acall)",
    "dspy-parallel": "DSPy  dspy.Parallel",
    "pydantic-ai": "pydantic-ai  gather(agent.run)",
}


LOOPS = ("asyncio", "trio", "uvloop")
LOOP = "asyncio"
"""The event loop of this run (`--loop`): asyncio, trio (through anyio), or asyncio on uvloop."""


_census: dict[str, int] = {"at": 0, "seen": 0, "tracked": 0}
"""When `at` > 0, the `at`-th wait counts the garbage collector's tracked objects (all calls then in flight)."""


def sleep(seconds: float) -> Awaitable[None]:
    """The model's wait on this run's loop: the loop's own sleep coroutine, no frame of ours around it."""
    if _census["at"]:
        _census["seen"] += 1
        if _census["seen"] == _census["at"]:
            _census["tracked"] = len(gc.get_objects())
    if LOOP == "trio":
        import trio

        return trio.sleep(seconds)  # noqa: ASYNC105 - awaited by the caller (no frame of ours in between)
    return asyncio.sleep(seconds)


async def gather_all[T](coroutines: list[Awaitable[T]]) -> list[T]:
    """All at once, results in order: `asyncio.gather`, or a trio nursery (one task per coroutine)."""
    if LOOP != "trio":
        return list(await asyncio.gather(*coroutines))
    import trio

    results: list[Any] = [None] * len(coroutines)

    async def one(index: int, coroutine: Awaitable[T]) -> None:
        results[index] = await coroutine

    async with trio.open_nursery() as nursery:
        for index, coroutine in enumerate(coroutines):
            nursery.start_soon(one, index, coroutine)
    return results


def questions(n: int) -> list[str]:
    return [f"q{i}" for i in range(n)]


def expected(question: str) -> str:
    return question.upper()


# --- memory ----------------------------------------------------------------------------------


def _status(key: str) -> int:
    """A VmRSS / VmHWM line of /proc/self/status, in bytes."""
    with open("/proc/self/status") as handle:
        for line in handle:
            if line.startswith(key + ":"):
                return int(line.split()[1]) * 1024
    raise RuntimeError(f"no {key} in /proc/self/status")


def reset_peak() -> bool:
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as handle:
            handle.write("5")
        return True
    except OSError:
        return False


# --- the runners -----------------------------------------------------------------------------


def imp_batch(kind: str) -> Callable[[list[str]], Awaitable[list[str]]]:
    import imp

    class SleepLM(imp.LM):
        """An imp LM that waits 50 ms, then answers the ChatAdapter's way with the question upper-cased."""

        provider = "bench"
        model = "sleep"

        async def request(self, messages: Sequence[dict[str, Any]], **options: Any) -> imp.LMResponse:
            SENT.add()
            await sleep(LATENCY)
            question = str(messages[-1]["content"]).split("[[ ## question ## ]]\n", 1)[1].split("\n", 1)[0]
            text = f"[[ ## answer ## ]]\n{expected(question)}\n\n[[ ## completed ## ]]"
            return imp.LMResponse(
                text=text, model="sleep", usage=imp.Usage(input_tokens=20, output_tokens=4, requests=1)
            )

    program = imp.predict("question -> answer", lm=SleepLM())

    async def gather(qs: list[str]) -> list[str]:
        results = await gather_all([imp.call(program, question=q) for q in qs])
        return [r.answer for r in results]

    async def parallel(qs: list[str]) -> list[str]:
        results = await imp.parallel(program, [{"question": q} for q in qs], concurrency=len(qs))
        return [r.answer if isinstance(r, imp.Prediction) else repr(r) for r in results]

    return gather if kind == "imp-gather" else parallel


def dspy_lm() -> Any:
    import dspy
    from dspy.dsp.utils.utils import dotdict

    def reply(messages: Any) -> Any:
        SENT.add()
        question = str(messages[-1]["content"]).split("[[ ## question ## ]]\n", 1)[1].split("\n", 1)[0]
        content = f"[[ ## answer ## ]]\n{expected(question)}\n\n[[ ## completed ## ]]"
        return dotdict(
            choices=[dotdict(message=dotdict(content=content, tool_calls=None), finish_reason="stop")],
            usage=dotdict(prompt_tokens=20, completion_tokens=4, total_tokens=24),
            model="bench/sleep",
        )

    class SleepDSPyLM(dspy.BaseLM):  # type: ignore[misc]
        forward_contract = "legacy"

        def __init__(self) -> None:
            super().__init__(model="bench/sleep", model_type="chat", temperature=0.0, max_tokens=1000, cache=False)

        def forward(self, prompt: Any = None, messages: Any = None, **kwargs: Any) -> Any:
            time.sleep(LATENCY)
            return reply(messages)

        async def aforward(self, prompt: Any = None, messages: Any = None, **kwargs: Any) -> Any:
            await asyncio.sleep(LATENCY)
            return reply(messages)

    dspy.configure(adapter=dspy.ChatAdapter())
    return SleepDSPyLM()


def dspy_batch(kind: str) -> Callable[[list[str]], Awaitable[list[str]]]:
    import dspy

    predict = dspy.Predict("question -> answer")
    predict.lm = dspy_lm()

    async def gather(qs: list[str]) -> list[str]:
        results = await asyncio.gather(*(predict.acall(question=q) for q in qs))
        return [r.answer for r in results]

    async def parallel(qs: list[str]) -> list[str]:
        examples = [(predict, dspy.Example(question=q).with_inputs("question")) for q in qs]
        runner = dspy.Parallel(num_threads=min(len(qs), DSPY_THREADS), disable_progress_bar=True)
        results = runner(examples)
        return [getattr(r, "answer", None) or "" for r in results]

    return gather if kind == "dspy-acall" else parallel


def pydantic_ai_batch() -> Callable[[list[str]], Awaitable[list[str]]]:
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    async def answer(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        SENT.add()
        await asyncio.sleep(LATENCY)
        prompt = messages[-1].parts[-1].content  # type: ignore[union-attr]
        return ModelResponse(parts=[TextPart(expected(str(prompt)))])

    agent: Any = Agent(FunctionModel(answer, model_name="sleep"), output_type=str)

    async def gather(qs: list[str]) -> list[str]:
        results = await asyncio.gather(*(agent.run(q) for q in qs))
        return [r.output for r in results]

    return gather


def floor_batch() -> Callable[[list[str]], Awaitable[list[str]]]:
    """No framework: N coroutines that sleep 50 ms and answer, what asyncio itself costs here."""

    async def one(question: str) -> str:
        SENT.add()
        await sleep(LATENCY)
        return expected(question)

    async def gather(qs: list[str]) -> list[str]:
        return await gather_all([one(q) for q in qs])

    return gather


def batch_for(kind: str) -> Callable[[list[str]], Awaitable[list[str]]]:
    if kind == "floor":
        return floor_batch()
    if kind.startswith("imp"):
        return imp_batch(kind)
    if kind.startswith("dspy"):
        return dspy_batch(kind)
    return pydantic_ai_batch()


GC_THRESHOLD = (50_000, 50, 1000)
"""`--gc-threshold`: what a service keeping thousands of calls in flight might set (CPython 3.12's default is
(700, 10, 10)); the runners then pay for far fewer walks of the heap of live coroutines."""


def child(kind: str, n: int, profile: bool, repeat: int = 3, gc_threshold: bool = False) -> dict[str, Any]:
    """One measurement in this (fresh) process: warm up, reset the peak RSS, run N calls at once
    `repeat` times (the median wall time; the peak RSS over all of them)."""
    import warnings

    warnings.simplefilter("ignore")
    batch = batch_for(kind)

    async def main() -> dict[str, Any]:
        warm = questions(20)
        if await batch(warm) != [expected(q) for q in warm]:
            raise SystemExit(f"{kind}: wrong answers in the warm-up; the benchmark is wrong")
        qs = questions(n)
        gc.collect()
        if gc_threshold:
            gc.set_threshold(*GC_THRESHOLD)
        resettable = reset_peak()
        base = _status("VmRSS")
        # An untimed run first (inside the peak): the tracked objects while all N calls wait, over
        # those before it. First, because a finished batch's tasks linger until the next one starts.
        before = len(gc.get_objects())
        _census.update(at=n, seen=0)
        await batch(qs)
        _census["at"] = 0
        profiler: Any = None
        if profile:
            import cProfile

            profiler = cProfile.Profile()
            profiler.enable()
        walls: list[float] = []
        cpus: list[float] = []
        in_gc = [0.0, 0.0]  # seconds in the collector, the start of the current collection

        def on_gc(phase: str, info: dict[str, int]) -> None:
            if phase == "start":
                in_gc[1] = time.process_time()
            else:
                in_gc[0] += time.process_time() - in_gc[1]

        gc.callbacks.append(on_gc)
        wrong = 0
        SENT.take()
        for _ in range(repeat):
            started, cpu = time.perf_counter(), time.process_time()
            answers = await batch(qs)
            walls.append(time.perf_counter() - started)
            cpus.append(time.process_time() - cpu)
            wrong = max(wrong, sum(a != expected(q) for a, q in zip(answers, qs, strict=True)))
            del answers
        if profiler is not None:
            profiler.disable()
            import io
            import pstats

            out = io.StringIO()
            pstats.Stats(profiler, stream=out).sort_stats("cumulative").print_stats(35)
            print(out.getvalue(), file=sys.stderr)
        gc.callbacks.remove(on_gc)
        peak = _status("VmHWM")
        wall = sorted(walls)[len(walls) // 2]
        return {
            "wall": wall,
            "walls": walls,
            "cpu": sorted(cpus)[len(cpus) // 2],
            "gc": in_gc[0] / repeat,
            "tracked": (_census["tracked"] - before) / n,
            "base": base,
            "peak": peak,
            "wrong": wrong,
            "requests_per_call": SENT.take() / (repeat * n),
            "exact_peak": resettable,
        }

    if LOOP == "trio":
        import trio

        result: dict[str, Any] = trio.run(main)
        return result
    if LOOP == "uvloop":
        import uvloop

        return asyncio.run(main(), loop_factory=uvloop.new_event_loop)
    return asyncio.run(main())


def run_child(kind: str, n: int, gc_threshold: bool = False) -> dict[str, Any]:
    command = [sys.executable, __file__, "--child", kind, "-n", str(n), "--loop", LOOP]
    command += ["--gc-threshold"] if gc_threshold else []
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=CHILD_TIMEOUT, check=False)
    except subprocess.TimeoutExpired:
        return {"error": f"took over {CHILD_TIMEOUT:.0f} s"}
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"error": f"exit {done.returncode}: {last[:120]}"}
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def available(kind: str) -> str | None:
    module = {"dspy": "dspy", "pydantic-ai": "pydantic_ai"}.get(kind.split("-")[0] if kind.startswith("dspy") else kind)
    if module is None:
        return None
    try:
        __import__(module)
    except ImportError as exc:
        return f"not importable ({exc}); `make .venv-bench/.installed` installs it"
    return None


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("-n", type=int, action="append", help="calls at once (repeatable); default 1000 and 10000")
    parser.add_argument("--only", choices=["imp", "dspy", "pydantic-ai"], help="one framework")
    parser.add_argument("--child", choices=RUNNERS, help=argparse.SUPPRESS)
    parser.add_argument("--profile", action="store_true", help="cProfile imp's runners (in this process)")
    parser.add_argument(
        "--gc-threshold", action="store_true", help=f"gc.set_threshold{GC_THRESHOLD} in every runner after its warm-up"
    )
    parser.add_argument("--loop", choices=LOOPS, default="asyncio", help="the event loop (trio: floor and imp only)")
    args = parser.parse_args(argv)
    global LOOP
    LOOP = args.loop
    sizes = tuple(args.n or SIZES)
    if args.child:
        repeat = 1 if args.child == "dspy-parallel" else 3
        print(json.dumps(child(args.child, sizes[0], args.profile, repeat=repeat, gc_threshold=args.gc_threshold)))
        return 0
    kinds = [k for k in RUNNERS if args.only is None or k.startswith(args.only) or k == "floor"]
    if LOOP == "trio":  # DSPy and pydantic-ai run on asyncio only
        kinds = [k for k in kinds if k == "floor" or k.startswith("imp")]
    if args.profile:
        for kind in [k for k in kinds if k.startswith("imp")]:
            for n in sizes:
                print(f"--- {kind}, N={n}", file=sys.stderr)
                child(kind, n, profile=True, repeat=1)
        return 0
    print(
        f"{platform.python_implementation()} {platform.python_version()} on {platform.machine()}, {os.cpu_count()} CPUs"
    )
    print(
        f"predict('question -> answer') against an LM that sleeps {LATENCY * 1000:.0f} ms; ideal wall time {LATENCY:.3f} s"
    )
    print(f"event loop: {LOOP}")
    print("memory: peak RSS growth during the batch / calls in flight (fresh subprocess per row)")
    print(
        "cpu: process CPU time of the batch / N; gc: the collector's share of it; tracked: GC-tracked objects per call in flight"
    )
    if args.gc_threshold:
        print(f"every runner with gc.set_threshold{GC_THRESHOLD} (not the default: the targets are checked without it)")
    print()
    width = max(len(v) for v in LABELS.values())
    head = (
        f"  {'runner':<{width}}  {'N':>6}  {'wall s':>7}  {'x ideal':>7}  {'KB/call':>8}"
        f"  {'cpu us':>6}  {'gc us':>5}  {'tracked':>7}  notes"
    )
    print(head)
    print("  " + "-" * (len(head) + 10))
    verdicts: list[str] = []
    floors: dict[int, dict[str, Any]] = {}
    above: dict[str, dict[int, float]] = {}
    above_cpu: dict[str, dict[int, float]] = {}
    for n in sizes:
        sides: list[Side] = []
        for kind in kinds:
            missing = available(kind)
            if missing:
                print(f"  {LABELS[kind]:<{width}}  {n:>6}  {'-':>7}  {'-':>7}  {'-':>8}  {'':>24}  {missing}")
                continue
            r = run_child(kind, n, args.gc_threshold)
            if "error" in r:
                print(f"  {LABELS[kind]:<{width}}  {n:>6}  {'-':>7}  {'-':>7}  {'-':>8}  {'':>24}  {r['error']}")
                continue
            ratio = r["wall"] / LATENCY
            per_call = max(0, r["peak"] - r["base"]) / n / 1000
            work = {"LM requests per call": f"{r['requests_per_call']:g}", "answers right": f"{n - r['wrong']} of {n}"}
            sides.append(Side(LABELS[kind], work))
            notes = []
            if r["wrong"]:
                notes.append(f"{r['wrong']} WRONG answers")
            if kind == "dspy-parallel":
                notes.append(f"{min(n, DSPY_THREADS)} threads")
            if not r["exact_peak"]:
                notes.append("peak RSS not resettable: KB/call includes the warm-up")
            if kind == "floor":
                notes.append("no framework: the event loop alone")
                floors[n] = r
            elif n in floors:
                extra = (r["wall"] - floors[n]["wall"]) / n * 1e6
                above.setdefault(kind, {})[n] = extra
                notes.append(
                    f"floor +{(r['wall'] - floors[n]['wall']) * 1000:.0f} ms ({extra:.0f} us/call wall, "
                    f"{(r['cpu'] - floors[n]['cpu']) / n * 1e6:.0f} us/call cpu)"
                )
            if len(r["walls"]) > 1:
                notes.append(f"median of {len(r['walls'])}: " + " ".join(f"{w:.3f}" for w in r["walls"]))
            print(
                f"  {LABELS[kind]:<{width}}  {n:>6}  {r['wall']:>7.3f}  {ratio:>7.1f}  {per_call:>8.1f}"
                f"  {r['cpu'] / n * 1e6:>6.1f}  {r['gc'] / n * 1e6:>5.1f}  {r['tracked']:>7.1f}  {'; '.join(notes)}",
                flush=True,
            )
            if kind.startswith("imp") and n == 10_000 and n in floors and not args.gc_threshold:
                over = r["wall"] / floors[n]["wall"]
                ok = over <= TARGET_OVER_FLOOR and per_call * 1000 <= TARGET_BYTES and not r["wrong"]
                verdicts.append(
                    f"  => {LABELS[kind]} at N={n}: x{over:.2f} of the floor's wall time (target "
                    f"x{TARGET_OVER_FLOOR:.0f}), {per_call:.1f} KB/call (target {TARGET_BYTES / 1000:.0f} KB): "
                    f"{'meets' if ok else 'MISSES'}"
                )
            if kind.startswith("imp") and n in floors:
                above_cpu.setdefault(kind, {})[n] = (r["cpu"] - floors[n]["cpu"]) / n * 1e6
        same_work(f"N={n}", sides)
    for kind, extras in above.items():
        if 1_000 in extras and 10_000 in extras and not args.gc_threshold:
            growth = extras[10_000] / max(extras[1_000], 1e-9)
            cpu = above_cpu[kind]
            cpu_growth = cpu[10_000] / max(cpu[1_000], 1e-9)
            verdicts.append(
                f"  => {LABELS[kind]}: cost above the floor {extras[1_000]:.0f} us/call wall at 1,000, "
                f"{extras[10_000]:.0f} at 10,000 (x{growth:.2f}); cpu {cpu[1_000]:.0f} and {cpu[10_000]:.0f} "
                f"(x{cpu_growth:.2f}); target x{TARGET_GROWTH}: {'meets' if growth <= TARGET_GROWTH else 'MISSES'}"
            )
    print()
    print("\n".join(verdicts))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
