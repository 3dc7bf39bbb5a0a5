"""imp[agui]: a react run's stream as AG-UI events, in the protocol package's own types."""

import anyio
from ag_ui.core import EventType

import imp
import imp.agui


@imp.tool
def stock(item: str) -> int:
    """How many of an item are in the warehouse."""
    return {"kettle": 3}.get(item, 0)


steps = [
    {"tool_calls": [{"name": "stock", "arguments": {"item": "kettle"}}]},
    {"answer": "3 kettles", "tool_calls": []},
]
agent = imp.react("question -> answer", [stock], lm=imp.ScriptedLM(steps))


async def main() -> list[EventType]:
    parts = imp.stream(agent, question="How many kettles?")
    return [event.type async for event in imp.agui.events(parts, thread_id="t", run_id="r")]


kinds = anyio.run(main)
assert kinds[0] == EventType.RUN_STARTED and kinds[-1] == EventType.RUN_FINISHED, kinds
assert EventType.TOOL_CALL_RESULT in kinds, kinds
print("ok")
