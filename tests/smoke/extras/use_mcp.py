"""imp[mcp]: a program served over MCP by imp's own server (stdio, `python -m imp.mcp`), its tool called by a
react agent through imp.mcp.connect. imp's server and client both work on either line of the mcp SDK (1.x,
and 2.x, which a fresh install of the extra gets today), so this snippet does too."""

import pathlib
import sys
import tempfile

import anyio

import imp
import imp.mcp

folder = pathlib.Path(tempfile.mkdtemp())
(folder / "adder.py").write_text(
    "import imp\n"
    "def add(messages, options):\n"
    "    a, b = (int(n) for n in messages[-1]['content'].split(']]', 1)[1].split('\\n\\n')[0].split('+'))\n"
    "    return {'total': str(a + b)}\n"
    "programs = {'add': imp.predict(imp.signature('sum -> total: int', 'Add the numbers.'), lm=imp.StaticLM(add))}\n"
)
ADDER = {"name": "adder", "command": sys.executable, "args": ["-m", "imp.mcp", "adder:programs"], "cwd": str(folder)}
lm = imp.ScriptedLM(
    [
        {"tool_calls": [{"name": "add", "arguments": {"sum": "2+3"}}]},
        {"answer": "5", "tool_calls": []},
    ]
)


async def main() -> None:
    async with imp.mcp.connect([ADDER], trusted=[ADDER]) as tools:
        assert [tool.name for tool in tools] == ["add"]
        prediction = await imp.call(imp.react("question -> answer", tools, lm=lm), question="2 + 3?")
    (result,) = (m["content"] for m in lm.requests[1].messages if m["role"] == "tool")
    assert result == '{"total": 5}', result
    assert prediction.answer == "5", prediction


anyio.run(main)
print("ok")
