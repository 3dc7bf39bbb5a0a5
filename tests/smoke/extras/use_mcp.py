"""imp[mcp]: a real MCP server over stdio (written with the SDK the extra installs), its tool called by a react agent."""

import pathlib
import sys
import tempfile

import anyio

import imp
import imp.mcp

server = pathlib.Path(tempfile.mkdtemp()) / "adder.py"
server.write_text(
    "from mcp.server.fastmcp import FastMCP\n"
    "app = FastMCP('adder')\n"
    "@app.tool()\n"
    "def add(a: int, b: int) -> int:\n"
    "    '''Add two integers.'''\n"
    "    return a + b\n"
    "app.run()\n"
)
ADDER = {"name": "adder", "command": sys.executable, "args": [str(server)]}
lm = imp.ScriptedLM(
    [
        {"tool_calls": [{"name": "add", "arguments": {"a": 2, "b": 3}}]},
        {"answer": "5", "tool_calls": []},
    ]
)


async def main() -> None:
    async with imp.mcp.connect([ADDER], trusted=[ADDER]) as tools:
        assert [tool.name for tool in tools] == ["add"]
        prediction = await imp.call(imp.react("question -> answer", tools, lm=lm), question="2 + 3?")
    assert prediction.answer == "5", prediction


anyio.run(main)
print("ok")
