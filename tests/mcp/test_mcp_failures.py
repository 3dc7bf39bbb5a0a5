"""What an MCP call or import ends with when something goes wrong: a crash, a timeout, a closed
import, a collision, a server that cannot start; and that nothing is left running."""

from __future__ import annotations

import functools
import os
import uuid
from pathlib import Path

import anyio
import pytest
from mcp_helpers import fake, group_members, run, time_server, until, with_token

import imp
from imp.mcp import MCPConnectionError, MCPToolNameError, MCPTools, connect
from imp.tools import ToolCall, ToolResult, run_tool_calls


def test_a_server_that_dies_mid_run_fails_its_calls_not_the_agent() -> None:
    lm = imp.ScriptedLM(
        [
            {"tool_calls": [{"name": "crash", "arguments": {}}]},
            {"tool_calls": [{"name": "echo", "arguments": {"text": "still there?"}}]},
            {"answer": "The fake server is gone.", "tool_calls": []},
        ]
    )
    server = fake()

    async def body() -> imp.Prediction:
        async with connect([server], trusted=[server]) as tools:
            agent = imp.react("question -> answer", tools, lm=lm)
            return await imp.call(agent, question="Is the server up?")

    prediction = run(body)
    assert prediction.answer == "The fake server is gone."
    results = [r for turn in prediction.metadata.history for r in (turn.get("tool_call_results") or ())]
    crashed, after = results
    assert crashed.outcome == "unknown"
    assert crashed.error.startswith("crash got no answer: the MCP server `fake` stopped (it exited with code 1")
    assert crashed.error.endswith("; it may have run.")
    assert after.outcome == "not_sent"
    assert after.error.startswith("echo was not sent: the MCP server `fake` is not running (it exited with code 1")


def test_a_server_that_dies_while_its_child_holds_its_output_fails_its_calls_at_once() -> None:
    token = f"imp-test-{uuid.uuid4()}"
    server = fake()

    async def body() -> tuple[list[ToolResult], float]:
        async with connect([server], trusted=[server], call_timeout=20) as tools:
            calls = [ToolCall("1", "spawn", {"token": token, "holds_stdout": True})]
            assert (await run_tool_calls(calls, tools))[0].ok
            started = anyio.current_time()
            results = await run_tool_calls([ToolCall("2", "crash", {})], tools)
            return results, anyio.current_time() - started

    (crashed,), took = run(body)
    assert crashed.outcome == "unknown"
    assert "it exited with code 1" in (crashed.error or "")
    assert took < 3
    assert not with_token(token)


def test_a_call_past_its_timeout_is_unknown_and_the_server_goes_on(backend: str) -> None:
    server = fake()

    async def body() -> list[ToolResult]:
        async with connect([server], trusted=[server], call_timeout=0.3) as tools:
            slow = await run_tool_calls([ToolCall("1", "nap", {"seconds": 5})], tools)
            fast = await run_tool_calls([ToolCall("2", "echo", {"text": "hi"})], tools)
            return slow + fast

    slow, fast = run(body, backend)
    assert slow.outcome == "unknown"
    assert slow.error == "nap did not answer within 0.3 s; it may have run."
    assert (fast.outcome, fast.result) == ("result", "hi")


def test_a_call_after_the_import_closed_is_not_sent() -> None:
    server = fake()

    async def body() -> tuple[MCPTools, list[ToolResult]]:
        async with connect([server], trusted=[server]) as tools:
            pass
        return tools, await run_tool_calls([ToolCall("1", "echo", {"text": "hi"})], tools)

    _, (result,) = run(body)
    assert result.outcome == "not_sent"
    assert result.error == "echo was not sent: the MCP import is closed."


def test_a_call_running_when_the_import_closes_is_unknown(tmp_path: Path) -> None:
    napping = tmp_path / "napping"
    server = fake(env={"FAKE_SERVER_NAP_STARTED": str(napping)})

    async def body() -> list[ToolResult]:
        into: list[ToolResult] = []
        async with anyio.create_task_group() as tasks, connect([server], trusted=[server]) as tools:
            calls = [ToolCall("1", "nap", {"seconds": 30})]
            tasks.start_soon(functools.partial(run_tool_calls, calls, tools, into=into))
            await until(napping.exists)  # the call is running at the server: now the import closes
        return into

    (result,) = run(body)
    assert result.outcome == "unknown"
    assert (
        result.error == "nap got no answer: the MCP server `fake` stopped (the MCP import was closed); it may have run."
    )


