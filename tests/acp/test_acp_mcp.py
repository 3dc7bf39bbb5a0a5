"""The MCP servers a session lists: connected through imp.mcp under its approval, their tools given to the factory."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

acp = pytest.importorskip("acp")
pytest.importorskip("mcp")
from acp import schema  # noqa: E402
from acp_programs import make  # noqa: E402
from test_acp_agent import FakeConn  # noqa: E402

from imp.acp._agent import ImpAgent  # noqa: E402
from imp.acp._mcp import descriptor  # noqa: E402

HERE = Path(__file__).resolve().parent
TIME = schema.McpServerStdio(
    name="time", command=sys.executable, args=["-m", "mcp_server_time", "--local-timezone", "UTC"], env=[]
)


def test_an_acp_server_entry_becomes_an_imp_mcp_descriptor() -> None:
    stdio = schema.McpServerStdio(name="a", command="run", args=["x"], env=[schema.EnvVariable(name="K", value="v")])
    assert descriptor(stdio) == {"name": "a", "command": "run", "args": ["x"], "env": {"K": "v"}}
    http = schema.HttpMcpServer(type="http", name="b", url="http://127.0.0.1:1/mcp", headers=[])
    assert descriptor(http) == {"name": "b", "url": "http://127.0.0.1:1/mcp"}


async def test_a_trusted_server_is_connected_and_its_tools_reach_the_factory() -> None:
    contexts: list[Any] = []

    def factory(context: Any) -> Any:
        contexts.append(context)
        return make(context)

    with anyio.fail_after(60):
        async with anyio.create_task_group() as group:
            served = ImpAgent(
                factory,
                input_key=None,
                output_key=None,
                permission_policy="allow",
                store=None,
                mcp={"trusted": [descriptor(TIME)]},
                group=group,
            )
            served.on_connect(FakeConn())
            await served.new_session(cwd=str(HERE), mcp_servers=[TIME])
            names = [t.name for t in contexts[0].tools]
            assert "get_current_time" in names
            group.cancel_scope.cancel()


async def test_a_server_the_approval_does_not_trust_refuses_the_session() -> None:
    other = schema.McpServerStdio(name="other", command=sys.executable, args=["-m", "nothing"], env=[])
    async with anyio.create_task_group() as group:
        served = ImpAgent(
            make,
            input_key=None,
            output_key=None,
            permission_policy="allow",
            store=None,
            mcp={"trusted": [descriptor(TIME)]},
            group=group,
        )
        served.on_connect(FakeConn())
        with pytest.raises(acp.RequestError) as error:
            await served.new_session(cwd=str(HERE), mcp_servers=[other])
        assert "not authorized" in str(error.value.data)
        group.cancel_scope.cancel()
