"""The program factory the ACP tests serve (`python -m imp.acp acp_programs:make`): a react agent on a StaticLM.

The model reads the last message: a tool result is answered; a prompt naming `note` reads a note,
`slow` starts a long tool, `twice` reads two notes, `refund` calls a tool that waits for approval; anything else is echoed with the number of
user turns it has seen (the session's history).
"""

from __future__ import annotations

from typing import Any

import anyio

import imp


@imp.tool(metadata={"acp_kind": "read"})
def read_note(name: str) -> str:
    """Read a note by name."""
    return f"note {name}: buy milk"


@imp.tool
async def slow_task(seconds: float) -> str:
    """Work for a while."""
    await anyio.sleep(seconds)
    return "finished"


@imp.tool(requires_approval=True)
def refund(order: str) -> str:
    """Refund an order (a person approves each refund)."""
    return f"refunded {order}"


def model(messages: list[dict[str, Any]], options: dict[str, Any]) -> Any:
    last = messages[-1]
    if last["role"] == "tool":
        return {"answer": f"The tool said: {last['content']}", "tool_calls": []}
    text = str(last.get("content"))
    if "refund" in text:
        return {"tool_calls": [{"name": "refund", "arguments": {"order": "A-7"}}]}
    if "slow" in text:
        return {"tool_calls": [{"name": "slow_task", "arguments": {"seconds": 30}}]}
    if "note" in text:
        return {"tool_calls": [{"name": "read_note", "arguments": {"name": "todo"}}]}
    users = sum(1 for m in messages if m["role"] == "user")
    return imp.LMResponse(text=f"Echo: {text.split(']]')[-1].strip()} (user turns: {users})")


def make(context: Any) -> imp.ReAct:
    return imp.react("question -> answer", [read_note, slow_task, refund], lm=imp.StaticLM(model))
