"""`python -m imp.acp` end to end, driven by the official SDK's client side over the subprocess's stdio."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

acp = pytest.importorskip("acp")
from acp import schema  # noqa: E402

HERE = Path(__file__).resolve().parent


class RecordingClient:
    """An ACP client: answers permission requests from a script and records every session update."""

    def __init__(self) -> None:
        self.updates: dict[str, list[Any]] = {}
        self.permissions: list[Any] = []
        self.answers: list[str] = []
        """Option ids to answer permission requests with, in order ("cancel": a cancelled request)."""
        self.tool_started = asyncio.Event()

    def on_connect(self, conn: Any) -> None:
        self.conn = conn

    async def request_permission(
        self, options: list[Any], session_id: str, tool_call: Any, **_: Any
    ) -> schema.RequestPermissionResponse:
        self.permissions.append(tool_call)
        answer = self.answers.pop(0) if self.answers else "allow_once"
        if answer == "cancel":
            return schema.RequestPermissionResponse(outcome=schema.DeniedOutcome(outcome="cancelled"))
        assert answer in {o.option_id for o in options}
        return schema.RequestPermissionResponse(outcome=schema.AllowedOutcome(outcome="selected", option_id=answer))

    async def session_update(self, session_id: str, update: Any, **_: Any) -> None:
        self.updates.setdefault(session_id, []).append(update)
        if update.session_update == "tool_call":
            self.tool_started.set()

    def message(self, session_id: str) -> str:
        return "".join(
            u.content.text for u in self.updates.get(session_id, []) if u.session_update == "agent_message_chunk"
        )

    def kinds(self, session_id: str) -> list[str]:
        return [u.session_update for u in self.updates.get(session_id, [])]


@asynccontextmanager
async def agent(client: RecordingClient) -> AsyncIterator[tuple[Any, Any]]:
    async with acp.spawn_agent_process(client, sys.executable, "-m", "imp.acp", "acp_programs:make", cwd=HERE) as (
        conn,
        process,
    ):
        init = await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        assert init.agent_info.name == "imp"
        yield conn, process
    assert await asyncio.wait_for(process.wait(), 10) is not None  # stdin closed: the agent exits


async def prompt(conn: Any, session_id: str, text: str) -> Any:
    return await conn.prompt(session_id=session_id, prompt=[acp.text_block(text)])


async def test_a_prompt_calls_a_tool_after_the_client_allows_it() -> None:
    client = RecordingClient()
    async with agent(client) as (conn, _):
        session = (await conn.new_session(cwd=str(HERE), mcp_servers=[])).session_id
        response = await prompt(conn, session, "read the note please")
    assert response.stop_reason == "end_turn"
    (asked,) = client.permissions
    assert asked.title == "read_note" and asked.raw_input == {"name": "todo"}
    kinds = client.kinds(session)
    assert kinds.index("tool_call") < kinds.index("tool_call_update") < kinds.index("agent_message_chunk")
    (start,) = [u for u in client.updates[session] if u.session_update == "tool_call"]
    assert start.kind == "read" and start.raw_input == {"name": "todo"} and start.status == "in_progress"
    (done,) = [u for u in client.updates[session] if u.session_update == "tool_call_update"]
    assert done.status == "completed" and "buy milk" in done.content[0].content.text
    assert client.message(session) == "The tool said: note todo: buy milk"


async def test_a_rejected_call_is_the_models_observation_and_always_is_remembered() -> None:
    client = RecordingClient()
    client.answers = ["reject_always"]
    async with agent(client) as (conn, _):
        session = (await conn.new_session(cwd=str(HERE), mcp_servers=[])).session_id
        first = await prompt(conn, session, "read the note")
        second = await prompt(conn, session, "read the note again")
    assert first.stop_reason == second.stop_reason == "end_turn"
    assert len(client.permissions) == 1  # "always" answered the second call without asking
    failed = [u for u in client.updates[session] if u.session_update == "tool_call_update"]
    assert [u.status for u in failed] == ["failed", "failed"]
    assert "rejected" in client.message(session)


async def test_cancel_mid_tool_answers_cancelled_and_the_session_goes_on() -> None:
    client = RecordingClient()
    async with agent(client) as (conn, _):
        session = (await conn.new_session(cwd=str(HERE), mcp_servers=[])).session_id
        running = asyncio.create_task(prompt(conn, session, "do the slow thing"))
        await asyncio.wait_for(client.tool_started.wait(), 10)
        await conn.cancel(session_id=session)
        response = await asyncio.wait_for(running, 10)
        assert response.stop_reason == "cancelled"
        after = await prompt(conn, session, "hello")
    # the cancelled turn stays in the history: the next prompt's model sees it
    assert after.stop_reason == "end_turn" and "Echo: hello (user turns: 2)" in client.message(session)


@pytest.mark.parametrize(
    ("answer", "status", "said"), [("allow_once", "completed", "refunded A-7"), ("reject_once", "failed", "rejected")]
)
async def test_a_call_that_waits_for_approval_is_decided_by_the_editors_permission_request(
    answer: str, status: str, said: str
) -> None:
    """A `requires_approval` tool pauses the turn; the agent asks the editor and resumes with its answer."""
    client = RecordingClient()
    client.answers = [answer]
    async with agent(client) as (conn, _):
        session = (await conn.new_session(cwd=str(HERE), mcp_servers=[])).session_id
        response = await prompt(conn, session, "refund my order")
    assert response.stop_reason == "end_turn"
    (asked,) = client.permissions
    assert asked.title == "refund" and asked.raw_input == {"order": "A-7"}
    updates = [u for u in client.updates[session] if u.session_update in ("tool_call", "tool_call_update")]
    assert next(u.status for u in updates) == "in_progress" and "pending" in [u.status for u in updates]
    assert updates[-1].status == status
    assert said in client.message(session)


async def test_a_cancelled_permission_request_cancels_the_turn() -> None:
    client = RecordingClient()
    client.answers = ["cancel"]
    async with agent(client) as (conn, _):
        session = (await conn.new_session(cwd=str(HERE), mcp_servers=[])).session_id
        response = await prompt(conn, session, "read the note")
    assert response.stop_reason == "cancelled"


async def test_two_sessions_at_once_and_a_second_prompt_continues_the_history() -> None:
    client = RecordingClient()
    async with agent(client) as (conn, _):
        a = (await conn.new_session(cwd=str(HERE), mcp_servers=[])).session_id
        b = (await conn.new_session(cwd=str(HERE), mcp_servers=[])).session_id
        assert a != b
        await asyncio.gather(prompt(conn, a, "hello a"), prompt(conn, b, "hello b"))
        await prompt(conn, a, "again a")
    assert client.message(a) == "Echo: hello a (user turns: 1)Echo: again a (user turns: 2)"
    assert client.message(b) == "Echo: hello b (user turns: 1)"
