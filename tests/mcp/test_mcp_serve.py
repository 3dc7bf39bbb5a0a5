"""imp programs served as MCP tools (`imp.mcp.serve`, `python -m imp.mcp`), checked from the other
side: the `mcp` SDK's own client in this process talking to the server in another, over stdio and
Streamable HTTP, and an imp agent importing the served programs through `imp.mcp.connect`."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_helpers import run

import imp
import imp.mcp
from imp.mcp._sdk import wire
from imp.mcp._served import ServedProgram, describe_part
from imp.programs.stream import StreamPart

HERE = Path(__file__).resolve().parent


def _descriptor(*extra: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "name": "served",
        "command": sys.executable,
        "args": ["-m", "imp.mcp", "served_programs:programs", "--name", "helpers", *extra],
        "cwd": str(HERE),
        "env": {"PYTHONPATH": str(HERE.parent.parent), **(env or {})},
    }


async def _sdk_call(name: str, arguments: dict[str, Any]) -> tuple[dict[str, Any], list[tuple[float, str | None]]]:
    """Start the server as a subprocess, call one tool with the SDK's client; the result and the progress."""
    spec = _descriptor()
    params = StdioServerParameters(command=spec["command"], args=spec["args"], cwd=spec["cwd"], env=spec["env"])
    progress: list[tuple[float, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, message))

    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        result = await session.call_tool(name, arguments, progress_callback=on_progress)
    return wire(result), progress


def test_the_sdk_client_lists_each_program_as_a_tool_with_its_schemas() -> None:
    async def body() -> Any:
        spec = _descriptor()
        params = StdioServerParameters(command=spec["command"], args=spec["args"], cwd=spec["cwd"], env=spec["env"])
        async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
            init = wire(await session.initialize())
            return init, [wire(tool) for tool in (await session.list_tools()).tools]

    init, tools = run(body)
    assert init["serverInfo"]["name"] == "helpers" and init["serverInfo"]["version"] == imp.__version__
    by_name = {tool["name"]: tool for tool in tools}
    assert list(by_name) == ["count_words", "weather", "forecast", "broken"]
    assert by_name["count_words"]["description"] == "Count the words of the question."
    assert by_name["count_words"]["inputSchema"] == {
        "type": "object",
        "properties": {"question": {"type": "string"}},
        "required": ["question"],
        "additionalProperties": False,
    }
    assert by_name["count_words"]["outputSchema"]["properties"] == {"answer": {"type": "integer"}}
    outlook = by_name["forecast"]["inputSchema"]
    assert outlook["properties"]["days"] == {"type": "integer", "minimum": 1, "maximum": 14}
    assert outlook["properties"]["units"]["enum"] == ["metric", "imperial"] and outlook["required"] == ["city", "days"]
    assert by_name["forecast"]["outputSchema"]["required"] == ["forecast", "confidence"]


def test_a_call_answers_with_the_predictions_fields_as_structured_content() -> None:
    result, _ = run(lambda: _sdk_call("forecast", {"city": "Oslo", "days": 3}))
    assert result["isError"] is False
    assert result["structuredContent"] == {
        "forecast": {"city": "Oslo", "high": 7, "tags": ["windy"]},
        "confidence": 0.5,
    }
    assert result["content"] == [
        {"type": "text", "text": '{"forecast": {"city": "Oslo", "high": 7, "tags": ["windy"]}, "confidence": 0.5}'}
    ]
    counted, _ = run(lambda: _sdk_call("count_words", {"question": "how many words here"}))
    assert counted["structuredContent"] == {"answer": 4}


def test_progress_notifications_follow_the_runs_stream_parts() -> None:
    result, progress = run(lambda: _sdk_call("weather", {"city": "Oslo"}))
    assert result["structuredContent"] == {"report": "Report: sunny in Oslo"}
    assert [message for _, message in progress] == [
        'calling lookup({"city": "Oslo"})',
        "lookup answered: sunny in Oslo",
        "report: Report: sunny in Oslo",
    ]
    assert [done for done, _ in progress] == [1, 2, 3]  # increasing, as the protocol asks


