"""imp's MCP import against real servers from PyPI over stdio: mcp-server-time and mcp-server-git,
each driven by a ReAct agent with a scripted model that reads their results."""

from __future__ import annotations

import json
from pathlib import Path

from mcp_helpers import git_server, run, time_server

import imp
from imp.mcp import MCPTools, connect
from imp.tools import ToolCall, run_tool_calls


def test_the_time_server_is_imported_with_its_schemas_and_annotations() -> None:
    async def body() -> MCPTools:
        async with connect([time_server()], trusted=[time_server()]) as tools:
            return tools

    tools: MCPTools = run(body)
    assert isinstance(tools, list)  # usable wherever imp takes a list of tools
    assert tools.unavailable == ()
    by_name = {t.name: t for t in tools}
    assert set(by_name) == {"get_current_time", "convert_time"}
    now = by_name["get_current_time"]
    assert now.parameters["required"] == ["timezone"]
    assert now.metadata["mcp"]["server"] == "time"
    assert now.metadata["mcp"]["tool"] == "get_current_time"
    assert now.metadata["mcp"]["annotations"]["readOnlyHint"] is True
    assert now.spec()["function"]["name"] == "get_current_time"


def test_a_react_agent_reads_the_time_and_a_tool_level_error(backend: str) -> None:
    lm = imp.ScriptedLM(
        [
            {
                "tool_calls": [
                    {"name": "get_current_time", "arguments": {"timezone": "UTC"}},
                    {"name": "get_current_time", "arguments": {"timezone": "Mars/Olympus_Mons"}},
                    {"name": "convert_time", "arguments": {"source_timezone": "UTC", "time": "12:00"}},
                ]
            },
            {
                "tool_calls": [
                    {
                        "name": "convert_time",
                        "arguments": {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
                    }
                ]
            },
            {"answer": "Noon in UTC is 21:00 in Tokyo.", "tool_calls": []},
        ]
    )

    async def body() -> imp.Prediction:
        async with connect([time_server()], trusted=[time_server()]) as tools:
            agent = imp.react("question -> answer", tools, lm=lm)
            return await imp.call(agent, question="What time is noon UTC in Tokyo?")

    prediction = run(body, backend)
    assert prediction.answer == "Noon in UTC is 21:00 in Tokyo."
    second = lm.requests[1].messages
    tool_messages = [m for m in second if m["role"] == "tool"]
    now = json.loads(tool_messages[0]["content"])
    assert now["timezone"] == "UTC"
    assert now["datetime"].endswith("+00:00")
    # the server's own error (isError) is the tool's answer, which the model reads
    assert tool_messages[1]["content"].startswith("Error: ")
    assert "Invalid timezone" in tool_messages[1]["content"]
    # imp checks the arguments against the tool's schema before anything is sent
    assert tool_messages[2]["content"] == ("Error: convert_time got invalid arguments: `target_timezone` is required.")
    last = [m for m in lm.requests[2].messages if m["role"] == "tool"][-1]
    converted = json.loads(last["content"])
    assert converted["source"]["datetime"].startswith(converted["source"]["datetime"][:10])
    assert converted["target"]["timezone"] == "Asia/Tokyo"
    assert converted["target"]["datetime"][11:16] == "21:00"
    history = prediction.metadata.history
    outcomes = [r.outcome for turn in history for r in (turn.get("tool_call_results") or ())]
    assert outcomes == ["result", "result", "refused", "result"]


def test_a_react_agent_reads_a_git_repository(repository: Path) -> None:
    lm = imp.ScriptedLM(
        [
            {
                "tool_calls": [
                    {"name": "git_status", "arguments": {"repo_path": str(repository)}},
                    {"name": "git_log", "arguments": {"repo_path": str(repository), "max_count": 5}},
                    {"name": "git_diff_unstaged", "arguments": {"repo_path": str(repository)}},
                ]
            },
            {"answer": "One commit; README.md now names Maya.", "tool_calls": []},
        ]
    )
    server = git_server(repository)

    async def body() -> imp.Prediction:
        async with connect([server], trusted=[server]) as tools:
            names = {t.name for t in tools}
            assert {"git_status", "git_log", "git_diff_unstaged", "git_commit"} <= names
            agent = imp.react("question -> answer", tools, lm=lm)
            return await imp.call(agent, question="What changed in the repository?")

    prediction = run(body)
    assert prediction.answer == "One commit; README.md now names Maya."
    status, log, diff = (m["content"] for m in lm.requests[1].messages if m["role"] == "tool")
    assert "README.md" in status and "modified" in status
    assert "Add the README" in log
    assert "+On call: Maya." in diff


def test_the_git_server_reports_a_path_outside_its_repository(repository: Path, tmp_path: Path) -> None:
    server = git_server(repository)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    async def body() -> list[imp.ToolResult]:
        async with connect([server], trusted=[server]) as tools:
            calls = [
                ToolCall("a", "git_status", {"repo_path": str(elsewhere)}),
                ToolCall("b", "git_status", {}),
            ]
            return await run_tool_calls(calls, tools)

    outside, missing = run(body)
    assert outside.outcome == "result" and outside.error  # the server's own refusal
    assert missing.outcome == "refused"
    assert missing.error == "git_status got invalid arguments: `repo_path` is required."


def test_two_real_servers_are_imported_together(repository: Path) -> None:
    servers = [time_server(), git_server(repository)]

    async def body() -> list[str]:
        async with connect(servers, trusted=servers, prefix=True) as tools:
            return [t.name for t in tools]

    names = run(body)
    assert names[:2] == ["time_get_current_time", "time_convert_time"]
    assert "git_git_status" in names
