"""The live tier, client level: imp's OpenAI client against llama-cpp-python's server, on every live
model (SmolLM2-135M, an instruct model; Gemma 3 270M, a base model that mostly answers '')."""

from __future__ import annotations

import json
import logging

import pytest
from live_support import LiveModel

from imp.errors import LMError
from imp.models._http import HTTPLM

pytestmark = pytest.mark.live

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


async def test_plain_reply(live_lm: HTTPLM, live_model: LiveModel) -> None:
    response = await live_lm.request([{"role": "user", "content": "Say hello."}], max_tokens=16, temperature=0)
    assert response.usage.input_tokens > 0
    assert response.finish_reason in ("stop", "length")
    assert response.model == live_model.alias
    if live_model.instruct:
        assert response.text.strip() and response.usage.output_tokens > 0
    else:  # the base model's empty answer is a normal, well-formed response
        assert response.text == "" and response.usage.output_tokens == 0 and response.finish_reason == "stop"


async def test_a_reply_cut_by_max_tokens_says_length(live_lm: HTTPLM, live_model: LiveModel) -> None:
    # Both models write on and on when asked for a story (the base one under its llama-2 format).
    messages = [{"role": "user", "content": "Write a long story about a dragon, in many sentences."}]
    response = await live_lm.request(messages, max_tokens=4, temperature=0)
    if response.text:
        assert response.finish_reason == "length" and response.usage.output_tokens == 4
    else:
        assert not live_model.instruct and response.finish_reason == "stop"


async def test_named_tool_call(live_lm: HTTPLM) -> None:
    # A named tool_choice is grammar-constrained by the server, so even the base model calls it.
    response = await live_lm.request(ASK, tools=[WEATHER], tool_choice="get_weather", max_tokens=48, temperature=0)
    (call,) = response.tool_calls
    assert call.name == "get_weather" and call.id
    assert isinstance(dict(call.arguments), dict)
    assert response.finish_reason == "tool_calls"


async def test_stream_with_a_tool_call(live_lm: HTTPLM) -> None:
    events = [
        e async for e in live_lm.stream(ASK, tools=[WEATHER], tool_choice="get_weather", max_tokens=48, temperature=0)
    ]
    final = events[-1]
    assert final.kind == "final" and final.response is not None
    (call,) = final.response.tool_calls
    assert call.name == "get_weather"
    assert [e.tool_name for e in events if e.tool_name] == ["get_weather"]  # not concatenated per delta


async def test_stream_of_text(live_lm: HTTPLM, live_model: LiveModel) -> None:
    events = [e async for e in live_lm.stream([{"role": "user", "content": "Say hello."}], max_tokens=16)]
    final = events[-1]
    assert final.kind == "final" and final.response is not None
    assert [e.kind for e in events].count("final") == 1
    assert "".join(e.delta for e in events if e.kind == "text") == final.response.text
    assert final.response.finish_reason in ("stop", "length")
    assert bool(final.response.text.strip()) == live_model.instruct


async def test_context_overflow_is_classified(live_lm: HTTPLM) -> None:
    long = "word " * 5000
    with pytest.raises(LMError) as info:
        await live_lm.request([{"role": "user", "content": long}], max_tokens=8)
    assert info.value.context_window_exceeded and not info.value.retryable
    assert info.value.attempts == 1


async def test_required_tool_choice(live_lm: HTTPLM, live_model: LiveModel) -> None:
    if live_model.required_tool_choice == "refused":
        with pytest.raises(LMError) as info:
            await live_lm.request(ASK, tools=[WEATHER], tool_choice="required", max_tokens=32)
        assert info.value.tool_choice_unsupported and not info.value.retryable
        assert info.value.attempts == 1
    else:  # the server drops the option for this prompt format and answers as if it were "auto"
        response = await live_lm.request(ASK, tools=[WEATHER], tool_choice="required", max_tokens=32)
        assert not response.tool_calls and response.finish_reason == "stop"


SCHEMA = {
    "type": "json_schema",
    "json_schema": {
        "name": "outputs",
        "schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        "strict": True,
    },
}


async def test_a_refused_json_schema_steps_down_once(live_lm: HTTPLM, caplog: pytest.LogCaptureFixture) -> None:
    # llama-cpp-python takes only `text` and `json_object`, and refuses `json_schema` with a 500
    # that is a request-validation error: stepped down from, never retried as transient.
    caplog.set_level(logging.INFO, logger="imp")
    messages = [{"role": "user", "content": 'Answer in JSON like {"city": "..."}: the capital of France?'}]
    for _ in range(2):
        response = await live_lm.request(messages, response_format=SCHEMA, max_tokens=32, temperature=0)
        assert response.finish_reason in ("stop", "length")
        if response.finish_reason == "stop":
            assert isinstance(json.loads(response.text), dict)  # json_object is grammar-constrained
    assert live_lm.capabilities.response_format == "json_object"
    lines = [r.msg for r in caplog.records if isinstance(r.msg, dict)]
    assert [line["event"] for line in lines if line.get("event") in ("lm_step_down", "lm_retry")] == ["lm_step_down"]
    (step,) = [line for line in lines if line["event"] == "lm_step_down"]
    assert step["option"] == "response_format" and step["sent"] == "json_schema" and step["now"] == "json_object"
    assert step["status"] == 500 and "json_object" in step["error"]