@pytest.mark.parametrize(
    ("tool", "arguments", "said"),
    [
        ("broken", {"question": "q"}, "broken failed: RateLimited: 429 slow down"),
        ("count_words", {}, "count_words got invalid arguments: `question` is required."),
        ("forecast", {"city": "Oslo", "days": 40}, "forecast got invalid arguments: `days`"),
        ("count_words", {"question": "q", "extra": 1}, "`extra` is not a known argument"),
        ("nowhere", {}, "no tool named 'nowhere'"),
    ],
)
def test_failures_are_tool_errors_the_caller_reads(tool: str, arguments: dict[str, Any], said: str) -> None:
    result, _ = run(lambda: _sdk_call(tool, arguments))
    assert result["isError"] is True
    assert said in result["content"][0]["text"]
    assert "structuredContent" not in result


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_an_imp_agent_calls_the_served_programs_through_connect(backend: str) -> None:
    lm = imp.ScriptedLM(
        [
            {"tool_calls": [{"name": "count_words", "arguments": {"question": "one two three"}}]},
            {"answer": "three words", "tool_calls": []},
        ]
    )

    async def body() -> Any:
        spec = _descriptor()
        async with imp.mcp.connect([spec], trusted=[spec]) as tools:
            assert [t.name for t in tools] == ["count_words", "weather", "forecast", "broken"]
            assert tools[0].metadata["mcp"]["output_schema"]["properties"] == {"answer": {"type": "integer"}}
            agent = imp.react("question -> answer", tools, lm=lm)
            return await imp.call(agent, question="How many words in 'one two three'?")

    prediction = run(body, backend)
    assert prediction.answer == "three words"
    (result,) = [m for m in lm.requests[1].messages if m["role"] == "tool"]
    assert result["content"] == '{"answer": 3}'


def test_cancelling_the_callers_call_cancels_the_served_run(tmp_path: Path) -> None:
    marker = tmp_path / "marker"
    spec = _descriptor(env={"IMP_TEST_MARKER": str(marker)})

    async def body() -> tuple[str, Any]:
        async with imp.mcp.connect([spec], trusted=[spec]) as tools:
            weather = next(t for t in tools if t.name == "weather")
            with anyio.move_on_after(20):
                async with anyio.create_task_group() as group:
                    group.start_soon(weather.runner, {"city": "Slowtown"})
                    while not (marker.exists() and marker.read_text() == "started"):  # noqa: ASYNC110
                        await anyio.sleep(0.05)
                    group.cancel_scope.cancel()  # the caller gives up: notifications/cancelled
            for _ in range(200):
                if marker.read_text() == "cancelled":
                    break
                await anyio.sleep(0.05)
            seen = marker.read_text()
            still = await next(t for t in tools if t.name == "count_words").runner({"question": "a b"})
            return seen, still

    seen, still = run(body)
    assert seen == "cancelled"  # the tool's task was cancelled on the server, not left running
    assert still.structured == {"answer": 2}  # and the server goes on serving


@pytest.fixture
def http_url() -> Iterator[str]:
    """`imp.mcp.app(...)` served by uvicorn on 127.0.0.1 in a thread."""
    import served_programs

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(imp.mcp.app(served_programs.programs, name="helpers"), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(200):
        if server.started:
            break
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}/mcp"
    server.should_exit = True
    thread.join(10)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_the_same_tools_over_streamable_http(http_url: str, backend: str) -> None:
    spec = {"name": "served", "url": http_url}

    async def body() -> Any:
        async with imp.mcp.connect([spec], trusted=[spec]) as tools:
            count = next(t for t in tools if t.name == "count_words")
            broken = next(t for t in tools if t.name == "broken")
            answered = await count.runner({"question": "over the wire"})
            try:
                await broken.runner({"question": "q"})
            except imp.ToolError as error:
                return answered, error
        raise AssertionError("the broken program answered")

    answered, error = run(body, backend)
    assert answered.structured == {"answer": 3}
    assert error.outcome == "result" and "RateLimited: 429 slow down" in error.message


