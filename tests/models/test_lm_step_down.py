"""Step-down: a server that refuses a request option gets less of it once, remembered for that LM."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply
from lm_constants import FAST_RETRIES

import imp
from imp.models import lm
from imp.models._http import HTTPLM

HI = [{"role": "user", "content": "hi"}]
REFUSALS = Path(__file__).parent / "fixtures" / "refusals"
SCHEMA = {"type": "json_schema", "json_schema": {"name": "outputs", "schema": {"type": "object"}, "strict": True}}
TOOLS = [
    {"name": "lookup", "description": "find", "parameters": {"type": "object", "properties": {}}},
    {"name": "submit", "description": "answer", "parameters": {"type": "object", "properties": {}}},
]


def _refusal(name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REFUSALS / name).read_text())
    return data


def _refused(name: str) -> Reply:
    data = _refusal(name)
    return Reply(data["status"], json=data["body"])


def _ok(text: str = '{"answer": "Paris"}', finish: str = "stop") -> Reply:
    return Reply(200, json={"choices": [{"message": {"role": "assistant", "content": text}, "finish_reason": finish}]})


def _steps(caplog: pytest.LogCaptureFixture) -> list[dict[str, Any]]:
    return [r.msg for r in caplog.records if isinstance(r.msg, dict) and r.msg.get("event") == "lm_step_down"]


@pytest.fixture
def logs(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.WARNING, logger="imp")
    return caplog


@pytest.fixture
async def client(fake: FakeProvider) -> Any:
    async with lm("openai:local", base_url=fake.base_url, retry_policy=FAST_RETRIES, timeout=5.0) as made:
        yield made


def test_every_refusal_fixture_is_an_unsupported_option() -> None:
    from imp.models.errors import classify_error

    names = sorted(p.name for p in REFUSALS.glob("*.json"))
    assert len(names) >= 8
    for name in names:
        data = _refusal(name)
        error = classify_error(data["status"], json.dumps(data["body"]).encode(), {}, provider="openai")
        assert isinstance(error, imp.UnsupportedOption), name
        assert error.option == data["option"] and not error.retryable, name


@pytest.mark.parametrize(
    "fixture",
    [
        "llama_cpp_python_json_schema_500.json",
        "llama_cpp_server_json_schema_500.json",
        "llama_cpp_server_schema_conversion_400.json",
        "tgi_json_schema_422.json",
    ],
)
async def test_json_schema_steps_down_to_json_object_once_and_is_remembered(
    fake: FakeProvider, client: HTTPLM, logs: pytest.LogCaptureFixture, fixture: str
) -> None:
    fake.add(_refused(fixture), _ok(), _ok())
    assert client.capabilities.response_format == "json_schema"
    first = await client.request(HI, response_format=SCHEMA)
    second = await client.request(HI, response_format=SCHEMA)
    assert first.text == second.text == '{"answer": "Paris"}'
    sent = [r.json.get("response_format") for r in fake.requests]
    assert sent == [SCHEMA, {"type": "json_object"}, {"type": "json_object"}]  # the 500 is not retried
    assert client.capabilities.response_format == "json_object"
    (line,) = _steps(logs)
    assert line["option"] == "response_format" and line["sent"] == "json_schema" and line["now"] == "json_object"
    assert line["model"] == "openai:local" and line["status"] == _refusal(fixture)["status"]


async def test_json_object_refused_too_steps_down_to_no_response_format(
    fake: FakeProvider, client: HTTPLM, logs: pytest.LogCaptureFixture
) -> None:
    fake.add(
        _refused("llama_cpp_python_json_schema_500.json"), _refused("lm_studio_json_object_400.json"), _ok(), _ok()
    )
    await client.request(HI, response_format=SCHEMA)
    await client.request(HI, response_format={"type": "json_object"})
    sent = [r.json.get("response_format") for r in fake.requests]
    assert sent == [SCHEMA, {"type": "json_object"}, None, None]
    assert client.capabilities.response_format == "none"
    assert [(s["sent"], s["now"]) for s in _steps(logs)] == [("json_schema", "json_object"), ("json_object", "none")]


async def test_a_json_object_refusal_goes_straight_to_none(fake: FakeProvider, client: HTTPLM) -> None:
    fake.add(_refused("lm_studio_json_object_400.json"), _ok())
    await client.request(HI, response_format={"type": "json_object"})
    assert [r.json.get("response_format") for r in fake.requests] == [{"type": "json_object"}, None]
    assert client.capabilities.response_format == "none"


async def test_other_lm_values_are_not_affected(fake: FakeProvider, client: HTTPLM) -> None:
    fake.add(_refused("llama_cpp_python_json_schema_500.json"), _ok(), _ok())
    await client.request(HI, response_format=SCHEMA)
    async with lm("openai:local", base_url=fake.base_url) as other:
        assert other.capabilities.response_format == "json_schema"
        await other.request(HI, response_format=SCHEMA)
    assert fake.requests[-1].json["response_format"] == SCHEMA


async def test_parallel_tool_calls_is_dropped(
    fake: FakeProvider, client: HTTPLM, logs: pytest.LogCaptureFixture
) -> None:
    fake.add(_refused("vllm_parallel_tool_calls_400.json"), _ok(), _ok())
    await client.request(HI, tools=TOOLS, parallel_tool_calls=False)
    await client.request(HI, tools=TOOLS, parallel_tool_calls=False)
    assert ["parallel_tool_calls" in r.json for r in fake.requests] == [True, False, False]
    assert [s["option"] for s in _steps(logs)] == ["parallel_tool_calls"]


@pytest.mark.parametrize("fixture", ["azure_stream_options_400.json", "ollama_stream_options_400.json"])
async def test_stream_options_is_dropped_from_streams(
    fake: FakeProvider, client: HTTPLM, logs: pytest.LogCaptureFixture, fixture: str
) -> None:
    body = 'data: {"choices":[{"index":0,"delta":{"content":"ok"},"finish_reason":"stop"}]}\n\ndata: [DONE]\n\n'
    stream = Reply(200, body=body, headers={"content-type": "text/event-stream"}, chunk_size=16)
    fake.add(_refused(fixture), stream, Reply(200, body=body, headers={"content-type": "text/event-stream"}))
    for _ in range(2):
        events = [event async for event in client.stream(HI)]
        assert events[-1].response is not None and events[-1].response.text == "ok"
    assert ["stream_options" in r.json for r in fake.requests] == [True, False, False]
    assert [s["option"] for s in _steps(logs)] == ["stream_options"]


@pytest.mark.parametrize("fixture", ["compatible_named_tool_choice_400.json", "openrouter_named_tool_choice_404.json"])
async def test_a_named_tool_choice_becomes_required_with_only_that_tool(
    fake: FakeProvider, client: HTTPLM, logs: pytest.LogCaptureFixture, fixture: str
) -> None:
    fake.add(_refused(fixture), _ok(), _ok())
    named = {"type": "function", "function": {"name": "submit"}}
    await client.request(HI, tools=TOOLS, tool_choice=named)
    await client.request(HI, tools=TOOLS, tool_choice="submit")
    first, second, third = (r.json for r in fake.requests)
    assert first["tool_choice"] == named and len(first["tools"]) == 2
    for body in (second, third):
        assert body["tool_choice"] == "required"
        assert [t["function"]["name"] for t in body["tools"]] == ["submit"]
    assert client.capabilities.named_tool_choice is False
    (line,) = _steps(logs)
    assert line["option"] == "tool_choice"


async def test_a_refused_required_choice_is_raised_without_a_retry(fake: FakeProvider, client: HTTPLM) -> None:
    fake.add(Reply(500, json={"error": {"message": "", "type": "internal_server_error"}}))
    with pytest.raises(imp.ToolChoiceUnsupported):
        await client.request(HI, tools=TOOLS, tool_choice="required")
    assert len(fake.requests) == 1
    assert client.capabilities.named_tool_choice is True


async def test_a_refusal_of_an_option_not_sent_is_raised(fake: FakeProvider, client: HTTPLM) -> None:
    fake.add(_refused("llama_cpp_python_json_schema_500.json"))
    with pytest.raises(imp.UnsupportedOption) as info:
        await client.request(HI)
    assert info.value.option == "response_format" and len(fake.requests) == 1


async def test_anthropic_does_not_step_down(fake: FakeProvider, anthropic_lm: HTTPLM) -> None:
    refusal = {
        "type": "error",
        "error": {
            "type": "invalid_request_error",
            "message": "Thinking may not be enabled when tool_choice forces tool use.",
        },
    }
    fake.add(Reply(400, json=refusal))
    with pytest.raises(imp.ToolChoiceUnsupported):
        await anthropic_lm.request(HI, tools=TOOLS, tool_choice="submit")
    assert len(fake.requests) == 1 and anthropic_lm.capabilities.named_tool_choice


@pytest.mark.parametrize("adapter", [imp.ChatAdapter(), imp.JSONAdapter()])
async def test_predict_on_a_llama_cpp_python_server_ends_in_a_prediction(
    fake: FakeProvider, client: HTTPLM, adapter: imp.Adapter
) -> None:
    """The JSON adapter (or the Chat adapter's JSON fallback) asks for json_schema; the server's
    500 is stepped down from, never raised and never retried."""
    replies = [] if isinstance(adapter, imp.JSONAdapter) else [_ok("Paris, I think.")]
    fake.add(*replies, _refused("llama_cpp_python_json_schema_500.json"), _ok())
    program = imp.predict("question -> answer", lm=client, adapter=adapter)
    prediction = await imp.call(program, question="Capital of France?")
    assert prediction.answer == "Paris"
    formats = [r.json.get("response_format", {}).get("type") for r in fake.requests]
    assert formats[-2:] == ["json_schema", "json_object"]
    fake.add(*replies, _ok())
    again = await imp.call(program, question="Capital of France?")
    assert again.answer == "Paris"
    assert fake.requests[-1].json["response_format"] == {"type": "json_object"}


async def test_predict_on_a_server_that_takes_no_response_format_ends_in_a_parse_error(
    fake: FakeProvider, client: HTTPLM
) -> None:
    fake.add(_ok("Paris, I think."), _refused("llama_cpp_python_json_schema_500.json"))
    fake.add(_refused("lm_studio_json_object_400.json"), _ok("still no JSON"))
    with pytest.raises(imp.AdapterParseError):
        await imp.call(imp.predict("question -> answer", lm=client), question="Capital of France?")
    assert len(fake.requests) == 4 and "response_format" not in fake.requests[-1].json


@pytest.mark.parametrize("adapter", [imp.ChatAdapter(), imp.JSONAdapter(), imp.XMLAdapter()])
async def test_a_reply_cut_by_max_tokens_says_so_in_its_parse_error(
    fake: FakeProvider, client: HTTPLM, adapter: imp.Adapter
) -> None:
    fake.add(_ok('{"answer": "Par', finish="length"), _ok('{"answer": "Par', finish="length"))
    program = imp.predict("question -> answer: int", lm=client, adapter=adapter)
    with pytest.raises(imp.AdapterParseError) as info:
        await imp.call(program, question="How many?", config={"max_tokens": 5})
    assert info.value.finish_reason == "length"
    assert "cut off at the max_tokens limit" in str(info.value) and "finish_reason 'length'" in str(info.value)


async def test_a_whole_reply_that_does_not_parse_does_not_mention_a_cut(fake: FakeProvider, client: HTTPLM) -> None:
    fake.add(_ok("no idea"), _ok("no idea"))
    with pytest.raises(imp.AdapterParseError) as info:
        await imp.call(imp.predict("question -> answer: int", lm=client), question="How many?")
    assert info.value.finish_reason == "stop" and "max_tokens" not in str(info.value)


async def test_concurrent_calls_refused_together_step_down_once(
    fake: FakeProvider, client: HTTPLM, logs: pytest.LogCaptureFixture
) -> None:
    import anyio

    refusal = _refused("llama_cpp_python_json_schema_500.json")
    refusal.delay = 0.3  # every first request arrives before any refusal is answered
    fake.add(refusal, refusal, refusal, _ok(), _ok(), _ok())
    texts: list[str] = []

    async def one() -> None:
        texts.append((await client.request(HI, response_format=SCHEMA)).text)

    async with anyio.create_task_group() as group:
        for _ in range(3):
            group.start_soon(one)
    assert texts == ['{"answer": "Paris"}'] * 3 and len(fake.requests) == 6
    assert len(_steps(logs)) == 1 and client.capabilities.response_format == "json_object"


async def test_step_down_lines_carry_the_call_id(
    fake: FakeProvider, client: HTTPLM, logs: pytest.LogCaptureFixture
) -> None:
    from imp.runtime.run import run_scope

    fake.add(_refused("llama_cpp_python_json_schema_500.json"), _ok())
    with run_scope(on_event=lambda event: None) as run:
        await client.request(HI, response_format=SCHEMA)
    (line,) = _steps(logs)
    assert line["call_id"] == run.call_id


async def test_a_parse_error_after_the_step_down_tells_the_whole_story(fake: FakeProvider, client: HTTPLM) -> None:
    """Chat, then the JSON fallback asking json_schema (refused: llama-cpp-python's 500), then json_object:
    the error names both adapters, the refused format and what it was sent with, and both replies."""
    fake.add(_ok("Yes, the sky is blue."), _refused("llama_cpp_python_json_schema_500.json"), _ok("Certainly yes."))
    program = imp.predict("question -> answer: bool", lm=client)
    with pytest.raises(imp.AdapterParseError) as info:
        await imp.call(program, question="Is the sky blue?")
    message = str(info.value)
    assert [r.json.get("response_format", {}).get("type") for r in fake.requests] == [
        None,
        "json_schema",
        "json_object",
    ]
    assert info.value.adapters_tried == ("ChatAdapter", "JSONAdapter")
    assert message.startswith("ChatAdapter could not parse the reply: the reply has no output fields at all")
    assert "the model wrote 'Yes, the sky is blue.'" in message
    assert (
        "Asked again with the JSON fallback (response_format json_schema, which the server refused; "
        "sent again with response_format json_object), JSONAdapter could not parse that reply either" in message
    )
    assert message.endswith("the model wrote 'Certainly yes.'")


async def test_a_later_call_names_the_format_the_lm_remembered(fake: FakeProvider, client: HTTPLM) -> None:
    fake.add(_refused("llama_cpp_python_json_schema_500.json"), _ok())
    await client.request(HI, response_format=SCHEMA)  # the step-down, remembered by this LM value
    fake.add(_ok("Yes."), _ok("Yes again."))
    with pytest.raises(imp.AdapterParseError, match=r"JSON fallback \(response_format json_object\), JSONAdapter"):
        await imp.call(imp.predict("question -> answer: bool", lm=client), question="Is the sky blue?")
