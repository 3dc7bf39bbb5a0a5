"""Against FastMCP on 127.0.0.1: a call given up sends `notifications/cancelled`; headers and a
bearer token come from the environment the descriptor names, and the token is never shown."""

from __future__ import annotations

import json
import time

import anyio
import pytest
from live_server import Watched, serve
from mcp_helpers import run

from imp.mcp import MCPConnectionError, connect
from imp.mcp._sdk import V2
from imp.mcp._servers import InvalidMCPServer, parse_servers
from imp.tools import ToolCall, run_tool_calls

TOKEN = "mcp-token-0123456789abcdefghij"


def _wait_for(condition: object, seconds: float = 5.0) -> None:
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:  # type: ignore[operator]
        time.sleep(0.02)


def _assert_cancelled_once(watched: Watched, reason: str) -> None:
    """One `notifications/cancelled` went out, for the `tools/call` of `slow`, with the reason."""
    (call,) = [m for m in watched.posted if m.get("method") == "tools/call" and m["params"]["name"] == "slow"]
    (note,) = watched.notes("notifications/cancelled")
    # mcp 2.x sends the notice itself when a caller gives up, with its own reason
    assert note["params"] == {"requestId": call["id"], "reason": "caller cancelled" if V2 else reason}
    assert watched.cancelled == watched.started[:1]  # the server stopped exactly the call given up


def test_a_call_that_times_out_sends_cancelled_for_its_request(backend: str) -> None:
    watched = Watched()
    with serve(watched) as url:
        server = {"name": "live", "url": url}

        async def body() -> list[str]:
            async with connect([server], trusted=[server], call_timeout=0.5) as tools:
                results = await run_tool_calls([ToolCall("1", "slow", {"seconds": 30})], tools)
                again = await run_tool_calls([ToolCall("2", "whoami", {})], tools)  # the session still works
                return [r.outcome for r in (*results, *again)]

        outcomes = run(body, backend)
        _wait_for(lambda: watched.cancelled and watched.notes("notifications/cancelled"))
    assert outcomes == ["unknown", "result"]
    _assert_cancelled_once(watched, "no answer within 0.5 s")


def test_a_call_whose_caller_is_cancelled_sends_cancelled(backend: str) -> None:
    watched = Watched()
    with serve(watched) as url:
        server = {"name": "live", "url": url}

        async def body() -> None:
            async with connect([server], trusted=[server], call_timeout=30) as tools:
                (slow,) = [t for t in tools if t.name == "slow"]
                with anyio.move_on_after(0.5):
                    await run_tool_calls([ToolCall("1", slow.name, {"seconds": 30})], tools)

        run(body, backend)
        _wait_for(lambda: watched.cancelled and watched.notes("notifications/cancelled"))
    assert len(watched.started) == 1 and watched.cancelled == watched.started
    _assert_cancelled_once(watched, "the caller cancelled the call")


