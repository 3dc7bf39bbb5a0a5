"""Every Anthropic fixture, replayed through a real HTTP server, read by the Anthropic client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_provider import FakeProvider
from test_lm_prompt_cache import _unmarked, assert_reuses

from imp.errors import LMError
from imp.models._http import HTTPLM
from imp.models.base import LMResponse, Message


def _assistant_message(response: LMResponse) -> Message:
    """What a program appends to its history after a reply (OpenAI-shaped, as imp keeps it)."""
    return {
        "role": "assistant",
        "content": response.text or None,
        "tool_calls": [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(dict(c.arguments))}}
            for c in response.tool_calls
        ],
        "reasoning_data": response.reasoning_data,
    }


def _without_false_is_error(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for message in messages:
        blocks = [{k: v for k, v in b.items() if not (k == "is_error" and v is False)} for b in message["content"]]
        out.append({**message, "content": blocks})
    return out


async def _round_trip(fake: FakeProvider, client: HTTPLM, fixture: str) -> list[LMResponse]:
    """Replay a conversation: each later request must be exactly what imp sends from its history."""
    interactions = fake.add_fixture(fixture)
    first = interactions[0]["request"]["body"]
    history: list[Message] = []
    if first.get("system"):
        history.append({"role": "system", "content": first["system"]})
    history.append({"role": "user", "content": first["messages"][0]["content"][0]["text"]})
    tool_choice = {"auto": "auto", "any": "required", "none": "none", "tool": first.get("tool_choice", {}).get("name")}[
        first.get("tool_choice", {"type": "auto"})["type"]
    ]
    options: dict[str, Any] = {"tools": first.get("tools", []), "tool_choice": tool_choice}
    if "thinking" in first:
        options["extra_body"] = {"thinking": first["thinking"]}
    responses = []
    for number, interaction in enumerate(interactions):
        recorded = interaction["request"]["body"]
        response = await client.request(history, **options)
        marked = fake.requests[number].json
        if number:  # the recorded conversation's next request reads the previous one's cache entry
            assert_reuses(fake.requests[number - 1].json, marked)
        sent = _unmarked(marked)  # the recordings were made without breakpoints
        assert sent["messages"] == _without_false_is_error(recorded["messages"])
        system = sent.get("system")  # a marked system text is sent as one text block
        assert system == recorded.get("system") or system == [{"type": "text", "text": recorded["system"]}]
        assert sent["tool_choice"] == recorded["tool_choice"]
        assert sent["tools"] == recorded["tools"]
        assert sent["max_tokens"] == recorded["max_tokens"]
        assert fake.requests[number].headers["anthropic-version"] == "2023-06-01"
        responses.append(response)
        if number + 1 < len(interactions):
            history.append(_assistant_message(response))
            results = [
                b
                for b in interactions[number + 1]["request"]["body"]["messages"][-1]["content"]
                if b["type"] == "tool_result"
            ]
            for result in results:
                history.append({"role": "tool", "tool_call_id": result["tool_use_id"], "content": result["content"]})
    return responses


async def test_parallel_tool_use_round_trip(fake: FakeProvider, anthropic_lm: HTTPLM) -> None:
    first, second = await _round_trip(fake, anthropic_lm, "anthropic/parallel_tool_use.json")
    assert first.text.startswith("I'll help you find out who is the youngest")
    assert [dict(c.arguments)["name"] for c in first.tool_calls] == ["Alice", "Bob", "Charlie", "Daisy"]
    assert first.tool_calls[0].id == "toolu_0167cfEnoQaPviGdVXA95zcu"
    assert first.finish_reason == "tool_calls"
    assert (first.usage.input_tokens, first.usage.output_tokens) == (423, 202)
    assert first.model == "claude-haiku-4-5-20251001"
    assert "Daisy is the youngest" in second.text and second.finish_reason == "stop"


async def test_thinking_then_tool_use_replays_signed_thinking(fake: FakeProvider, anthropic_lm: HTTPLM) -> None:
    first, second = await _round_trip(fake, anthropic_lm, "anthropic/tool_use_with_thinking.json")
    assert first.reasoning and first.reasoning.startswith("The user is asking about the largest city")
    (block,) = first.reasoning_data
    assert block["type"] == "thinking" and block["signature"].startswith("EqEECkYICxgCKkAo3UA4")
    assert first.tool_calls[0].name == "get_user_country"
    assert "Mexico City" in second.text


@pytest.mark.parametrize(
    ("fixture", "calls"),
    [
        ("anthropic/tool_choice_auto.json", 1),
        ("anthropic/tool_choice_required.json", 1),
        ("anthropic/tool_choice_none.json", 0),
        ("anthropic/tool_choice_list_single.json", 1),
    ],
)
async def test_tool_choice_modes(fake: FakeProvider, anthropic_lm: HTTPLM, fixture: str, calls: int) -> None:
    responses = await _round_trip(fake, anthropic_lm, fixture)
    assert len(responses[0].tool_calls) == calls
    if calls:
        assert dict(responses[0].tool_calls[0].arguments) == {"city": "Paris"}
        assert responses[0].finish_reason == "tool_calls"
    else:
        assert responses[0].text.startswith("Hello!")


async def test_parallel_tool_calls_false_disables_parallel_use(fake: FakeProvider, anthropic_lm: HTTPLM) -> None:
    fake.add_fixture("anthropic/tool_choice_auto.json")
    tool = {
        "type": "function",
        "function": {"name": "get_weather", "description": "d", "parameters": {"type": "object"}},
    }
    await anthropic_lm.request(
        [{"role": "user", "content": "hi"}], tools=[tool], tool_choice="required", parallel_tool_calls=False
    )
    sent = fake.requests[0].json
    assert sent["tool_choice"] == {"type": "any", "disable_parallel_tool_use": True}
    assert sent["tools"] == [
        {
            "name": "get_weather",
            "description": "d",
            "input_schema": {"type": "object"},
            "cache_control": {"type": "ephemeral"},
        }
    ]


@pytest.mark.parametrize(
    ("fixture", "status", "code", "text"),
    [
        (
            "anthropic/error_400_invalid_request.json",
            400,
            "invalid_request_error",
            "This model does not support effort level 'xhigh'",
        ),
        ("anthropic/error_404_not_found.json", 404, "not_found_error", "model: claude-sonet-4-5"),
    ],
)
async def test_error_envelopes(
    fake: FakeProvider, anthropic_lm: HTTPLM, fixture: str, status: int, code: str, text: str
) -> None:
    fake.add_fixture(fixture)
    with pytest.raises(LMError) as info:
        await anthropic_lm.request([{"role": "user", "content": "hello"}], reasoning_effort="xhigh")
    error = info.value
    assert (error.status, error.code, error.provider) == (status, code, "anthropic")
    assert error.message.startswith(text)
    assert error.request_id and error.request_id.startswith("req_011")
    assert not error.retryable and not error.context_window_exceeded
    assert fake.requests[0].json["output_config"] == {"effort": "xhigh"}


async def test_stream_thinking(fake: FakeProvider, anthropic_lm: HTTPLM) -> None:
    fake.add_fixture("anthropic/stream_thinking.json", chunk_size=23)
    events = [
        e
        async for e in anthropic_lm.stream(
            [{"role": "user", "content": "hi"}], extra_body={"thinking": {"type": "enabled", "budget_tokens": 1024}}
        )
    ]
    response = events[-1].response
    assert events[-1].kind == "final" and response is not None
    assert [e.kind for e in events].count("final") == 1
    assert response.reasoning and response.text
    assert "".join(e.delta for e in events if e.kind == "reasoning") == response.reasoning
    assert "".join(e.delta for e in events if e.kind == "text") == response.text
    (block,) = response.reasoning_data
    assert block["type"] == "thinking" and block["signature"] and block["thinking"] == response.reasoning
    assert response.usage.input_tokens == 43 and response.usage.output_tokens == 282
    assert response.finish_reason == "stop" and response.model == "claude-sonnet-4-20250514"
    assert fake.requests[0].json["thinking"]["budget_tokens"] == 1024
    assert fake.requests[0].json["stream"] is True


async def test_names_left_out_and_system_lifted(fake: FakeProvider, anthropic_lm: HTTPLM) -> None:
    fake.add_fixture("anthropic/tool_choice_none.json")
    await anthropic_lm.request(
        [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Hello", "name": "alice"},
        ]
    )
    sent = fake.requests[0].json
    mark = {"cache_control": {"type": "ephemeral"}}  # the prompt-cache breakpoints, on by default
    assert sent["system"] == [{"type": "text", "text": "Be brief.", **mark}]
    assert sent["messages"] == [{"role": "user", "content": [{"type": "text", "text": "Hello", **mark}]}]
    assert "name" not in json.dumps(sent["messages"])


async def test_seed_is_refused_before_sending(fake: FakeProvider, anthropic_lm: HTTPLM) -> None:
    with pytest.raises(ValueError, match="seed"):
        await anthropic_lm.request([{"role": "user", "content": "hi"}], seed=1)
    with pytest.raises(ValueError, match="response_format"):
        await anthropic_lm.request([{"role": "user", "content": "hi"}], response_format={"type": "json_object"})
    assert fake.requests == []


async def test_json_schema_response_format_uses_output_format(fake: FakeProvider, anthropic_lm: HTTPLM) -> None:
    fake.add_fixture("anthropic/tool_choice_none.json")
    schema = {"type": "object", "properties": {"city": {"type": "string"}}}
    await anthropic_lm.request(
        [{"role": "user", "content": "hi"}],
        response_format={"type": "json_schema", "json_schema": {"name": "x", "schema": schema}},
    )
    sent = fake.requests[0]
    assert sent.json["output_format"] == {"type": "json_schema", "schema": schema}
    assert sent.headers["anthropic-beta"] == "structured-outputs-2025-11-13"
