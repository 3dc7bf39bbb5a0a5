"""Every OpenAI-compatible fixture, replayed through a real HTTP server, read by the OpenAI client."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fake_provider import FakeProvider
from lm_constants import SECRET

from imp.errors import LMError
from imp.models import lm
from imp.models._http import HTTPLM
from imp.models.base import LMResponse, StreamEvent


def _body(interaction: dict[str, Any]) -> dict[str, Any]:
    body: dict[str, Any] = interaction["request"]["body"]
    return body


async def _replay_request(fake: FakeProvider, client: HTTPLM, fixture: str) -> list[LMResponse]:
    """Send each recorded request's messages and options; check the wire body matches what matters."""
    out = []
    for interaction in fake.add_fixture(fixture):
        recorded = _body(interaction)
        options: dict[str, Any] = {}
        for key in ("tools", "tool_choice", "response_format", "temperature", "top_p"):
            if key in recorded:
                options[key] = recorded[key]
        response = await client.request(recorded["messages"], **options)
        sent = fake.requests[-1].json
        if "tools" in recorded:
            assert [t["function"] for t in sent["tools"]] == [t["function"] for t in recorded["tools"]]
        if "tool_choice" in recorded:
            expected = "required" if recorded["tool_choice"] == "any" else recorded["tool_choice"]
            assert sent["tool_choice"] == expected
        assert [m["role"] for m in sent["messages"]] == [m["role"] for m in recorded["messages"]]
        out.append(response)
    return out


async def _collect(client: HTTPLM, messages: list[dict[str, Any]], **options: Any) -> list[StreamEvent]:
    return [event async for event in client.stream(messages, **options)]