def test_two_servers_publishing_one_name_fail_the_import_naming_both() -> None:
    servers = [fake("alpha"), fake("beta")]

    async def collide() -> None:
        async with connect(servers, trusted=servers):
            raise AssertionError("the import must fail")

    with pytest.raises(MCPToolNameError) as caught:
        run(collide)
    assert caught.value.tool == "echo"
    assert caught.value.servers == ("alpha", "beta")
    assert "`alpha` and `beta` both publish a tool named `echo`" in str(caught.value)

    async def prefixed(**options: object) -> list[str]:
        async with connect(servers, trusted=servers, **options) as tools:  # type: ignore[arg-type]
            return [t.name for t in tools]

    names = run(lambda: prefixed(prefix=True))
    assert "alpha_echo" in names and "beta_echo" in names and "echo" not in names
    names = run(lambda: prefixed(prefix={"beta": "b-"}))
    assert "echo" in names and "b-echo" in names
    with_own = [fake("alpha"), {**fake("beta"), "tool_prefix": "second_"}]

    async def own_prefix() -> list[str]:
        async with connect(with_own, trusted=with_own) as tools:
            return [t.name for t in tools]

    assert "second_echo" in run(own_prefix)


def test_a_tool_named_like_imps_own_fails_the_import() -> None:
    server = fake(env={"FAKE_SERVER_SUBMIT": "1"})

    async def body() -> None:
        async with connect([server], trusted=[server]):
            raise AssertionError("the import must fail")

    with pytest.raises(MCPToolNameError, match="the MCP server `fake` publishes `submit`, which is reserved"):
        run(body)

    async def prefixed() -> list[str]:
        async with connect([server], trusted=[server], prefix=True) as tools:
            return [t.name for t in tools]

    assert "fake_submit" in run(prefixed)


def test_a_server_that_cannot_start_refuses_the_import_and_ends_the_others() -> None:
    token = f"imp-test-{uuid.uuid4()}"
    good = fake("good")
    broken = fake("broken", "--exit-at-start")
    servers = [good, broken]

    async def refuse() -> None:
        async with connect(servers, trusted=servers):
            raise AssertionError("the import must fail")

    with pytest.raises(MCPConnectionError) as caught:
        run(refuse)
    (failure,) = caught.value.failures
    assert (failure.server, failure.index) == ("broken", 1)
    assert failure.reason == "it exited with code 3: fake server: the configuration file is missing"
    assert not with_token(token)


def test_on_failure_drop_lists_the_servers_that_cannot_start() -> None:
    servers = [
        fake("broken", "--exit-at-start"),
        {"name": "missing", "command": "/nonexistent/imp-mcp-server", "args": []},
        time_server(),
    ]

    async def body() -> MCPTools:
        async with connect(servers, trusted=servers, on_failure="drop") as tools:
            result = await run_tool_calls([ToolCall("1", "get_current_time", {"timezone": "UTC"})], tools)
            assert result[0].ok
            return tools

    tools = run(body)
    assert [t.name for t in tools] == ["get_current_time", "convert_time"]
    assert [(u.server, u.index) for u in tools.unavailable] == [("broken", 0), ("missing", 1)]
    assert "code 3" in tools.unavailable[0].reason
    assert "imp-mcp-server" in tools.unavailable[1].reason


def test_a_server_that_does_not_start_in_time_is_unavailable() -> None:
    servers = [fake("sleepy", "--slow-start")]

    async def body() -> MCPTools:
        async with connect(servers, trusted=servers, on_failure="drop", connect_timeout=0.5) as tools:
            return tools

    tools = run(body)
    assert list(tools) == []
    assert tools.unavailable[0].reason == "it did not start within 0.5 s"


def test_leaving_the_context_ends_the_whole_process_group() -> None:
    token = f"imp-test-{uuid.uuid4()}"
    server = fake()

    async def body() -> tuple[int, int]:
        async with connect([server], trusted=[server]) as tools:
            (result,) = await run_tool_calls([ToolCall("1", "spawn", {"token": token})], tools)
            child = int(result.result)
            assert with_token(token) == {child}
            pgid = os.getpgid(child)
            assert pgid != os.getpgrp()  # the server runs in a process group of its own
            assert len(group_members(pgid)) == 2  # the server and its child
        return child, pgid

    _child, pgid = run(body)
    assert not with_token(token)
    assert not group_members(pgid)


def test_a_child_that_ignores_sigterm_is_killed_after_the_grace_period() -> None:
    token = f"imp-test-{uuid.uuid4()}"
    server = fake()

    async def body() -> float:
        async with connect([server], trusted=[server], kill_after=0.3) as tools:
            calls = [ToolCall("1", "spawn", {"token": token, "stubborn": True})]
            (result,) = await run_tool_calls(calls, tools)
            assert result.ok and with_token(token)
            started = anyio.current_time()
        return anyio.current_time() - started

    took = run(body)
    assert not with_token(token)
    assert 0.3 <= took < 3.0


def test_an_error_in_the_body_propagates_as_is_and_ends_the_servers() -> None:
    server = fake()

    async def body() -> None:
        async with connect([server], trusted=[server]):
            raise KeyError("mine")

    with pytest.raises(KeyError, match="mine"):
        run(body)


def test_cancelling_the_caller_ends_the_servers() -> None:
    server = fake()

    async def body() -> bool:
        with anyio.move_on_after(1.5) as scope:
            async with connect([server], trusted=[server]) as tools:
                await run_tool_calls([ToolCall("1", "nap", {"seconds": 30})], tools)
        return scope.cancelled_caught

    assert run(body) is True
