"""Programs served over MCP by the serve tests (`python -m imp.mcp served_programs:programs`)."""

from __future__ import annotations

import os
from typing import Any, Literal

import anyio
import pydantic

import imp


def _question(messages: Any) -> str:
    """The first input's value in the last user message (after its `[[ ## name ## ]]` line)."""
    return str(messages[-1]["content"]).split("]]", 1)[-1].strip().split("\n\n", 1)[0].strip()


def _count(messages: Any, options: Any) -> dict[str, Any]:
    return {"answer": str(len(_question(messages).split()))}


count_words = imp.predict(
    imp.signature("question -> answer: int", "Count the words of the question."), lm=imp.StaticLM(_count)
)


@imp.tool
def lookup(city: str) -> str:
    """Today's weather in a city."""
    return f"sunny in {city}"


@imp.tool
async def slow_lookup(city: str) -> str:
    """The weather in a city, from a slow service."""
    marker = anyio.Path(os.environ.get("IMP_TEST_MARKER", os.devnull))
    await marker.write_text("started")
    try:
        await anyio.sleep(60)
    except anyio.get_cancelled_exc_class():
        with anyio.CancelScope(shield=True):
            await marker.write_text("cancelled")
        raise
    return "rain"


def _weather(messages: Any, options: Any) -> dict[str, Any]:
    results = [m for m in messages if m["role"] == "tool"]
    if results:
        return {"report": f"Report: {results[-1]['content']}", "tool_calls": []}
    city = _question(messages)
    tool = "slow_lookup" if city == "Slowtown" else "lookup"
    return {"tool_calls": [{"name": tool, "arguments": {"city": city}}]}


weather = imp.react("city -> report", [lookup, slow_lookup], lm=imp.StaticLM(_weather))


class Forecast(pydantic.BaseModel):
    city: str
    high: int
    tags: list[str]


def _forecast(messages: Any, options: Any) -> dict[str, Any]:
    return {"forecast": {"city": "Oslo", "high": 7, "tags": ["windy"]}, "confidence": "0.5"}


class Outlook(imp.Signature):
    """Forecast the weather."""

    city: str = imp.InputField(desc="where", min_length=1)
    days: int = imp.InputField(ge=1, le=14)
    units: Literal["metric", "imperial"] = imp.InputField(default="metric")
    forecast: Forecast = imp.OutputField()
    confidence: float = imp.OutputField()


forecast = imp.predict(Outlook, lm=imp.StaticLM(_forecast))


def _broken(messages: Any, options: Any) -> Any:
    raise imp.RateLimited("slow down", status=429)


broken = imp.predict("question -> answer", lm=imp.StaticLM(_broken))

programs = {"count_words": count_words, "weather": weather, "forecast": forecast, "broken": broken}
