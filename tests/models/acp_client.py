"""An ACP client for tests that serve a program with `python -m imp.acp`: allows every tool call, records updates."""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import acp
from acp import schema

HERE = Path(__file__).resolve().parent


class AllowingClient:
    """Answers every permission request with `allow_once` and records every session update."""

    def __init__(self) -> None:
        self.updates: list[Any] = []

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **_: Any
    ) -> schema.RequestPermissionResponse:
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id="allow_once")
        )

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.append(update)

    def kinds(self) -> list[str]:
        return [u.session_update for u in self.updates]


@asynccontextmanager
async def served(client: AllowingClient, factory: str, env: Mapping[str, str]) -> AsyncIterator[Any]:
    """`python -m imp.acp <factory>` started in this folder, initialized; yields the connection."""
    async with acp.spawn_agent_process(
        client, sys.executable, "-m", "imp.acp", factory, cwd=HERE, env={**os.environ, **env}
    ) as (conn, _process):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        yield conn


async def prompt(conn: Any, cwd: str, text: str) -> Any:
    """A new session and one prompt in it; the prompt's response."""
    session = (await conn.new_session(cwd=cwd, mcp_servers=[])).session_id
    return await conn.prompt(session_id=session, prompt=[acp.text_block(text)])
