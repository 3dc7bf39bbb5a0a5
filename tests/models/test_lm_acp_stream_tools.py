"""The ACP agent on the recommended local server (llama-cpp-python, `chatml-function-calling`): a prompt
whose model calls a tool ends its turn, with no capability set by hand and no request sent twice."""

from __future__ import annotations

import pytest
from fake_provider import FakeProvider
from llama_cpp_stand_in import ChatmlFunctionCalling, add_first

pytest.importorskip("acp")
from acp_client import HERE, AllowingClient, prompt, served


async def test_an_acp_prompt_with_a_tool_call_ends_its_turn(fake: FakeProvider) -> None:
    server = ChatmlFunctionCalling(add_first)
    fake.responder = server
    client = AllowingClient()
    env = {"IMP_ACP_MODEL": "smollm2", "IMP_ACP_BASE_URL": fake.base_url}
    async with served(client, "acp_react_program:make", env) as conn:
        response = await prompt(conn, str(HERE), "What is 2 + 3?")
    assert response.stop_reason == "end_turn"
    kinds = client.kinds()
    assert "tool_call" in kinds and "tool_call_update" in kinds
    assert [b.get("stream", False) for b in server.sent][:2] == [True, False]
    assert not server.identical_requests(), server.identical_requests()
