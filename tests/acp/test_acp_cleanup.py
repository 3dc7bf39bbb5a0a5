"""A session's MCP servers end with it: on `session/close`, on `session/load` again, when the agent exits.

Each test marks the servers it lets a session start (an environment variable with a fresh value) and
counts the live processes that carry the mark, so a server left running is seen whoever its parent is.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest

acp = pytest.importorskip("acp")
pytest.importorskip("mcp")
from acp import schema  # noqa: E402
from acp_programs import make  # noqa: E402
from test_acp_agent import FakeConn  # noqa: E402
from test_acp_serve import RecordingClient  # noqa: E402

from imp.acp._agent import ImpAgent  # noqa: E402
from imp.acp._mcp import descriptor  # noqa: E402

HERE = Path(__file__).resolve().parent
pytestmark = pytest.mark.skipif(not Path("/proc/self/environ").exists(), reason="counts processes through /proc")


def time_server(mark: str) -> schema.McpServerStdio:
    return schema.McpServerStdio(
        name="time",
        command=sys.executable,
        args=["-m", "mcp_server_time", "--local-timezone", "UTC"],
        env=[schema.EnvVariable(name="IMP_TEST_MARK", value=mark)],
    )


def running(mark: str) -> int:
    """Live (not zombie) processes whose environment holds IMP_TEST_MARK=mark."""
    needle = f"IMP_TEST_MARK={mark}".encode()
    count = 0
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if needle not in (entry / "environ").read_bytes().split(b"\0"):
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        count += state != "Z"
    return count


async def settled(mark: str, expected: int) -> int:
    """The count once it reaches `expected`, or what it is after 100 looks (a process takes a moment to go)."""
    for _ in range(100):
        found = running(mark)
        if found == expected:
            return found
        await anyio.sleep(0.05)
    return running(mark)


class Store:
    def __init__(self) -> None:
        self.saved: dict[str, Any] = {}

    def save(self, session_id: str, history: Any) -> None:
        self.saved[session_id] = history

    def load(self, session_id: str) -> Any:
        return self.saved.get(session_id)


def _agent(group: Any, server: schema.McpServerStdio, store: Store | None = None, factory: Any = make) -> ImpAgent:
    served = ImpAgent(
        factory,
        input_key=None,
        output_key=None,
        permission_policy="allow",
        store=store,
        mcp={"trusted": [descriptor(server)]},
        group=group,
    )
    served.on_connect(FakeConn())
    return served


async def test_closing_a_session_ends_its_servers() -> None:
    mark = uuid.uuid4().hex
    server = time_server(mark)
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            served = _agent(group, server)
            first = (await served.new_session(cwd=str(HERE), mcp_servers=[server])).session_id
            second = (await served.new_session(cwd=str(HERE), mcp_servers=[server])).session_id
            assert await settled(mark, 2) == 2
            await served.close_session(session_id=first)
            assert await settled(mark, 1) == 1  # the other session's server serves on
            await served.close_session(session_id=second)
            assert await settled(mark, 0) == 0
            with pytest.raises(acp.RequestError):
                await served.close_session(session_id=first)
            group.cancel_scope.cancel()


async def test_loading_a_session_again_does_not_add_servers() -> None:
    mark = uuid.uuid4().hex
    server = time_server(mark)
    store = Store()
    store.saved["s1"] = {"type": "history", "messages": [{"question": "hi", "answer": "hello"}]}
    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            served = _agent(group, server, store)
            for _ in range(3):
                await served.load_session(cwd=str(HERE), session_id="s1", mcp_servers=[server])
                assert await settled(mark, 1) == 1
            await served.close_session(session_id="s1")
            assert await settled(mark, 0) == 0
            group.cancel_scope.cancel()


async def test_a_factory_that_fails_leaves_no_server_running() -> None:
    mark = uuid.uuid4().hex
    server = time_server(mark)

    def broken(context: Any) -> Any:
        raise RuntimeError("no program today")

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            served = _agent(group, server, factory=broken)
            with pytest.raises(RuntimeError):
                await served.new_session(cwd=str(HERE), mcp_servers=[server])
            assert await settled(mark, 0) == 0
            group.cancel_scope.cancel()


async def test_the_agent_exiting_ends_every_sessions_servers(tmp_path: Path) -> None:
    mark = uuid.uuid4().hex
    server = time_server(mark)
    trusted = tmp_path / "trusted.json"
    trusted.write_text(json.dumps([descriptor(server)]))
    client = RecordingClient()
    async with acp.spawn_agent_process(
        client, sys.executable, "-m", "imp.acp", "acp_programs:make", "--mcp-trusted", str(trusted), cwd=HERE
    ) as (conn, process):
        init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        assert init.agent_capabilities.session_capabilities.close is not None  # session/close is served
        for _ in range(2):
            await conn.new_session(cwd=str(HERE), mcp_servers=[server])
        assert await settled(mark, 2) == 2
        closing = (await conn.new_session(cwd=str(HERE), mcp_servers=[server])).session_id
        assert await settled(mark, 3) == 3
        await conn.close_session(session_id=closing)  # over the wire too
        assert await settled(mark, 2) == 2
    assert await asyncio.wait_for(process.wait(), 20) is not None  # stdin closed: the agent exits ...
    assert await settled(mark, 0) == 0  # ... and takes its sessions' servers with it
