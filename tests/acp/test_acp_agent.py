"""The ACP agent in process: stop reasons, function policies, session/load from a store, stdout holding only protocol."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

acp = pytest.importorskip("acp")
from acp import schema  # noqa: E402
from acp_programs import make, read_note  # noqa: E402

import imp  # noqa: E402
from imp.acp._agent import ImpAgent  # noqa: E402

HERE = Path(__file__).resolve().parent


class FakeConn:
    """The client side as the agent sees it: records updates, answers permission requests allow-once."""

    def __init__(self) -> None:
        self.updates: list[Any] = []
        self.asked = 0

    async def session_update(self, session_id: str, update: Any) -> None:
        self.updates.append(update)

    async def request_permission(self, session_id: str, tool_call: Any, options: Any) -> Any:
        self.asked += 1
        return schema.RequestPermissionResponse(
            outcome=schema.AllowedOutcome(outcome="selected", option_id="allow_once")
        )


class MemoryStore:
    def __init__(self) -> None:
        self.saved: dict[str, Any] = {}

    def save(self, session_id: str, history: Any) -> None:
        self.saved[session_id] = json.loads(json.dumps(history))

    def load(self, session_id: str) -> Any:
        return self.saved.get(session_id)


def agent(factory: Any = make, **options: Any) -> tuple[ImpAgent, FakeConn]:
    settings: dict[str, Any] = {"input_key": None, "output_key": None, "permission_policy": "client", "store": None}
    settings.update(options)
    served = ImpAgent(factory, **settings)
    conn = FakeConn()
    served.on_connect(conn)
    return served, conn


async def test_max_iters_stops_with_max_turn_requests() -> None:
    looping = imp.StaticLM(lambda m, o: {"tool_calls": [{"name": "read_note", "arguments": {"name": "x"}}]})
    served, _ = agent(lambda ctx: imp.react("question -> answer", [read_note], lm=looping, max_iters=2))
    session = (await served.new_session(cwd=str(HERE))).session_id
    response = await served.prompt(session, [acp.text_block("loop")])
    assert response.stop_reason == "max_turn_requests"


async def test_a_content_filter_stops_with_refusal() -> None:
    refused = imp.StaticLM(lambda m, o: imp.ContentFiltered("no", provider="x"))
    served, _ = agent(lambda ctx: imp.predict("question -> answer", lm=refused))
    session = (await served.new_session(cwd=str(HERE))).session_id
    assert (await served.prompt(session, [acp.text_block("x")])).stop_reason == "refusal"


@pytest.mark.parametrize(
    ("verdict", "asked", "status"), [("allow", 0, "completed"), ("deny", 0, "failed"), ("ask", 1, "completed")]
)
async def test_a_function_policy_allows_denies_or_asks(verdict: str, asked: int, status: str) -> None:
    seen: list[str] = []

    def policy(request: Any) -> str:
        seen.append(request.tool_name)
        return verdict

    served, conn = agent(permission_policy=policy)
    session = (await served.new_session(cwd=str(HERE))).session_id
    assert (await served.prompt(session, [acp.text_block("read the note")])).stop_reason == "end_turn"
    assert seen == ["read_note"] and conn.asked == asked
    (update,) = [u for u in conn.updates if u.session_update == "tool_call_update"]
    assert update.status == status


async def test_the_factory_gets_the_sessions_cwd_and_mcp_servers() -> None:
    contexts: list[Any] = []

    def factory(context: Any) -> imp.ReAct:
        contexts.append(context)
        return make(context)

    served, _ = agent(factory)
    server = schema.McpServerStdio(name="files", command="mcp-files", args=[], env=[])
    await served.new_session(cwd="/tmp/project", mcp_servers=[server])
    (context,) = contexts
    assert context.cwd == "/tmp/project" and context.mcp_servers == (server,)


async def test_session_load_restores_the_history_from_the_store() -> None:
    store = MemoryStore()
    served, _ = agent(store=store)
    assert (await served.initialize(protocol_version=acp.PROTOCOL_VERSION)).agent_capabilities.load_session
    session = (await served.new_session(cwd=str(HERE))).session_id
    await served.prompt(session, [acp.text_block("hello")])
    again, conn = agent(store=store)  # a new process
    await again.load_session(cwd=str(HERE), session_id=session)
    assert [u.session_update for u in conn.updates] == ["user_message_chunk", "agent_message_chunk"]
    await again.prompt(session, [acp.text_block("more")])
    chunks = [u.content.text for u in conn.updates if u.session_update == "agent_message_chunk"]
    assert chunks[-1] == "Echo: more (user turns: 2)"
    served_without, _ = agent()
    with pytest.raises(acp.RequestError):
        await served_without.load_session(cwd=str(HERE), session_id=session)


def test_stdout_holds_only_protocol_and_the_agent_exits_when_stdin_closes() -> None:
    request = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": acp.PROTOCOL_VERSION}}
    done = subprocess.run(
        [sys.executable, "-m", "imp.acp", "acp_programs:make"],
        input=json.dumps(request) + "\n",
        capture_output=True,
        text=True,
        cwd=HERE,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if line.strip()]
    assert len(lines) == 1
    reply = json.loads(lines[0])
    assert reply["id"] == 1 and reply["result"]["agentInfo"]["name"] == "imp"


def test_a_factory_that_is_not_module_function_is_refused() -> None:
    done = subprocess.run([sys.executable, "-m", "imp.acp", "nofunction"], capture_output=True, text=True, timeout=30)
    assert done.returncode == 2 and "module:function" in done.stderr and not done.stdout


async def test_keys_the_program_lacks_are_refused_naming_the_option() -> None:
    served, _ = agent(input_key="prompt")
    with pytest.raises(acp.RequestError) as error:
        await served.new_session(cwd=str(HERE))
    assert "input_key" in str(error.value.data) and "question" in str(error.value.data)
    served, _ = agent(output_key="reply")
    with pytest.raises(acp.RequestError) as error:
        await served.new_session(cwd=str(HERE))
    assert "output_key" in str(error.value.data)


async def test_a_reply_cut_at_max_tokens_stops_with_max_tokens() -> None:
    cut = imp.StaticLM(lambda m, o: imp.LMResponse(text="[[ ## ans", finish_reason="length"))
    served, _ = agent(lambda ctx: imp.predict("question -> answer", lm=cut, json_fallback=False))
    session = (await served.new_session(cwd=str(HERE))).session_id
    assert (await served.prompt(session, [acp.text_block("x")])).stop_reason == "max_tokens"


class DraftAndReview(imp.Program):
    """Two predictors that both write `answer`: the review's is the prompt's answer."""

    def __init__(self, lm: imp.LM) -> None:
        self.draft = imp.predict("question -> answer", lm=lm)
        self.review = imp.predict("question, draft -> answer", lm=lm)
        self.signature = imp.signature("question -> answer")

    async def acall(self, inputs: dict[str, Any], **options: Any) -> imp.Prediction:
        draft = await imp.call(self.draft, question=inputs["question"])
        return await imp.call(self.review, question=inputs["question"], draft=draft.answer)


def _texts(conn: FakeConn, kind: str) -> str:
    return "".join(u.content.text for u in conn.updates if getattr(u, "session_update", None) == kind)


async def test_a_composite_whose_predictors_share_the_answer_sends_the_final_answer_once() -> None:
    lm = imp.ScriptedLM(["[[ ## answer ## ]]\nfirst try", "[[ ## answer ## ]]\nreviewed answer"])
    served, conn = agent(lambda ctx: DraftAndReview(lm))
    session = (await served.new_session(cwd=str(HERE))).session_id
    assert (await served.prompt(session, [acp.text_block("why?")])).stop_reason == "end_turn"
    assert _texts(conn, "agent_message_chunk") == "reviewed answer"
    assert "first try" in _texts(conn, "agent_thought_chunk")


async def test_a_single_predictor_streams_its_answer_as_the_message() -> None:
    lm = imp.ScriptedLM(["[[ ## answer ## ]]\nthe answer"])
    served, conn = agent(lambda ctx: imp.predict("question -> answer", lm=lm))
    session = (await served.new_session(cwd=str(HERE))).session_id
    await served.prompt(session, [acp.text_block("why?")])
    assert _texts(conn, "agent_message_chunk") == "the answer"
    assert _texts(conn, "agent_thought_chunk") == ""