async def test_parallel_tool_calls_then_text(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    first, second = await _replay_request(fake, openai_lm, "openai/parallel_tool_calls.json")
    assert [(c.id, c.name, dict(c.arguments)) for c in first.tool_calls] == [
        ("call_jYdIdRZHxZTn5bWCq5jlMrJi", "delete_file", {"path": ".env"}),
        ("call_TmlTVWQbzrXCZ4jNsCVNbNqu", "create_file", {"path": "test.txt"}),
    ]
    assert first.finish_reason == "tool_calls"
    assert first.text == ""
    assert first.usage.input_tokens == 71 and first.usage.output_tokens == 46
    assert first.model == "gpt-4o-2024-08-06"
    assert first.request_id == "chatcmpl-C9f7f1SbHRzcwlJwrYKdSonTRWPvV"
    # The assistant tool-call message goes back with "content": "", never null.
    assistant = fake.requests[1].json["messages"][2]
    assert assistant["content"] == "" and len(assistant["tool_calls"]) == 2
    assert second.text.startswith("The file `.env` has been deleted")
    assert second.finish_reason == "stop" and second.tool_calls == ()


async def test_tool_calls_without_ids_get_step_ids(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    first, second = await _replay_request(fake, openai_lm, "openai/compatible_tool_calls_without_id.json")
    (call,) = first.tool_calls
    assert call.id == "call_1_0" and call.name == "get_current_time" and dict(call.arguments) == {}
    assert first.reasoning_data is not None and "thought_signature" in first.reasoning_data
    assert second.text == "The current time is Noon."


@pytest.mark.parametrize(
    ("fixture", "calls", "finish"),
    [
        ("openai/tool_choice_auto.json", 1, "tool_calls"),
        ("openai/tool_choice_required.json", 1, "tool_calls"),
        ("openai/tool_choice_none.json", 0, "stop"),
        ("openai/tool_choice_list_single.json", 1, "tool_calls"),
        ("mistral/tool_choice_auto.json", 1, "tool_calls"),
        ("mistral/tool_choice_required.json", 1, "tool_calls"),
        ("mistral/tool_choice_none.json", 0, "stop"),
        ("mistral/tool_choice_list_single.json", 1, "tool_calls"),
        ("groq/parallel_tool_calls.json", 2, "tool_calls"),
    ],
)
async def test_tool_choice_fixtures(
    fake: FakeProvider, openai_lm: HTTPLM, fixture: str, calls: int, finish: str
) -> None:
    responses = await _replay_request(fake, openai_lm, fixture)
    first = responses[0]
    assert len(first.tool_calls) == calls
    assert first.finish_reason == finish
    for call in first.tool_calls:
        assert call.id and call.name and dict(call.arguments)["city"] == "Paris"
    if calls == 0:
        assert first.text
    assert first.usage.input_tokens > 0 and first.usage.requests == 1


async def test_tool_choice_mapping_on_the_wire(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    for choice, wire in [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("get_weather", {"type": "function", "function": {"name": "get_weather"}}),
        ({"name": "get_weather"}, {"type": "function", "function": {"name": "get_weather"}}),
    ]:
        fake.add_fixture("llama_cpp/tool_choice_named.json")
        await openai_lm.request([{"role": "user", "content": "?"}], tools=tools, tool_choice=choice)
        assert fake.requests[-1].json["tool_choice"] == wire


async def test_mistral_cached_tokens(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    first, _ = await _replay_request(fake, openai_lm, "mistral/tool_choice_auto.json")
    assert first.usage.cached_tokens == 76
    assert len(first.tool_calls[0].id) == 9


async def test_deepseek_reasoning_beside_tool_calls(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    responses = await _replay_request(fake, openai_lm, "deepseek/reasoning_content_with_tool_calls.json")
    first = responses[0]
    assert first.reasoning and first.reasoning.startswith("The user wants to play a dice game")
    assert first.reasoning_data == {"reasoning_content": first.reasoning}
    assert first.text == "Let me load the dice rolling capability!"
    assert first.tool_calls[0].name == "load_capability"
    assert dict(first.tool_calls[0].arguments) == {"id": "DICE_ROLL"}
    assert [c.name for c in responses[1].tool_calls] == ["get_player_name", "roll_dice"]
    last = responses[2]
    assert last.usage.reasoning_tokens == 25 and last.finish_reason == "stop"


async def test_reasoning_data_goes_back_verbatim(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    fake.add_fixture("llama_cpp/plain.json")
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": {"a": 1}}}],
        "reasoning_data": {"reasoning_content": "thinking..."},
    }
    await openai_lm.request(
        [{"role": "user", "content": "go"}, message, {"role": "tool", "tool_call_id": "c1", "content": "ok"}]
    )
    sent = fake.requests[0].json["messages"][1]
    assert sent["reasoning_content"] == "thinking..."
    assert sent["content"] == ""
    assert sent["tool_calls"][0]["function"]["arguments"] == '{"a": 1}'
    assert "reasoning_data" not in sent


async def test_groq_reasoning_and_tool_use_failed(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    interactions = fake.add_fixture("groq/error_400_tool_use_failed.json")
    messages = _body(interactions[0])["messages"]
    with pytest.raises(LMError) as info:
        await openai_lm.request(messages)
    error = info.value
    assert error.status == 400 and error.code == "tool_use_failed"
    assert error.message.startswith("Tool call validation failed")
    assert not error.retryable and not error.context_window_exceeded
    assert "failed_generation" in error.body["error"]
    second = await openai_lm.request(_body(interactions[1])["messages"])
    assert second.reasoning and second.reasoning.startswith("We need to call")
    assert second.reasoning_data == {"reasoning": second.reasoning}
    assert dict(second.tool_calls[0].arguments) == {"name": "test"}
    assert len(fake.requests) == 2  # a 400 is never retried


async def test_ollama_json_schema(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    (response,) = await _replay_request(fake, openai_lm, "ollama/local_json_schema_output.json")
    assert response.text == '{ "city": "Paris", "country": "France" }'
    assert response.reasoning and response.reasoning.startswith("Okay, the user")
    assert fake.requests[0].json["response_format"]["type"] == "json_schema"


@pytest.mark.parametrize(
    ("fixture", "status", "code", "text"),
    [
        ("openai/error_400_unsupported_value.json", 400, "unsupported_value", "Unsupported value: 'messages[0].role'"),
        ("openai/error_404_model_not_found.json", 404, "model_not_found", "The model `gpt-5.2-proo` does not exist"),
    ],
)
async def test_openai_error_envelopes(
    fake: FakeProvider, openai_lm: HTTPLM, fixture: str, status: int, code: str, text: str
) -> None:
    fake.add_fixture(fixture)
    with pytest.raises(LMError) as info:
        await openai_lm.request([{"role": "user", "content": "hello"}])
    error = info.value
    assert (error.status, error.code, error.provider) == (status, code, "openai")
    assert error.message.startswith(text)
    assert not error.retryable and error.attempts == 1
    assert error.body["error"]["type"] == "invalid_request_error"


async def test_invalid_response_body_is_an_error(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    fake.add_fixture("openai/invalid_response_body.json")
    with pytest.raises(LMError, match="not a chat completion") as info:
        await openai_lm.request([{"role": "user", "content": "What is the capital of France?"}])
    assert info.value.status == 200 and not info.value.retryable


async def test_openrouter_429s_retried_then_raised(fake: FakeProvider) -> None:
    from lm_constants import FAST_RETRIES

    fake.add_fixture("openrouter/error_429_rate_limited.json")
    client = lm(
        "openrouter:google/gemini-2.0-flash-exp:free", api_key=SECRET, base_url=fake.base_url, retry_policy=FAST_RETRIES
    )
    async with client:
        with pytest.raises(LMError) as info:
            await client.request([{"role": "user", "content": "hi"}])
    error = info.value
    assert len(fake.requests) == 3 and error.attempts == 3
    assert error.status == 429 and error.retryable and not error.context_window_exceeded
    assert "temporarily rate-limited upstream" in error.message
    assert error.provider == "openrouter"


@pytest.mark.parametrize(
    ("fixture", "named"),
    [
        ("llama_cpp/tool_choice_auto.json", "auto"),
        ("llama_cpp/tool_choice_named.json", "named"),
        ("llama_cpp/after_tool_result_auto.json", "auto"),
    ],
)
async def test_llama_cpp_reads_tool_calls_not_function_call(
    fake: FakeProvider, openai_lm: HTTPLM, fixture: str, named: str
) -> None:
    fake.add_fixture(fixture)
    response = await openai_lm.request([{"role": "user", "content": "weather in Paris?"}])
    (call,) = response.tool_calls
    assert call.name == "get_weather"  # not the legacy function_call's "get_weather:"
    assert dict(call.arguments) == {"city": "Paris"}
    assert call.id.startswith("call__0_get_weather")
    assert response.finish_reason == "tool_calls"


# -- streams -------------------------------------------------------------------------------------


async def test_stream_parallel_tool_calls(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    interactions = fake.add_fixture("openai/stream_parallel_tool_calls.json")
    events = await _collect(
        openai_lm, _body(interactions[0])["messages"], tools=_body(interactions[0])["tools"], tool_choice="required"
    )
    final = events[-1]
    assert [e.kind for e in events].count("final") == 1 and final.kind == "final"
    response = final.response
    assert response is not None
    assert [(c.id, c.name) for c in response.tool_calls] == [
        ("call_q2UyBRP7eXNTzAoR8lEhjc9Z", "get_country"),
        ("call_b51ijcpFkDiTQG1bQzsrmtW5", "get_product_name"),
    ]
    assert response.usage.input_tokens == 364 and response.usage.output_tokens == 40
    assert response.finish_reason == "tool_calls"
    names = [e.tool_name for e in events if e.kind == "tool_call" and e.tool_name]
    assert names == [c.name for c in response.tool_calls]
    sent = fake.requests[0].json
    assert sent["stream"] is True and sent["stream_options"] == {"include_usage": True}
    # arguments streamed in pieces add up to the parsed arguments
    for index, call in enumerate(response.tool_calls):
        pieces = "".join(e.delta for e in events if e.kind == "tool_call" and e.index == index)
        assert json.loads(pieces) == dict(call.arguments)
    for interaction in interactions[1:]:
        events = await _collect(openai_lm, _body(interaction)["messages"])
        assert events[-1].response is not None and events[-1].response.usage.requests == 1


async def test_stream_tool_call_then_text(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    interactions = fake.add_fixture("openai/stream_tool_call_then_text.json", chunk_size=7)
    first = await _collect(openai_lm, _body(interactions[0])["messages"])
    assert first[-1].response is not None
    assert len(first[-1].response.tool_calls) == 1
    second = await _collect(openai_lm, _body(interactions[1])["messages"])
    response = second[-1].response
    assert response is not None and response.text
    assert "".join(e.delta for e in second if e.kind == "text") == response.text
    assert response.usage.input_tokens == 78 and response.finish_reason == "stop"


async def test_stream_llama_cpp_tool_call_names_not_concatenated(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    fake.add_fixture("llama_cpp/stream_tool_call.sse", chunk_size=11)
    events = await _collect(openai_lm, [{"role": "user", "content": "weather?"}])
    response = events[-1].response
    assert response is not None
    (call,) = response.tool_calls
    assert call.name == "get_weather"
    assert dict(call.arguments) == {"city": "Paris"} or "city" in call.arguments
    assert [e.tool_name for e in events if e.tool_name] == ["get_weather"]


async def test_stream_llama_cpp_text_length(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    fake.add_fixture("llama_cpp/stream_text.sse", chunk_size=5)
    events = await _collect(openai_lm, [{"role": "user", "content": "tell me"}])
    response = events[-1].response
    assert response is not None
    assert response.finish_reason == "length"  # reported, not hidden
    assert response.text == "".join(e.delta for e in events if e.kind == "text") and response.text


async def test_stream_deepseek_reasoning(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    fake.add_fixture("deepseek/stream_reasoning_content.json", chunk_size=64)
    events = await _collect(openai_lm, [{"role": "user", "content": "think"}])
    response = events[-1].response
    assert response is not None and response.reasoning
    assert "".join(e.delta for e in events if e.kind == "reasoning") == response.reasoning
    assert response.reasoning_data == {"reasoning_content": response.reasoning}
    assert response.usage.reasoning_tokens == 198 and response.usage.output_tokens == 212


async def test_stream_groq_error_event_mid_stream(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    interactions = fake.add_fixture("groq/stream_error_event_mid_stream.json")
    seen: list[StreamEvent] = []
    with pytest.raises(LMError) as info:
        async for event in openai_lm.stream(_body(interactions[0])["messages"]):
            seen.append(event)
    error = info.value
    assert error.code == "tool_use_failed" and error.status == 400 and not error.retryable
    assert all(e.kind != "final" for e in seen) and any(e.kind == "reasoning" for e in seen)
    for interaction in interactions[1:]:
        events = await _collect(openai_lm, _body(interaction)["messages"])
        assert events[-1].kind == "final"


async def test_stream_openrouter_error_chunk_after_length(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    fake.add_fixture("openrouter/stream_error_chunk_length.json", chunk_size=50)
    with pytest.raises(LMError) as info:
        await _collect(openai_lm, [{"role": "user", "content": "hi"}])
    assert info.value.message == "Token limit reached" and info.value.status == 400
    assert not info.value.retryable
