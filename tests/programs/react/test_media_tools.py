"""A tool's result holding media reaches the model as media: an image a Python tool returns, an MCP
tool's screenshot, in `react` and in `react_trajectory`, on each client's wire."""

from __future__ import annotations

import base64
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp import types

import imp
from imp.history import ToolResult
from imp.mcp._render import render_result
from imp.mcp._sdk import wire
from imp.records import MediaPart, content_text

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "models"))

from fake_provider import FakeProvider, Reply
from lm_constants import FAST_RETRIES, SECRET

PNG = b"\x89PNG\r\n\x1a\n" + bytes(200)
CHART = imp.Image.from_bytes(PNG)


@imp.tool
def chart(city: str) -> imp.Image:
    """Draw the week's temperatures for a city."""
    return CHART


@imp.tool
def two_charts(city: str) -> list[imp.Image]:
    """Draw this week and last week."""
    return [CHART, imp.Image.from_bytes(PNG + b"last")]


SIG = imp.signature("city -> summary")


def _media_of(message: Any) -> list[MediaPart]:
    content = message.get("content")
    return [p for p in content if isinstance(p, MediaPart)] if isinstance(content, list) else []


def test_a_tools_image_is_a_part_of_its_tool_message() -> None:
    lm = imp.ScriptedLM(
        [
            {"tool_calls": [{"name": "chart", "arguments": {"city": "Lisbon"}}]},
            "Warm.",
        ]
    )
    prediction = imp.call_sync(imp.react(SIG, [chart], lm=lm), city="Lisbon")
    assert prediction.summary == "Warm."
    tool_messages = [m for m in lm.requests[1].messages if m["role"] == "tool"]
    (part,) = _media_of(tool_messages[0])
    assert part.media == CHART and part.origin == "the result of `chart`"
    # The turn's history keeps the value itself; its text form is the description.
    step = prediction.metadata.history[0]
    assert step.results[0].result == CHART
    assert imp.format_tool_result(step.results[0]) == str(CHART)


def test_a_list_of_images_and_an_mcp_result_are_parts_too() -> None:
    pixel = base64.b64encode(PNG).decode()
    mcp_result = render_result(
        wire(
            types.CallToolResult(
                content=[
                    types.TextContent(type="text", text="The screen:"),
                    types.ImageContent(type="image", data=pixel, mimeType="image/png"),
                    types.TextContent(type="text", text="done"),
                ]
            )
        )
    )

    @imp.tool
    def screenshot() -> Any:
        """Take a screenshot."""
        return mcp_result

    lm = imp.ScriptedLM(
        [
            {
                "tool_calls": [
                    {"name": "two_charts", "arguments": {"city": "Oslo"}},
                    {"name": "screenshot", "arguments": {}},
                ]
            },
            "Cold.",
        ]
    )
    imp.call_sync(imp.react(SIG, [two_charts, screenshot], lm=lm), city="Oslo")
    first, second = [m for m in lm.requests[1].messages if m["role"] == "tool"]
    assert [p.media for p in _media_of(first)] == [CHART, imp.Image.from_bytes(PNG + b"last")]
    assert [p.media for p in _media_of(second)] == [CHART]  # the same bytes, read from the MCP block
    assert content_text(second["content"]) == f"The screen:\n{CHART}\ndone"
    assert mcp_result.text == "The screen:\n[image 1: image/png, 208 bytes]\ndone"


def test_react_trajectory_keeps_a_media_observation_as_media() -> None:
    lm = imp.ScriptedLM(
        [
            {"next_thought": "Draw it.", "next_tool_name": "chart", "next_tool_args": {"city": "Rome"}},
            {"next_thought": "Done.", "next_tool_name": "finish", "next_tool_args": {}},
            {"reasoning": "It was drawn.", "summary": "Hot."},
        ]
    )
    prediction = imp.call_sync(imp.react_trajectory(SIG, [chart], lm=lm), city="Rome")
    assert prediction.summary == "Hot."
    parts = [p for m in lm.requests[1].messages for p in _media_of(m)]
    assert [p.media for p in parts] == [CHART] and parts[0].origin == "the input `observation_0`"


