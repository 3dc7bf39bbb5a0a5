"""imp[acp]: `python -m imp.acp` serving a program, driven by the ACP SDK's own client over stdio."""

import asyncio
import pathlib
import sys
import tempfile

import acp

folder = pathlib.Path(tempfile.mkdtemp())
(folder / "programs.py").write_text(
    "import imp\n"
    "def make(context):\n"
    "    return imp.predict('question -> answer', lm=imp.StaticLM(lambda messages, options: {'answer': 'hello'}))\n"
)


class Client:
    def __init__(self) -> None:
        self.chunks: list[str] = []

    def on_connect(self, conn: object) -> None:
        pass

    async def session_update(self, session_id: str, update: object, **_: object) -> None:
        if getattr(update, "session_update", None) == "agent_message_chunk":
            self.chunks.append(update.content.text)  # type: ignore[attr-defined]


async def main() -> None:
    client = Client()
    async with acp.spawn_agent_process(client, sys.executable, "-m", "imp.acp", "programs:make", cwd=folder) as (
        conn,
        _process,
    ):
        await conn.initialize(protocol_version=acp.PROTOCOL_VERSION)
        session = (await conn.new_session(cwd=str(folder), mcp_servers=[])).session_id
        response = await conn.prompt(session_id=session, prompt=[acp.text_block("say hello")])
    assert response.stop_reason == "end_turn", response
    assert "hello" in "".join(client.chunks), client.chunks


asyncio.run(main())
print("ok")
