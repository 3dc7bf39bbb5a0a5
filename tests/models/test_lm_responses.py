"""`openai-responses:` against recorded Responses API shapes: the request body, replies, usage, errors."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply, load_fixture, message_item, responses_body, responses_reply
from imp_backends import both_backends
from lm_constants import FAST_RETRIES, SECRET

import imp
from imp.errors import (
    AuthenticationError,
    BadRequest,
    ContentFiltered,
    ContextWindowExceeded,
    InvalidResponse,
    LMError,
    ProviderUnavailable,
    QuotaExceeded,
    RateLimited,
)
from imp.models import OpenAIResponsesLM, lm
from imp.records import ToolCall

HI = [{"role": "user", "content": "hi"}]


@pytest.fixture
async def responses_lm(fake: FakeProvider) -> AsyncIterator[OpenAIResponsesLM]:
    client = lm("openai-responses:gpt-5.4-mini", api_key=SECRET, base_url=fake.base_url, retry_policy=FAST_RETRIES)
    assert isinstance(client, OpenAIResponsesLM)
    async with client:
        yield client


def _parsed(items: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Items with their `arguments` JSON read (imp writes the arguments it parsed, spacing aside)."""
    return [{**i, "arguments": json.loads(i["arguments"])} if "arguments" in i else i for i in items]


def _recorded(fixture: str) -> list[dict[str, Any]]:
    return [i["request"]["body"] for i in load_fixture(fixture)["interactions"]]


# -- the request ------------------------------------------------------------------------------