def _official(cls: type[Any], model: str, fake: FakeProvider) -> Any:
    own = type(f"Official{cls.__name__}", (cls,), {"default_base_url": fake.base_url})
    return own(model, api_key=SECRET, retry_policy=FAST_RETRIES)


def _chat(tool_calls: list[dict[str, Any]] | None = None, text: str | None = None) -> Reply:
    message: dict[str, Any] = {"role": "assistant", "content": text}
    if tool_calls:
        message["tool_calls"] = [
            {"id": f"call_{i}", "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for i, c in enumerate(tool_calls)
        ]
    return Reply(
        json={"choices": [{"index": 0, "finish_reason": "tool_calls" if tool_calls else "stop", "message": message}]}
    )


@pytest.fixture
def fake() -> Any:
    server = FakeProvider().start()
    try:
        yield server
    finally:
        server.stop()


async def test_on_chat_completions_the_tools_media_follow_the_tool_messages(fake: FakeProvider) -> None:
    from imp.models.openai import OpenAILM

    fake.add(
        _chat(
            [
                {"name": "chart", "arguments": '{"city": "Lisbon"}'},
                {"name": "two_charts", "arguments": '{"city": "Lisbon"}'},
            ]
        ),
        _chat(text="Warm."),
    )
    prediction = await imp.call(
        imp.react(SIG, [chart, two_charts], lm=_official(OpenAILM, "gpt-4o", fake)), city="Lisbon"
    )
    assert prediction.summary == "Warm."
    messages = fake.requests[1].json["messages"]
    roles = [m["role"] for m in messages]
    assert roles[-4:] == ["assistant", "tool", "tool", "user"]  # the tool messages follow their calls
    carried = messages[-1]["content"]
    images = [p for p in carried if p["type"] == "image_url"]
    assert len(images) == 3 and images[0]["image_url"]["url"] == CHART.data_uri()
    labels = [p["text"] for p in carried if p["type"] == "text"]
    assert labels[0] == f"{CHART} from tool call call_0:" and labels[1].endswith("from tool call call_1:")
    assert all(isinstance(m["content"], str) for m in messages if m["role"] == "tool")


async def test_on_anthropic_the_media_are_blocks_of_the_tool_result(fake: FakeProvider) -> None:
    from imp.models.anthropic import AnthropicLM

    def message(blocks: list[dict[str, Any]]) -> Reply:
        return Reply(json={"id": "m", "type": "message", "role": "assistant", "content": blocks, "stop_reason": "tool_use",
                           "model": "claude", "usage": {"input_tokens": 1, "output_tokens": 1}})  # fmt: skip

    fake.add(
        message([{"type": "tool_use", "id": "toolu_1", "name": "chart", "input": {"city": "Lisbon"}}]),
        message([{"type": "text", "text": "Warm."}]),
    )
    lm = _official(AnthropicLM, "claude-sonnet-4-5", fake)
    await imp.call(imp.react(SIG, [chart], lm=lm, config={"prompt_cache": "off"}), city="Lisbon")
    result = fake.requests[1].json["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_1"
    assert result["content"] == [
        {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": CHART.base64()}}
    ]


async def test_on_the_responses_api_the_media_are_the_outputs_parts(fake: FakeProvider) -> None:
    from fake_provider import function_call_item, message_item, responses_body, responses_reply

    from imp.models.openai_responses import OpenAIResponsesLM

    fake.add(
        responses_reply(responses_body(function_call_item("chart", {"city": "Lisbon"}, call_id="call_a"))),
        responses_reply(responses_body(message_item("Warm."))),
    )
    await imp.call(imp.react(SIG, [chart], lm=_official(OpenAIResponsesLM, "gpt-4o", fake)), city="Lisbon")
    output = next(i for i in fake.requests[1].json["input"] if i.get("type") == "function_call_output")
    assert output == {
        "type": "function_call_output",
        "call_id": "call_a",
        "output": [{"type": "input_image", "image_url": CHART.data_uri(), "detail": "auto"}],
    }


def test_format_tool_result_is_text_for_media_results() -> None:
    record = ToolResult("c1", "two_charts", [CHART, CHART])
    assert imp.format_tool_result(record) == f"{CHART}\n{CHART}"
