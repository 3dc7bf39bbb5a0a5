"""Sessions: a conversation's History kept by id in SQLite, across store instances (processes)."""

from __future__ import annotations

import stat
import sys
from pathlib import Path
from typing import Any

import pytest
from imp_backends import both_backends

import imp

sys.path.insert(0, str(Path(__file__).parents[1] / "acp"))


def chat_lm() -> imp.StaticLM:
    def reply(messages: list[Any], options: Any) -> dict[str, str]:
        users = sum(1 for m in messages if m["role"] == "user")
        return {"reply": f"turn {users}"}

    return imp.StaticLM(reply)


@both_backends
async def test_a_session_fills_the_history_input_and_keeps_each_turn(tmp_path: Path) -> None:
    program = imp.predict("message, history: History -> reply", lm=chat_lm())
    first = await imp.call(program, message="hi", session_id="u7", sessions=imp.SQLiteSessions(tmp_path / "s.db"))
    later = imp.SQLiteSessions(tmp_path / "s.db")  # another process
    second = await imp.call(program, message="again", session_id="u7", sessions=later)
    assert (first.reply, second.reply) == ("turn 1", "turn 2")
    history = later.history("u7")
    assert [dict(step.fields) for step in history] == [
        {"message": "hi", "reply": "turn 1"},
        {"message": "again", "reply": "turn 2"},
    ]
    assert later.history("someone-else") == imp.History()
    assert later.sessions() == ["u7"]
    assert stat.S_IMODE((tmp_path / "s.db").stat().st_mode) == 0o600


@both_backends
async def test_a_react_session_keeps_the_loop_steps(tmp_path: Path) -> None:
    @imp.tool
    def clock() -> str:
        """The time."""
        return "noon"

    store = imp.SQLiteSessions(tmp_path / "s.db")
    script = [{"tool_calls": [{"name": "clock", "arguments": {}}]}, "It is noon.", "Still noon."]
    lm = imp.ScriptedLM(script)
    agent = imp.react("question -> answer", tools=[clock], lm=lm)
    await imp.call(agent, question="time?", session_id="s", sessions=store)
    after_first = store.history("s")
    assert any(step.tool_calls for step in after_first)
    await imp.call(agent, question="and now?", session_id="s", sessions=store)
    assert len(store.history("s")) > len(after_first)
    assert "It is noon." in str(lm.requests[-1].messages)  # the kept turn went to the model


async def test_a_session_needs_a_history_input_and_both_arguments(tmp_path: Path) -> None:
    store = imp.SQLiteSessions(tmp_path / "s.db")
    with pytest.raises(TypeError, match="no History input"):
        await imp.call(imp.predict("q -> a", lm=chat_lm()), q="x", session_id="s", sessions=store)
    program = imp.predict("message, history: History -> reply", lm=chat_lm())
    with pytest.raises(TypeError, match="both session_id and the history input"):
        await imp.call(program, message="x", history=imp.History(), session_id="s", sessions=store)
    with pytest.raises(TypeError, match="a session needs both"):
        await imp.call(program, message="x", session_id="s")
    with pytest.raises(ValueError, match="session_id is a non-empty string"):
        await imp.call(program, message="x", session_id="", sessions=store)


async def test_a_kept_history_is_redacted(tmp_path: Path) -> None:
    secret = "sk-proj-" + "Zz09Yy18" * 6
    store = imp.SQLiteSessions(tmp_path / "s.db")
    program = imp.predict("message, history: History -> reply", lm=chat_lm())
    await imp.call(program, message=f"my key is {secret}", session_id="s", sessions=store)
    store.close()
    for path in tmp_path.iterdir():  # noqa: ASYNC240 - the store is closed
        assert secret.encode() not in path.read_bytes()


async def test_sessions_and_a_journal_share_one_file(tmp_path: Path) -> None:
    path = tmp_path / "app.db"
    program = imp.predict("message, history: History -> reply", lm=chat_lm())
    prediction = await imp.call(
        program,
        message="hi",
        session_id="s",
        sessions=imp.SQLiteSessions(path),
        run_id="s/1",
        journal=imp.SQLiteJournal(path),
    )
    assert prediction.reply == "turn 1"
    assert len(imp.SQLiteSessions(path).history("s")) == 1 and imp.SQLiteJournal(path).steps("s/1")


async def test_the_acp_agent_restores_a_session_from_sqlite_in_a_new_process(tmp_path: Path) -> None:
    pytest.importorskip("acp")
    import acp
    from acp_programs import make
    from test_acp_agent import HERE, agent

    store = imp.SQLiteSessions(tmp_path / "acp.db")
    served, _ = agent(make, store=store)
    session = (await served.new_session(cwd=str(HERE))).session_id
    await served.prompt(session, [acp.text_block("hello")])
    again, conn = agent(make, store=imp.SQLiteSessions(tmp_path / "acp.db"))  # a new process
    await again.load_session(cwd=str(HERE), session_id=session)
    assert [u.session_update for u in conn.updates] == ["user_message_chunk", "agent_message_chunk"]
    await again.prompt(session, [acp.text_block("more")])
    chunks = [u.content.text for u in conn.updates if u.session_update == "agent_message_chunk"]
    assert chunks[-1] == "Echo: more (user turns: 2)"