async def test_the_factory_builds_it_with_the_openai_key_and_url(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    client = imp.lm("openai-responses:gpt-5.4-mini")
    assert isinstance(client, OpenAIResponsesLM)
    assert client.url == "https://api.openai.com/v1/responses"
    assert client.model_key == "openai-responses:gpt-5.4-mini"
    assert client.secrets == (SECRET,) and SECRET not in repr(client)
    assert "openai-responses" in imp.models.PROVIDERS
    assert client.dump() == {"model": "openai-responses:gpt-5.4-mini"}


async def test_messages_become_input_items(fake: FakeProvider, responses_lm: OpenAIResponsesLM) -> None:
    fake.add(responses_reply(responses_body(message_item("ok"))))
    call = ToolCall(id="call_1", name="look", arguments={"at": "box"})
    messages: list[Any] = [
        {"role": "system", "content": "Be brief."},
        {"role": "system", "content": "Use tools."},
        {"role": "user", "content": "what is in the box?"},
        {"role": "assistant", "content": "Let me look.", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a cat"},
        {"role": "system", "content": "Answer now."},
        {
            "role": "user",
            "content": [{"type": "text", "text": "and "}, {"type": "image_url", "image_url": {"url": "u"}}],
        },
    ]
    await responses_lm.request(messages)
    sent = fake.requests[-1].json
    assert fake.requests[-1].path == "/v1/responses"
    assert fake.requests[-1].headers["authorization"] == f"Bearer {SECRET}"
    assert sent["instructions"] == "Be brief.\n\nUse tools."
    assert sent["input"] == [
        {"role": "user", "content": "what is in the box?"},
        {"role": "assistant", "content": "Let me look."},
        {"type": "function_call", "call_id": "call_1", "name": "look", "arguments": '{"at": "box"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "a cat"},
        {"role": "developer", "content": "Answer now."},
        {
            "role": "user",
            "content": [{"type": "input_text", "text": "and "}, {"type": "input_image", "image_url": "u"}],
        },
    ]
    assert sent["store"] is False and sent["include"] == ["reasoning.encrypted_content"]
    assert "stream" not in sent and "messages" not in sent


async def test_tools_are_flat_and_every_tool_choice_form_is_spelled_for_this_api(
    fake: FakeProvider, responses_lm: OpenAIResponsesLM
) -> None:
    params = {"type": "object", "properties": {"city": {"type": "string"}}}
    nested = {"type": "function", "function": {"name": "weather", "description": "d", "parameters": params}}
    flat = {"name": "weather", "description": "d", "parameters": params, "strict": True}
    for choice, wire in [
        ("auto", "auto"),
        ("none", "none"),
        ("required", "required"),
        ("any", "required"),
        ("weather", {"type": "function", "name": "weather"}),
        ({"name": "weather"}, {"type": "function", "name": "weather"}),
        ({"type": "function", "function": {"name": "weather"}}, {"type": "function", "name": "weather"}),
    ]:
        fake.add(responses_reply(responses_body(message_item("ok"))))
        await responses_lm.request(HI, tools=[nested, flat], tool_choice=choice, parallel_tool_calls=False)
        sent = fake.requests[-1].json
        assert sent["tool_choice"] == wire
        assert sent["parallel_tool_calls"] is False
        assert sent["tools"] == [
            {"type": "function", "name": "weather", "description": "d", "parameters": params},
            {"type": "function", "name": "weather", "description": "d", "parameters": params, "strict": True},
        ]


async def test_options_map_to_this_apis_fields(fake: FakeProvider) -> None:
    async with lm("openai-responses:gpt-4.1", api_key=SECRET, base_url=fake.base_url, temperature=0.2) as client:
        fake.add(responses_reply(responses_body(message_item("ok"))))
        await client.request(HI, max_tokens=64, top_p=0.5, extra_body={"metadata": {"run": "1"}})
        sent = fake.requests[-1].json
        assert (sent["temperature"], sent["top_p"], sent["max_output_tokens"]) == (0.2, 0.5, 64)
        assert sent["metadata"] == {"run": "1"} and "max_tokens" not in sent
        assert "include" not in sent and "reasoning" not in sent  # not a reasoning model: nothing to keep
        fake.add(responses_reply(responses_body(message_item("ok"))))
        await client.request(HI, reasoning_effort="low", reasoning_summary="auto")
        sent = fake.requests[-1].json
        assert sent["reasoning"] == {"effort": "low", "summary": "auto"}
        assert sent["include"] == ["reasoning.encrypted_content"] and sent["store"] is False


async def test_response_format_becomes_text_format(fake: FakeProvider, responses_lm: OpenAIResponsesLM) -> None:
    (recorded,) = _recorded("openai_responses/structured_output.json")
    schema = recorded["text"]["format"]["schema"]
    chat_style = {"type": "json_schema", "json_schema": {"name": "outputs", "schema": schema, "strict": True}}
    fake.add_fixture("openai_responses/structured_output.json")
    response = await responses_lm.request(recorded["input"], response_format=chat_style)
    sent = fake.requests[-1].json
    assert sent["text"] == recorded["text"] == {"format": {**chat_style["json_schema"], "type": "json_schema"}}
    assert response.text == '{"answer":"Paris","confidence":0.98}'
    assert response.reasoning_data is not None and response.usage.reasoning_tokens == 12
    fake.add(responses_reply(responses_body(message_item("{}"))))
    await responses_lm.request(HI, response_format={"type": "json_object"})
    assert fake.requests[-1].json["text"] == {"format": {"type": "json_object"}}


def test_options_this_api_has_not_are_refused_before_sending() -> None:
    for option in ("stop", "seed"):
        with pytest.raises(ValueError, match=f"openai-responses does not take the option.*{option}"):
            lm("openai-responses:gpt-5.4-mini", api_key=SECRET, **{option: 1})
    with pytest.raises(ValueError, match="reasoning_summary must be one of auto, concise, detailed"):
        lm("openai-responses:gpt-5.4-mini", api_key=SECRET, reasoning_summary="long")
    with pytest.raises(TypeError, match="unknown request option"):
        lm("openai-responses:gpt-5.4-mini", api_key=SECRET, temprature=0)


async def test_a_reasoning_model_takes_no_sampling_options_while_it_reasons(fake: FakeProvider) -> None:
    for key in ("temperature", "top_p"):
        with pytest.raises(ValueError, match=f"gpt-5.4-mini is a reasoning model and takes no {key}"):
            lm("openai-responses:gpt-5.4-mini", api_key=SECRET, **{key: 0.2})
        for model in ("o3", "o4-mini", "gpt-5"):
            with pytest.raises(ValueError, match="reasoning model"):
                lm(f"openai-responses:{model}", api_key=SECRET, **{key: 0.0})
    async with lm("openai-responses:gpt-5.4-mini", api_key=SECRET, base_url=fake.base_url) as client:
        with pytest.raises(ValueError, match="takes no temperature"):
            await client.request(HI, temperature=0.7)
        assert fake.requests == []  # refused before anything was sent
        fake.add(responses_reply(responses_body(message_item("ok"))))
        await client.request(HI, temperature=1.0, top_p=1)  # the default (an optimizer's sampling round)
        assert "temperature" not in fake.requests[-1].json and "top_p" not in fake.requests[-1].json
        fake.add(responses_reply(responses_body(message_item("ok"))))
        await client.request(HI, temperature=0.3, reasoning_effort="none")
        assert fake.requests[-1].json["temperature"] == 0.3
    chat = lm("openai-responses:gpt-5-chat-latest", api_key=SECRET, temperature=0.3)
    assert not chat.reasons  # type: ignore[attr-defined]


# -- replies ------------------------------------------------------------------------------


@both_backends
async def test_recorded_tool_call_then_text(fake: FakeProvider) -> None:
    first_req, second_req = _recorded("openai_responses/tool_call_then_text.json")
    fake.add_fixture("openai_responses/tool_call_then_text.json")
    async with lm("openai-responses:gpt-4o", api_key=SECRET, base_url=fake.base_url) as client:
        tools = first_req["tools"]
        first = await client.request(first_req["input"], tools=tools, tool_choice="auto")
        (call,) = first.tool_calls
        assert (call.id, call.name, dict(call.arguments)) == (
            "call_61cRAI5gleGxCN89umufHn2a",
            "get_capital",
            {"country": "PotatoLand"},
        )
        assert first.finish_reason == "tool_calls" and first.text == ""
        assert first.reasoning_data is None  # no reasoning: nothing to replay but the call
        assert (first.usage.input_tokens, first.usage.output_tokens, first.usage.requests) == (256, 18, 1)
        assert first.model == "gpt-4o-2024-08-06" and first.request_id == "req_1"
        history: list[Any] = [
            *first_req["input"],
            {"role": "assistant", "content": "", "tool_calls": list(first.tool_calls)},
            {"role": "tool", "tool_call_id": call.id, "content": "Potato City"},
        ]
        second = await client.request(history, tools=tools, tool_choice="auto")
        sent = fake.requests[-1].json
        recorded = [i for i in second_req["input"] if i.get("content") != ""]  # imp leaves out an empty text
        assert _parsed(sent["input"]) == _parsed(recorded)
        assert [t["name"] for t in sent["tools"]] == ["get_capital"] and sent["tools"][0]["strict"] is True
        assert second.text == "The capital of PotatoLand is Potato City." and second.finish_reason == "stop"


async def test_reasoning_items_are_kept_and_sent_back_before_their_call(
    fake: FakeProvider, responses_lm: OpenAIResponsesLM
) -> None:
    first_req, second_req = _recorded("openai_responses/reasoning_tool_call_then_text.json")
    fake.add_fixture("openai_responses/reasoning_tool_call_then_text.json")
    messages = [{"role": "system", "content": first_req["instructions"]}, *first_req["input"]]
    options = {
        "tools": first_req["tools"],
        "tool_choice": "auto",
        "reasoning_effort": "medium",
        "reasoning_summary": "auto",
    }
    first = await responses_lm.request(messages, **options)
    assert fake.requests[0].json == first_req
    assert first.reasoning == "**Checking the weather**\n\nThe user wants Paris; I will call get_weather."
    output = load_fixture("openai_responses/reasoning_tool_call_then_text.json")["interactions"][0]["response"]["json"][
        "output"
    ]
    assert first.reasoning_data == [
        output[0],
        {"type": "function_call", "call_id": output[1]["call_id"], "id": output[1]["id"]},
    ]
    assert first.usage.reasoning_tokens == 64 and first.finish_reason == "tool_calls"
    (call,) = first.tool_calls
    follow = [
        *messages,
        {"role": "assistant", "content": "", "tool_calls": [call], "reasoning_data": first.reasoning_data},
        {"role": "tool", "tool_call_id": call.id, "content": "18 C and sunny"},
    ]
    second = await responses_lm.request(follow, **options)
    sent = fake.requests[1].json
    assert {**sent, "input": _parsed(sent["input"])} == {**second_req, "input": _parsed(second_req["input"])}
    # the reasoning item verbatim, then its call with the call's own item id
    assert second.text == "It is 18 C and sunny in Paris."
    assert (second.usage.cached_tokens, second.usage.reasoning_tokens) == (128, 16)


async def test_reasoning_from_other_providers_is_not_sent(fake: FakeProvider, responses_lm: OpenAIResponsesLM) -> None:
    call = ToolCall(id="c1", name="look", arguments={})
    for data in (
        {"reasoning_content": "deepseek thinks"},
        [{"type": "thinking", "thinking": "claude thinks", "signature": "s"}],
        None,
    ):
        fake.add(responses_reply(responses_body(message_item("ok"))))
        assistant = {"role": "assistant", "content": None, "tool_calls": [call], "reasoning_data": data}
        await responses_lm.request([*HI, assistant, {"role": "tool", "tool_call_id": "c1", "content": "x"}])
        assert [i.get("type", i.get("role")) for i in fake.requests[-1].json["input"]] == [
            "user",
            "function_call",
            "function_call_output",
        ]


async def test_a_reasoning_item_whose_following_item_was_left_out_is_not_sent(
    fake: FakeProvider, responses_lm: OpenAIResponsesLM
) -> None:
    data = [{"type": "reasoning", "id": "rs_1", "summary": []}, {"type": "message", "id": "msg_1"}]
    fake.add(responses_reply(responses_body(message_item("ok"))))
    await responses_lm.request([*HI, {"role": "assistant", "content": "", "reasoning_data": data}, *HI])
    assert fake.requests[-1].json["input"] == [*HI, *HI]  # OpenAI refuses a reasoning item alone
    fake.add(responses_reply(responses_body(message_item("ok"))))
    await responses_lm.request([*HI, {"role": "assistant", "content": "Sure.", "reasoning_data": data}])
    assert fake.requests[-1].json["input"][1:] == [
        {"type": "reasoning", "id": "rs_1", "summary": []},
        {
            "type": "message",
            "id": "msg_1",
            "role": "assistant",
            "status": "completed",
            "content": [{"type": "output_text", "text": "Sure.", "annotations": []}],
        },
    ]


async def test_a_cut_answer_is_length_and_a_filtered_one_is_refused(
    fake: FakeProvider, responses_lm: OpenAIResponsesLM
) -> None:
    fake.add_fixture("openai_responses/incomplete_max_output_tokens.json")
    cut = await responses_lm.request(HI, max_tokens=16)
    assert cut.finish_reason == "length" and cut.text == "Once upon a"
    assert fake.requests[-1].json["max_output_tokens"] == 16
    for fixture, words in [
        ("openai_responses/incomplete_content_filter.json", "content filter"),
        ("openai_responses/refusal.json", "I can't help with that"),
    ]:
        fake.add_fixture(fixture)
        with pytest.raises(ContentFiltered, match=words) as caught:
            await responses_lm.request(HI)
        assert caught.value.code == "content_filter" and caught.value.request_id == "req_1"


async def test_a_failed_response_in_a_200_is_an_error(fake: FakeProvider, responses_lm: OpenAIResponsesLM) -> None:
    failed = {**responses_body(), "status": "failed", "error": {"code": "server_error", "message": "boom"}}
    fake.add(Reply(json=failed), Reply(json=failed), Reply(json=failed))
    with pytest.raises(ProviderUnavailable, match="boom") as caught:
        await responses_lm.request(HI)
    assert caught.value.code == "server_error" and len(fake.requests) == 3  # retried like a 5xx
    fake.add(Reply(json={"id": "resp_x", "object": "response"}))
    with pytest.raises(InvalidResponse, match="not a Responses API response"):
        await responses_lm.request(HI)


ERRORS: list[tuple[str, type[LMError], str | None]] = [
    ("openai_responses/error_400_decimal_below_min_value.json", BadRequest, "decimal_below_min_value"),
    ("openai_responses/error_400_unsupported_parameter.json", BadRequest, "unsupported_parameter"),
    ("openai_responses/error_400_context_length_exceeded.json", ContextWindowExceeded, "context_length_exceeded"),
    ("openai_responses/error_400_reasoning_without_following_item.json", BadRequest, "invalid_request_error"),
    ("openai_responses/error_401_invalid_api_key.json", AuthenticationError, "invalid_api_key"),
    ("openai_responses/error_429_rate_limit_exceeded.json", RateLimited, "rate_limit_exceeded"),
    ("openai_responses/error_429_insufficient_quota.json", QuotaExceeded, "insufficient_quota"),
    ("openai_responses/error_500_server_error.json", ProviderUnavailable, "server_error"),
]


@pytest.mark.parametrize(("fixture", "kind", "code"), ERRORS)
async def test_error_bodies_are_classified_as_for_chat_completions(
    fake: FakeProvider, fixture: str, kind: type[LMError], code: str | None
) -> None:
    interaction = load_fixture(fixture)["interactions"][0]
    status = interaction["response"]["status"]
    body = interaction["response"]["json"]
    retried = kind in (RateLimited, ProviderUnavailable)
    for client_model in ("openai-responses:gpt-5.4-mini", "openai:gpt-5.4-mini"):
        fake.add_fixture(fixture)
        if retried:
            fake.add_fixture(fixture)
            fake.add_fixture(fixture)
        before = len(fake.requests)
        async with lm(client_model, api_key=SECRET, base_url=fake.base_url, retry_policy=FAST_RETRIES) as client:
            with pytest.raises(LMError) as caught:
                await client.request(HI)
        error = caught.value
        assert type(error) is kind, client_model
        assert (error.status, error.code, error.body) == (status, code, body)
        assert error.message.startswith(body["error"]["message"][:30])
        assert len(fake.requests) - before == (3 if retried else 1)
        assert SECRET not in str(error) and SECRET not in repr(error)
        assert fake.pending == 0


async def test_the_retry_hint_of_a_rate_limit_is_read(fake: FakeProvider, responses_lm: OpenAIResponsesLM) -> None:
    fake.add_fixture("openai_responses/error_429_rate_limit_exceeded.json")
    with pytest.raises(RateLimited) as caught:
        await responses_lm.request(HI, max_retries=0)
    assert caught.value.retry_after == pytest.approx(0.12)


async def test_refused_options_step_down_as_for_chat_completions(fake: FakeProvider) -> None:
    schema = {"type": "json_schema", "json_schema": {"name": "outputs", "schema": {"type": "object"}, "strict": True}}

    def refusal(message: str, param: str) -> Reply:
        error = {"message": message, "type": "invalid_request_error", "param": param, "code": "invalid_value"}
        return Reply(400, json={"error": error})

    ok = responses_reply(responses_body(message_item("{}")))
    async with lm("openai-responses:my-model", api_key=SECRET, base_url=fake.base_url) as client:
        fake.add(refusal("Invalid value for 'text.format.type': 'json_schema' is not supported.", "text.format"), ok)
        await client.request(HI, response_format=schema)
        assert [r.json.get("text") for r in fake.requests] == [
            {"format": {"type": "json_schema", "name": "outputs", "schema": {"type": "object"}, "strict": True}},
            {"format": {"type": "json_object"}},
        ]
        assert client.capabilities.response_format == "json_object"
        tools = [{"name": "a", "parameters": {"type": "object"}}, {"name": "b", "parameters": {"type": "object"}}]
        fake.add(refusal("Invalid tool_choice: only 'auto', 'none' and 'required' are supported.", "tool_choice"), ok)
        await client.request(HI, tools=tools, tool_choice="b")
        assert fake.requests[-2].json["tool_choice"] == {"type": "function", "name": "b"}
        assert fake.requests[-1].json["tool_choice"] == "required"
        assert [t["name"] for t in fake.requests[-1].json["tools"]] == ["b"]
        assert client.capabilities.named_tool_choice is False
        fake.add(refusal("Unknown parameter: 'parallel_tool_calls'.", "parallel_tool_calls"), ok)
        await client.request(HI, tools=tools, parallel_tool_calls=False)
        assert "parallel_tool_calls" in fake.requests[-2].json and "parallel_tool_calls" not in fake.requests[-1].json
