"""`run_tool_calls`: concurrency, ordering, barriers, failures, policy, authorization, cancellation.

Every scenario runs under asyncio and trio (the `run` fixture).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import anyio
import pytest

from imp.tools import (
    Allow,
    AuthorizationRequest,
    Cancel,
    Decision,
    Deny,
    ExecutionCancelled,
    Tool,
    ToolCall,
    ToolError,
    ToolEvent,
    ToolResult,
    format_tool_result,
    run_tool_calls,
    tool,
)

Run = Callable[[Callable[[], Awaitable[Any]]], Any]


@tool
def on_call(team: Literal["atlas", "harbor", "beacon", "quill"]) -> str:
    """Look up the on-call engineer for a squad."""
    return {"atlas": "Maya", "harbor": "Tom", "beacon": "Ines", "quill": "Raj"}[team]


def calls(*specs: tuple[str, Any]) -> list[ToolCall]:
    return [ToolCall(id=f"call_{i}", name=name, arguments=args) for i, (name, args) in enumerate(specs)]


def outcomes(results: list[ToolResult]) -> list[str]:
    return [r.outcome for r in results]


# --- concurrency ---------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["sync", "async"])
def test_eight_slow_tools_run_together(run: Run, kind: str) -> None:
    """Each call waits until all eight are running at once: run one after another, none could finish
    (counted, not timed)."""
    if kind == "sync":
        barrier = threading.Barrier(8, timeout=10)

        def nap(n: int) -> int:
            barrier.wait()  # BrokenBarrierError unless the other seven are running in their threads
            return n

        slow = tool(nap)
    else:
        arrived = 0
        all_in: anyio.Event | None = None

        async def anap(n: int) -> int:
            nonlocal arrived, all_in
            all_in = all_in or anyio.Event()
            arrived += 1
            if arrived == 8:
                all_in.set()
            with anyio.fail_after(10):
                await all_in.wait()
            return n

        slow = tool(anap, name="nap")

    async def body() -> list[ToolResult]:
        return await run_tool_calls(calls(*[("nap", {"n": i}) for i in range(8)]), [slow])

    results = run(body)
    assert outcomes(results) == ["result"] * 8, [r.error for r in results]
    assert [r.result for r in results] == list(range(8))


def test_results_follow_call_order_not_finish_order(run: Run) -> None:
    finished: list[int] = []

    async def wait(n: int, delay: float) -> int:
        await anyio.sleep(delay)
        finished.append(n)
        return n

    waiter = tool(wait)
    specs = [("wait", {"n": i, "delay": d}) for i, d in enumerate([0.15, 0.0, 0.1, 0.05])]

    results = run(lambda: run_tool_calls(calls(*specs), [waiter]))
    assert finished == [1, 3, 2, 0]
    assert [r.result for r in results] == [0, 1, 2, 3]
    assert [r.id for r in results] == ["call_0", "call_1", "call_2", "call_3"]


def test_sync_tools_do_not_block_the_event_loop(run: Run) -> None:
    def block() -> str:
        time.sleep(0.3)
        return "done"

    ticks = 0

    async def body() -> None:
        nonlocal ticks

        async def ticker() -> None:
            nonlocal ticks
            while True:
                await anyio.sleep(0.01)
                ticks += 1

        async with anyio.create_task_group() as tg:
            tg.start_soon(ticker)
            await run_tool_calls(calls(("block", {})), [tool(block)])
            tg.cancel_scope.cancel()

    run(body)
    assert ticks >= 10


def test_a_thread_limiter_bounds_sync_tools(run: Run) -> None:
    live = 0
    peak = 0
    lock = threading.Lock()

    def work() -> None:
        nonlocal live, peak
        with lock:
            live += 1
            peak = max(peak, live)
        time.sleep(0.05)
        with lock:
            live -= 1

    async def body() -> None:
        await run_tool_calls(calls(*[("work", {})] * 6), [tool(work)], limiter=anyio.CapacityLimiter(2))

    run(body)
    assert peak == 2


def test_sequential_tool_is_a_barrier(run: Run) -> None:
    log: list[str] = []

    async def step(label: str, delay: float) -> str:
        log.append(f"start {label}")
        await anyio.sleep(delay)
        log.append(f"end {label}")
        return label

    async def barrier(label: str) -> str:
        log.append(f"start {label}")
        await anyio.sleep(0.05)
        log.append(f"end {label}")
        return label

    regular = tool(step)
    alone = tool(barrier, sequential=True)
    specs = [
        ("step", {"label": "a", "delay": 0.1}),
        ("step", {"label": "b", "delay": 0.05}),
        ("barrier", {"label": "S"}),
        ("step", {"label": "c", "delay": 0.05}),
        ("step", {"label": "d", "delay": 0.0}),
    ]

    results = run(lambda: run_tool_calls(calls(*specs), [regular, alone]))
    assert [r.result for r in results] == ["a", "b", "S", "c", "d"]
    s_start, s_end = log.index("start S"), log.index("end S")
    assert s_end == s_start + 1  # nothing else ran while it did
    assert {"end a", "end b"} <= set(log[:s_start])  # after the calls before it ended
    assert {"start c", "start d"} <= set(log[s_end + 1 :])  # before the calls after it started
    assert set(log[:2]) == {"start a", "start b"}  # the calls before it ran together


# --- failures --------------------------------------------------------------------------------


def test_a_raising_tool_does_not_cancel_its_siblings(run: Run) -> None:
    async def boom() -> None:
        await anyio.sleep(0.01)
        raise RuntimeError("boom")

    async def slow() -> str:
        await anyio.sleep(0.1)
        return "still here"

    results = run(lambda: run_tool_calls(calls(("boom", {}), ("slow", {})), [tool(boom), tool(slow)]))
    assert outcomes(results) == ["unknown", "result"]
    assert format_tool_result(results[0]) == "Error: boom failed: boom"
    assert results[1].result == "still here"


def test_a_sync_tool_raising_is_unknown_with_its_type_when_silent(run: Run) -> None:
    def broken() -> None:
        raise KeyError

    (result,) = run(lambda: run_tool_calls(calls(("broken", {})), [tool(broken)]))
    assert result.outcome == "unknown"
    assert result.error == "broken failed: KeyError"


def test_a_timeout_is_unknown_and_spares_siblings(run: Run) -> None:
    release = threading.Event()  # the sync tool's thread runs on until the test lets it go

    async def hang() -> None:
        await anyio.sleep(10)

    def sync_hang() -> None:
        release.wait(10)

    async def quick() -> str:
        await anyio.sleep(0.05)
        return "ok"

    tools = [tool(hang, timeout=0.1), tool(sync_hang, timeout=0.1), tool(quick)]

    async def body() -> list[ToolResult]:
        with anyio.fail_after(5):  # "did not wait for the hung tools", not a speed claim
            return await run_tool_calls(calls(("hang", {}), ("sync_hang", {}), ("quick", {})), tools)

    try:
        results = run(body)
        # The step came back while the sync tool was still blocked in its thread: not waited for.
        assert not release.is_set()
    finally:
        release.set()
    assert outcomes(results) == ["unknown", "unknown", "result"]
    assert results[0].error == "hang did not finish within 0.1 s; it may have run."
    assert results[1].error == "sync_hang did not finish within 0.1 s; it may have run."


def test_a_tool_error_keeps_the_outcome_it_names(run: Run) -> None:
    def lookup(kind: str) -> str:
        if kind == "own":
            raise ToolError("no such squad")
        raise ToolError("the token was refused", outcome="auth_refused")

    results = run(
        lambda: run_tool_calls(calls(("lookup", {"kind": "own"}), ("lookup", {"kind": "auth"})), [tool(lookup)])
    )
    assert [(r.outcome, r.error) for r in results] == [
        ("result", "no such squad"),
        ("auth_refused", "the token was refused"),
    ]
    assert not results[0].ok


def test_a_tool_is_never_retried(run: Run) -> None:
    attempts = 0

    def flaky() -> None:
        nonlocal attempts
        attempts += 1
        raise ConnectionError("reset")

    (result,) = run(lambda: run_tool_calls(calls(("flaky", {})), [tool(flaky)]))
    assert attempts == 1 and result.outcome == "unknown"


# --- arguments ---------------------------------------------------------------------------------


def test_bad_arguments_are_refused_before_running(run: Run) -> None:
    ran = False

    def page(name: str, times: int = 1) -> str:
        nonlocal ran
        ran = True
        return name

    results = run(
        lambda: run_tool_calls(
            calls(("page", {}), ("page", {"name": "Maya", "times": "two"}), ("page", "[1, 2]")),
            [tool(page)],
        )
    )
    assert outcomes(results) == ["refused", "refused", "refused"]
    assert [format_tool_result(r) for r in results] == [
        "Error: page got invalid arguments: `name` is required.",
        'Error: page got invalid arguments: `times` must be an integer, not a string ("two").',
        'Error: page got arguments that are not a JSON object: "[1, 2]".',
    ]
    assert not ran


def test_string_encoded_arguments_are_decoded_and_repaired(run: Run) -> None:
    results = run(
        lambda: run_tool_calls(
            calls(("on_call", '{"team": "atlas"}'), ("on_call", "{'team': 'harbor'"), ("on_call", '{"team": "zeus"}')),
            [on_call],
        )
    )
    assert [r.result for r in results[:2]] == ["Maya", "Tom"]
    assert results[2].outcome == "refused"
    assert (
        results[2].error
        == 'on_call got invalid arguments: `team` must be one of "atlas", "harbor", "beacon", "quill" (got "zeus").'
    )


def test_typed_values_reach_the_function(run: Run) -> None:
    import enum

    from pydantic import BaseModel

    class Level(enum.Enum):
        LOW = "low"
        HIGH = "high"

    class Owner(BaseModel):
        name: str

    seen: dict[str, Any] = {}

    def file(level: Level, owner: Owner, count: int = 2) -> str:
        seen.update(level=level, owner=owner, count=count)
        return "filed"

    filer = tool(file)  # built beside the local classes its hints name
    (result,) = run(lambda: run_tool_calls(calls(("file", {"level": "high", "owner": {"name": "Maya"}})), [filer]))
    assert result.result == "filed"
    assert seen == {"level": Level.HIGH, "owner": Owner(name="Maya"), "count": 2}


def test_explicit_schema_passes_only_known_properties(run: Run) -> None:
    received: dict[str, Any] = {}
    schema = {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]}

    def page(**kwargs: Any) -> str:
        received["keywords"] = kwargs
        return "paged"

    def page_mapping(arguments: dict[str, Any]) -> str:
        received["mapping"] = arguments
        return "paged"

    tools = [
        tool(page, schema=schema, description="Page."),
        tool(page_mapping, schema=schema, call_with="mapping"),
    ]
    results = run(
        lambda: run_tool_calls(
            calls(("page", {"name": "Maya", "__class__": "x"}), ("page_mapping", {"name": "Tom", "extra": 1})), tools
        )
    )
    assert outcomes(results) == ["result", "result"]
    # Nothing the model sends becomes a Python name: unknown keys never reach **kwargs.
    assert received["keywords"] == {"name": "Maya"}
    assert received["mapping"] == {"name": "Tom", "extra": 1}


def test_with_runner_runs_the_other_function(run: Run) -> None:
    paging = on_call.with_runner(lambda team: f"paged {team}")
    (result,) = run(lambda: run_tool_calls(calls(("on_call", {"team": "harbor"})), [paging]))
    assert result.result == "paged harbor"


def test_unknown_tool_is_refused_naming_the_tools(run: Run) -> None:
    (result,) = run(lambda: run_tool_calls(calls(("lookup", {})), [on_call]))
    assert result.outcome == "refused"
    assert format_tool_result(result) == "Error: there is no tool named `lookup`; the tools are `on_call`."


# --- policy ------------------------------------------------------------------------------------


@tool
def page(name: str) -> str:
    """Page an engineer."""
    return f"paged {name}"


submit = tool(
    lambda answer: answer,
    name="submit",
    description="Submit the answer.",
    internal=True,
    schema={"type": "object", "properties": {"answer": {"type": "string"}}},
)


@pytest.mark.parametrize(
    ("policy", "expected"),
    [
        ("allow", ["result", "result", "result"]),
        ("page", ["refused", "result", "refused"]),
        (["on_call", "submit"], ["result", "refused", "result"]),
        (["on_call"], ["result", "refused", "refused"]),
        (lambda call: call.name != "page", ["result", "refused", "result"]),
    ],
)
def test_policy_forms(run: Run, policy: Any, expected: list[str]) -> None:
    specs = calls(("on_call", {"team": "atlas"}), ("page", {"name": "Maya"}), ("submit", {"answer": "x"}))
    results = run(lambda: run_tool_calls(specs, [on_call, page, submit], policy=policy))
    assert outcomes(results) == expected


def test_policy_reasons_become_sentences(run: Run) -> None:
    async def async_policy(call: ToolCall) -> bool | str:
        if call.name == "page":
            return "paging is off at night"
        return call.arguments.get("team") == "atlas"

    def raising(call: ToolCall) -> bool:
        raise RuntimeError("no rules loaded")

    def malformed(call: ToolCall) -> Any:
        return "yes" if False else 1

    specs = calls(("page", {"name": "Maya"}), ("on_call", {"team": "harbor"}), ("on_call", {"team": "atlas"}))
    results = run(lambda: run_tool_calls(specs, [on_call, page], policy=async_policy))
    assert outcomes(results) == ["refused", "refused", "result"]
    assert results[0].error == "page was not allowed; paging is off at night."
    assert results[1].error == "on_call was not allowed; the tool policy does not permit it."

    (failed,) = run(lambda: run_tool_calls(calls(("page", {"name": "x"})), [page], policy=raising))
    assert failed.error == "page was not allowed; the tool policy failed: no rules loaded."
    (odd,) = run(lambda: run_tool_calls(calls(("page", {"name": "x"})), [page], policy=malformed))
    assert odd.error == "page was not allowed; the tool policy gave no valid answer (got int)."


def test_policy_is_checked_before_the_schema(run: Run) -> None:
    (result,) = run(lambda: run_tool_calls(calls(("page", {})), [page], policy=["on_call"]))
    assert result.error == "page was not allowed; the tool policy does not permit it."


def test_a_value_that_is_not_a_policy_is_a_type_error(run: Run) -> None:
    with pytest.raises(TypeError, match="tool policy"):
        run(lambda: run_tool_calls(calls(("page", {"name": "x"})), [page], policy=3))  # type: ignore[arg-type]


# --- authorization ---------------------------------------------------------------------------------


def test_authorize_allow_and_deny(run: Run) -> None:
    asked: list[AuthorizationRequest] = []

    async def decide(request: AuthorizationRequest) -> Decision:
        asked.append(request)
        if request.tool_name == "page":
            return Deny("the person declined it")
        return Allow()

    specs = calls(("on_call", {"team": "atlas"}), ("page", {"name": "Maya"}), ("submit", {"answer": "x"}))
    results = run(lambda: run_tool_calls(specs, [on_call, page, submit], authorize=decide))
    assert outcomes(results) == ["result", "refused", "result"]
    assert format_tool_result(results[1]) == "Error: page was not allowed; the person declined it."
    # submit is never sent to the authorizer
    asked.sort(key=lambda r: r.tool_call_id)
    assert [r.tool_name for r in asked] == ["on_call", "page"]
    assert asked[0] == AuthorizationRequest(
        tool_call_id="call_0",
        tool_name="on_call",
        arguments={"team": "atlas"},
        description="Look up the on-call engineer for a squad.",
        metadata={},
    )


def test_only_calls_that_pass_policy_and_schema_are_authorized(run: Run) -> None:
    asked: list[str] = []

    def decide(request: AuthorizationRequest) -> Decision:
        asked.append(request.tool_call_id)
        return Allow()

    specs = calls(("on_call", {"team": "zeus"}), ("page", {"name": "x"}), ("nope", {}), ("on_call", {"team": "quill"}))
    results = run(lambda: run_tool_calls(specs, [on_call, page], policy=["on_call"], authorize=decide))
    assert outcomes(results) == ["refused", "refused", "refused", "result"]
    assert asked == ["call_3"]


@pytest.mark.parametrize(
    ("authorizer", "sentence"),
    [
        ("raising", "page was not allowed; authorization failed: lost the connection."),
        ("slow", "page was not allowed; authorization did not answer within 0.1 s."),
        ("malformed", "page was not allowed; authorization gave no valid answer (got str)."),
        ("empty_deny", "page was not allowed; the person declined it."),
    ],
)
def test_a_failing_authorizer_denies(run: Run, authorizer: str, sentence: str) -> None:
    ran = False

    def guarded(name: str) -> str:
        nonlocal ran
        ran = True
        return name

    async def decide(request: AuthorizationRequest) -> Any:
        if authorizer == "raising":
            raise ConnectionError("lost the connection")
        if authorizer == "slow":
            await anyio.sleep(5)
        if authorizer == "malformed":
            return "allow"
        return Deny()

    async def body() -> list[ToolResult]:
        with anyio.fail_after(4):  # the slow authorizer takes 5 s: it was not waited for
            return await run_tool_calls(
                calls(("page", {"name": "x"})), [guarded_tool], authorize=decide, authorize_timeout=0.1
            )

    guarded_tool = tool(guarded, name="page")
    (result,) = run(body)
    assert result.outcome == "refused"
    assert result.error == sentence
    assert not ran


def test_a_slow_authorizer_keeps_call_order_and_concurrency(run: Run) -> None:
    # Concurrency is counted, not timed: both slow decisions must be in flight together.
    waiting: list[str] = []
    most_at_once = 0

    async def decide(request: AuthorizationRequest) -> Decision:
        nonlocal most_at_once
        if request.arguments["team"] == "atlas":
            waiting.append("atlas")
            most_at_once = max(most_at_once, len(waiting))
            await anyio.sleep(0.2)
            waiting.remove("atlas")
        return Allow()

    async def body() -> list[ToolResult]:
        specs = calls(*[("on_call", {"team": t}) for t in ["atlas", "harbor", "beacon", "quill"] * 2])
        return await run_tool_calls(specs, [on_call], authorize=decide)

    results = run(body)
    assert [r.result for r in results] == ["Maya", "Tom", "Ines", "Raj"] * 2
    assert most_at_once == 2


def test_cancel_ends_the_call_after_recording(run: Run) -> None:
    started: list[str] = []

    async def work(label: str) -> str:
        started.append(label)
        if label == "slow":
            await anyio.Event().wait()  # never set: only a cancellation ends it
        return label

    async def decide(request: AuthorizationRequest) -> Decision:
        if request.arguments["label"] == "stop":
            await anyio.sleep(0.05)  # let the others start (or finish) first
            return Cancel("the operator stopped the run")
        return Allow()

    worker = tool(work)
    barrier = tool(work, name="after", sequential=True)
    specs = calls(
        ("work", {"label": "fast"}),
        ("work", {"label": "slow"}),
        ("work", {"label": "stop"}),
        ("after", {"label": "later"}),
    )

    async def body() -> tuple[ExecutionCancelled, list[ToolResult]]:
        into: list[ToolResult] = []
        with anyio.fail_after(5), pytest.raises(ExecutionCancelled) as caught:  # the slow sibling never ends:
            await run_tool_calls(specs, [worker, barrier], authorize=decide, into=into)  # it was cancelled
        return caught.value, into

    error, into = run(body)
    assert error.reason == "the operator stopped the run"
    assert error.tool_name == "work"
    assert str(error) == "the execution was cancelled at work: the operator stopped the run"
    assert list(error.results) == into
    assert outcomes(into) == ["result", "unknown", "refused", "not_sent"]
    assert (
        into[1].error
        == "work was cancelled while running (the execution was cancelled: the operator stopped the run); it may have run."
    )
    assert into[2].error == "work was not allowed; the execution was cancelled: the operator stopped the run."
    assert into[3].error == "after was not run; the execution was cancelled: the operator stopped the run."
    assert "later" not in started


# --- cancellation of the caller ----------------------------------------------------------------------


def _count_tasks(backend: str) -> int:
    if backend == "asyncio":
        import asyncio

        return len(asyncio.all_tasks())
    import trio

    def walk(task: trio.lowlevel.Task) -> int:
        return 1 + sum(walk(child) for nursery in task.child_nurseries for child in nursery.child_tasks)

    root = trio.lowlevel.current_root_task()
    assert root is not None
    return walk(root)


def test_cancelling_the_caller_cancels_every_call_and_leaves_no_task(run: Run, backend: str) -> None:
    live = 0
    exited = 0
    release = threading.Event()  # the sync tool's thread runs until the test lets it go
    sync_started = threading.Event()

    both_hanging: anyio.Event | None = None

    async def hang(n: int) -> None:
        nonlocal live, exited
        live += 1
        if live == 2 and both_hanging is not None:
            both_hanging.set()
        try:
            await anyio.sleep(10)
        finally:
            live -= 1
            exited += 1

    def sync_hang() -> None:
        sync_started.set()
        release.wait(10)

    async def quick() -> str:
        return "quick"

    tools = [tool(hang), tool(sync_hang), tool(quick), tool(hang, name="later", sequential=True)]
    specs = calls(("quick", {}), ("hang", {"n": 1}), ("hang", {"n": 2}), ("sync_hang", {}), ("later", {"n": 3}))

    async def body() -> tuple[list[ToolResult], int, int]:
        nonlocal both_hanging
        both_hanging = anyio.Event()
        before = _count_tasks(backend)
        into: list[ToolResult] = []
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as group:
                group.start_soon(lambda: run_tool_calls(specs, tools, into=into))
                with anyio.fail_after(5):  # the caller goes away once every call of the step is running
                    await both_hanging.wait()
                    await anyio.to_thread.run_sync(sync_started.wait, 5)
                scope.cancel()
        assert scope.cancelled_caught  # the cancellation propagated, it was not swallowed
        return into, before, _count_tasks(backend)

    try:
        into, before, after = run(body)
        assert not release.is_set()  # the step ended without waiting for the sync tool's thread
    finally:
        release.set()
    assert live == 0 and exited == 2
    assert after == before
    assert outcomes(into) == ["result", "unknown", "unknown", "unknown", "not_sent"]
    assert into[1].error == "hang was cancelled while running (the step was cancelled); it may have run."
    assert into[4].error == "later was not run; the step was cancelled."


# --- events -----------------------------------------------------------------------------------------


def test_events_in_order_with_outcome_and_duration(run: Run) -> None:
    events: list[ToolEvent] = []

    async def slow(n: int) -> int:
        await anyio.sleep(0.05 * n)
        return n

    specs = calls(("slow", {"n": 2}), ("slow", '{"n": 1}'), ("nope", {}), ("gate", {"n": 0}))
    tools = [tool(slow), tool(slow, name="gate", sequential=True)]
    run(lambda: run_tool_calls(specs, tools, on_event=events.append))

    assert [(e.kind, e.index) for e in events] == [
        ("tool_call", 0),
        ("tool_call", 1),
        ("tool_call", 2),
        ("tool_result", 2),
        ("tool_result", 1),
        ("tool_result", 0),
        ("tool_call", 3),
        ("tool_result", 3),
    ]
    assert events[1].arguments == {"n": 1}  # decoded
    assert events[1].tool_call_id == "call_1" and events[1].tool_name == "slow"
    by_index = {e.index: e for e in events if e.kind == "tool_result"}
    assert (by_index[0].outcome, by_index[0].output) == ("result", 2)
    assert by_index[2].outcome == "refused" and by_index[2].error is not None
    assert by_index[0].duration is not None and by_index[0].duration >= 0.09  # slept 0.1 s (however loaded)
    assert by_index[0].dump() == {
        "kind": "tool_result",
        "tool_call_id": "call_0",
        "tool_name": "slow",
        "index": 0,
        "output": 2,
        "outcome": "result",
        "duration": by_index[0].duration,
    }


def test_event_arguments_are_redacted(run: Run) -> None:
    events: list[ToolEvent] = []

    def login(user: str, password: str) -> str:
        return "ok"

    run(
        lambda: run_tool_calls(
            calls(("login", {"user": "maya", "password": "hunter2"})), [tool(login)], on_event=events.append
        )
    )
    assert events[0].arguments == {"user": "maya", "password": "[REDACTED]"}


def test_a_raising_observer_never_steers(run: Run) -> None:
    def observer(event: ToolEvent) -> None:
        raise RuntimeError("observer broke")

    (result,) = run(lambda: run_tool_calls(calls(("on_call", {"team": "atlas"})), [on_call], on_event=observer))
    assert result.result == "Maya"


# --- misc -----------------------------------------------------------------------------------------------


def test_empty_step_and_tool_mapping(run: Run) -> None:
    assert run(lambda: run_tool_calls([], [on_call])) == []
    (result,) = run(lambda: run_tool_calls(calls(("on_call", {"team": "beacon"})), {"on_call": on_call}))
    assert result.result == "Ines"


def test_two_tools_with_one_name_are_refused(run: Run) -> None:
    twin = on_call.with_runner(lambda team: team)
    with pytest.raises(ValueError, match="two tools"):
        run(lambda: run_tool_calls([], [on_call, twin]))


def test_tool_type_is_exported() -> None:
    assert isinstance(on_call, Tool)


def test_sync_tools_run_on_imps_own_threads_which_outlive_the_event_loop() -> None:
    import contextvars

    from imp.tools._threads import run_in_tool_thread

    marker: contextvars.ContextVar[str] = contextvars.ContextVar("marker", default="unset")
    seen: list[tuple[str, str]] = []

    def probe() -> str:
        seen.append((threading.current_thread().name, marker.get()))
        return "ok"

    async def once() -> str:
        marker.set("from the caller")
        return await run_in_tool_thread(probe)

    for backend in ("asyncio", "trio"):
        assert anyio.run(once, backend=backend) == "ok"
    assert all(name.startswith("imp-tool") for name, _ in seen)
    assert all(value == "from the caller" for _, value in seen)


def test_a_sync_tool_outliving_its_event_loop_does_not_hold_the_process() -> None:
    import subprocess
    import sys
    import textwrap

    script = textwrap.dedent(
        """
        import time, anyio
        from imp.tools._threads import run_in_tool_thread

        async def main():
            with anyio.move_on_after(0.05):
                await run_in_tool_thread(lambda: time.sleep(0.3))

        anyio.run(main)
        print("done")
        """
    )
    finished = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=20)
    assert finished.returncode == 0, finished.stderr
    assert finished.stdout.strip() == "done"