def test_headers_and_bearer_token_from_the_environment(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LIVE_TOKEN", TOKEN)
    monkeypatch.setenv("LIVE_TEAM", "atlas")
    watched = Watched()
    with serve(watched, token=TOKEN) as url:
        server = {"name": "live", "url": url, "headers_env": {"X-Team": "LIVE_TEAM"}, "bearer_token_env": "LIVE_TOKEN"}

        async def body() -> str:
            async with connect([server], trusted=[server]) as tools:
                (result,) = await run_tool_calls([ToolCall("1", "whoami", {})], tools)
                assert TOKEN not in json.dumps([t.metadata for t in tools], default=str)
                return str(result.result)

        assert run(body, backend) == "atlas"
        assert watched.headers["authorization"] == f"Bearer {TOKEN}"
        assert TOKEN not in json.dumps(server)  # what a saved program holds: the variable's name

        monkeypatch.setenv("LIVE_TOKEN", "wrong-token-abcdefghijklmnop")

        async def refused() -> None:
            async with connect([server], trusted=[server]):
                pass

        with pytest.raises(MCPConnectionError) as info:
            run(refused, backend)
        assert "wrong-token" not in str(info.value) and "401" in str(info.value)


def test_a_missing_variable_is_a_clear_failure(backend: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LIVE_NOWHERE", raising=False)
    server = {"name": "live", "url": "http://127.0.0.1:9/mcp", "bearer_token_env": "LIVE_NOWHERE"}

    async def body() -> None:
        async with connect([server], trusted=[server]):
            pass

    with pytest.raises(MCPConnectionError, match=r"environment variable LIVE_NOWHERE .* is not set"):
        run(body, backend)


@pytest.mark.parametrize(
    ("extra", "problem"),
    [
        ({"bearer_token_env": "not a name"}, "bearer_token_env"),
        ({"bearer_token_env": "T", "headers": {"Authorization": "x"}}, "Authorization header once"),
        ({"headers_env": {"X": 1}}, "headers_env"),
    ],
)
def test_bad_environment_keys_are_refused(extra: dict[str, object], problem: str) -> None:
    with pytest.raises(InvalidMCPServer, match=problem):
        parse_servers([{"name": "s", "url": "http://127.0.0.1/mcp", **extra}])


def test_tools_list_changed_refreshes_the_tools_and_refuses_one_that_went_away(backend: str) -> None:
    watched = Watched()
    with serve(watched) as url:
        server = {"name": "live", "url": url}

        async def body() -> tuple[list[str], list[str], list[tuple[str, str]]]:
            async with connect([server], trusted=[server]) as tools:
                before = [t.name for t in tools]
                (shrinking,) = [t for t in tools if t.name == "shrinking"]
                await run_tool_calls([ToolCall("1", "grow", {})], tools)
                with anyio.fail_after(5):
                    while "extra" not in [t.name for t in tools]:  # noqa: ASYNC110 - the import updates the list
                        await anyio.sleep(0.02)
                after = [t.name for t in tools]
                gone, doubled = await run_tool_calls(
                    [ToolCall("2", "shrinking", {}), ToolCall("3", "extra", {"n": 21})], [shrinking, *tools]
                )
                return before, after, [(gone.outcome, gone.error or ""), (doubled.outcome, str(doubled.result))]

        before, after, (gone, doubled) = run(body, backend)
    assert "shrinking" in before and "extra" not in before
    assert "extra" in after and "shrinking" not in after
    assert gone[0] == "refused" and "no longer offers it (its tool list changed)" in gone[1]
    assert doubled == ("result", "42")
    assert not [m for m in watched.posted if m.get("method") == "tools/call" and m["params"]["name"] == "shrinking"]


def test_a_react_turn_offers_the_changed_tools_at_its_next_step(backend: str) -> None:
    import imp
    from imp.models.base import LMResponse
    from imp.records import ToolCall as Call

    watched = Watched()
    lm = imp.ScriptedLM(
        [
            LMResponse(tool_calls=(Call("a", "grow", {}),)),
            LMResponse(tool_calls=(Call("b", "shrinking", {}), Call("c", "extra", {"n": 21}))),
            LMResponse(text="42"),
        ]
    )
    with serve(watched) as url:
        server = {"name": "live", "url": url}

        async def body() -> imp.Prediction:
            async with connect([server], trusted=[server]) as tools:
                program = imp.react("question -> answer", tools, lm=lm)
                return await imp.call(program, question="double 21")

        prediction = run(body, backend)
    offered = [[t["function"]["name"] for t in r.options["tools"]] for r in lm.requests]
    assert "shrinking" in offered[0] and "extra" not in offered[0]
    assert "extra" in offered[1] and "shrinking" not in offered[1]  # the change, offered at the next step
    assert prediction.answer == "42"
    gone, doubled = prediction.metadata.history[-2].results
    assert gone.outcome == "refused" and "shrinking" in (gone.error or "")
    assert str(doubled.result) == "42"
    assert not [m for m in watched.posted if m.get("method") == "tools/call" and m["params"]["name"] == "shrinking"]
