"""The ReAct walkthrough's cast: the on_call tool, the escalation signature, and a scripted model."""

from typing import Any

import imp
from imp.tools import tool

ON_CALL = {"atlas": "Maya", "harbor": "Tom", "beacon": "Ines", "quill": "Raj"}


def _on_call(team: str) -> str:
    return ON_CALL[team]


on_call = tool(
    _on_call,
    name="on_call",
    description="Look up the on-call engineer for a squad.",
    schema={
        "type": "object",
        "properties": {"team": {"type": "string", "enum": ["atlas", "harbor", "beacon", "quill"]}},
        "required": ["team"],
    },
)


def _page(name: str) -> str:
    return f"paged {name}"


page = tool(_page, name="page", description="Page an engineer.")

escalation = imp.signature(
    "ticket -> team: enum[atlas,harbor,beacon,quill], contact: string",
    "Find the squad that owns the ticket and its on-call engineer. "
    "atlas owns money, harbor the platform, beacon identity, quill the product.",
)


def script(steps: list[Any]) -> imp.ScriptedLM:
    """The seed's `script`: each request takes the next step; an exhausted script calls no tool."""
    return imp.ScriptedLM(steps, exhausted={"tool_calls": []})


def results(prediction: imp.Prediction) -> list[Any]:
    return [r.result for step in prediction.metadata.history for r in step.get("tool_call_results") or ()]


def call_names(prediction: imp.Prediction) -> list[str]:
    return [c.name for step in prediction.metadata.history for c in step.get("tool_calls") or ()]