def test_serving_refuses_what_it_cannot_offer() -> None:
    program = imp.predict("question -> answer", lm=imp.ScriptedLM([]))
    with pytest.raises(TypeError, match=r"a program .* or a mapping"):
        imp.mcp.app([program])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="not a tool name"):
        imp.mcp.app({"two words": program})
    with pytest.raises(TypeError, match="`f` is a builtin_function_or_method, not an imp program"):
        imp.mcp.app({"f": print})  # type: ignore[dict-item]
    with pytest.raises(ValueError, match="at least one program"):
        imp.mcp.app({})


def test_a_history_input_is_left_out_of_the_schema() -> None:
    chat = imp.predict("history: History, question -> answer", lm=imp.ScriptedLM([]))
    served = ServedProgram.of("chat", chat)
    assert list(served.input_schema["properties"]) == ["question"]


def test_each_kind_of_stream_part_has_a_progress_message() -> None:
    parts = [
        (StreamPart("field", field="answer", delta="4"), "answer: 4"),
        (StreamPart("reasoning", delta="hmm"), "reasoning: hmm"),
        (StreamPart("tool_call", tool_name="f", arguments={"x": "y" * 500}), None),
        (StreamPart("tool_result", tool_name="f", output=[1, 2], outcome="result"), "f answered: [1, 2]"),
        (StreamPart("tool_result", tool_name="f", error="boom", outcome="result"), "f failed: boom"),
        (StreamPart("tool_result", tool_name="f", outcome="refused"), "f failed: refused"),
        (StreamPart("retry", reason="bad JSON"), "asking again: bad JSON"),
    ]
    for part, said in parts:
        message = describe_part(part)
        if said is None:
            assert message.startswith('calling f({"x": "yyy') and message.endswith("...)") and len(message) < 230
        else:
            assert message == said


def test_python_m_imp_mcp_serves_streamable_http_with_http(tmp_path: Path) -> None:
    """`python -m imp.mcp ... --http --port N`: `imp.mcp.serve(transport="http")` under uvicorn."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    command = [sys.executable, "-m", "imp.mcp", "served_programs:programs", "--http", "--port", str(port)]
    server = subprocess.Popen(command, cwd=HERE, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    spec = {"name": "served", "url": f"http://127.0.0.1:{port}/mcp"}

    async def body() -> Any:
        for _ in range(300):  # the server starting
            try:
                async with imp.mcp.connect([spec], trusted=[spec], connect_timeout=5) as tools:
                    return await next(t for t in tools if t.name == "count_words").runner({"question": "a b c d"})
            except imp.mcp.MCPConnectionError:
                await anyio.sleep(0.1)
        raise AssertionError("the server did not start")

    try:
        answered = run(body)
    finally:
        server.terminate()
        server.wait(10)
    assert answered.structured == {"answer": 4}


def test_the_http_app_accepts_loopback_and_the_allowed_hosts_only() -> None:
    from starlette.testclient import TestClient

    program = imp.predict("question -> answer", lm=imp.ScriptedLM([]))
    initialize = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
    }
    headers = {"accept": "application/json, text/event-stream", "content-type": "application/json"}
    served = imp.mcp.app(program, name="one", allowed_hosts=["agents.example.com"])
    statuses = {}
    with TestClient(served) as client:  # the SDK's session manager runs once per app
        for host in ("127.0.0.1:8000", "agents.example.com", "evil.example.com"):
            statuses[host] = client.post("/mcp", json=initialize, headers={**headers, "host": host}).status_code
    assert statuses == {"127.0.0.1:8000": 200, "agents.example.com": 200, "evil.example.com": 421}
