"""What goes on the wire: the factory, option checks, message names, tool call messages, passthrough."""

from __future__ import annotations

import pytest
from fake_provider import FakeProvider, fixture_replies
from lm_constants import SECRET

from imp.models import AnthropicLM, OpenAILM, OpenRouterLM, lm
from imp.models._http import HTTPLM
from imp.models.base import LMCapabilities

HI = [{"role": "user", "content": "hi"}]


def test_factory_picks_the_provider() -> None:
    assert isinstance(lm("openai:gpt-5.4-mini", api_key="k"), OpenAILM)
    assert isinstance(lm("openrouter:meta/llama", api_key="k"), OpenRouterLM)
    anthropic = lm("anthropic:claude-sonnet-4-6", api_key="k")
    assert isinstance(anthropic, AnthropicLM) and anthropic.model == "claude-sonnet-4-6"
    local = lm("openai:qwen3", base_url="http://127.0.0.1:8000/v1/")
    assert local.url == "http://127.0.0.1:8000/v1/chat/completions" and local.model_key == "openai:qwen3"
    with pytest.raises(ValueError, match="provider:model"):
        lm("gpt-4o")
    with pytest.raises(ValueError, match="unknown provider"):
        lm("gemini:flash")


def test_factory_refuses_unknown_options_and_reads_env(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(TypeError, match="temprature"):
        lm("openai:m", temprature=0.2)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-env-0123456789abc")
    client = lm("anthropic:claude")
    assert client.secrets == ("sk-ant-from-env-0123456789abc",)


def test_capabilities_can_be_declared() -> None:
    client = lm("openai:small", base_url="http://127.0.0.1:1/v1", capabilities=LMCapabilities(named_tool_choice=False))
    assert client.capabilities.named_tool_choice is False
    assert lm("openai:gpt-4o", api_key="k").capabilities.response_format == "json_schema"


async def test_options_on_the_wire(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    fake.add(*fixture_replies("llama_cpp/plain.json"))
    await openai_lm.request(
        HI,
        temperature=0.2,
        max_tokens=50,
        top_p=0.9,
        stop=["\n"],
        seed=3,
        parallel_tool_calls=False,
        reasoning_effort="low",
        response_format={"type": "json_object"},
        extra_body={"top_k": 5},
        extra_headers={"x-trace": "1"},
        rollout_id=4,
        timeout=3,
    )
    request = fake.requests[0]
    assert request.json == {
        "model": "gpt-4o",
        "messages": HI,
        "temperature": 0.2,
        "top_p": 0.9,
        "stop": ["\n"],
        "seed": 3,
        "parallel_tool_calls": False,
        "response_format": {"type": "json_object"},
        "reasoning_effort": "low",
        "max_tokens": 50,
        "top_k": 5,
    }
    assert request.headers["x-trace"] == "1"


async def test_unknown_option_is_refused_before_sending(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    with pytest.raises(TypeError, match="frequency_pen"):
        await openai_lm.request(HI, frequency_pen=1)
    with pytest.raises(ValueError, match="tool_choice"):
        await openai_lm.request(HI, tool_choice=42)
    assert fake.requests == []


def test_reasoning_models_take_max_completion_tokens() -> None:
    client = lm("openai:gpt-5-mini", api_key="k")
    assert "max_completion_tokens" in client.build_body(HI, {"max_tokens": 9}, stream=False)
    compatible = lm("openai:gpt-5-mini", base_url="http://127.0.0.1:9/v1")
    assert "max_tokens" in compatible.build_body(HI, {"max_tokens": 9}, stream=False)


async def test_message_names_copied_for_openai(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    fake.add(*fixture_replies("llama_cpp/plain.json"))
    messages = [
        {"role": "system", "content": "s"},
        {"role": "user", "content": "a", "name": "alice"},
        {"role": "assistant", "content": "b", "name": "helper_bot"},
        {"role": "user", "content": "c", "name": ""},
        {"role": "user", "content": "d", "name": None},
    ]
    await openai_lm.request(messages)
    sent = fake.requests[0].json["messages"]
    assert sent[1] == {"role": "user", "content": "a", "name": "alice"}
    assert sent[2] == {"role": "assistant", "content": "b", "name": "helper_bot"}
    assert sent[3] == {"role": "user", "content": "c"} and sent[4] == {"role": "user", "content": "d"}
    assert sent[0] == {"role": "system", "content": "s"}


async def test_anthropic_tool_results_grouped_into_one_user_message(fake: FakeProvider, anthropic_lm: HTTPLM) -> None:
    fake.add(*fixture_replies("anthropic/tool_choice_none.json"))
    messages = [
        {"role": "user", "content": "go"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "a", "arguments": '{"x": 1}'}},
                {"id": "t2", "type": "function", "function": {"name": "b", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "t1", "content": "one"},
        {"role": "tool", "tool_call_id": "t2", "content": "two"},
    ]
    await anthropic_lm.request(messages)
    sent = fake.requests[0].json["messages"]
    assert sent[1] == {
        "role": "assistant",
        "content": [
            {"type": "tool_use", "id": "t1", "name": "a", "input": {"x": 1}},
            {"type": "tool_use", "id": "t2", "name": "b", "input": {}},
        ],
    }
    assert sent[2] == {
        "role": "user",
        "content": [
            {"type": "tool_result", "tool_use_id": "t1", "content": "one"},
            {"type": "tool_result", "tool_use_id": "t2", "content": "two", "cache_control": {"type": "ephemeral"}},
        ],
    }
    assert fake.requests[0].json["max_tokens"] == 4096
    assert fake.requests[0].headers["x-api-key"] == SECRET


async def test_broken_tool_arguments_are_repaired(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    from fake_provider import Reply

    body = {
        "choices": [
            {
                "finish_reason": "tool_calls",
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{'city': 'Paris',"}}
                    ],
                },
            }
        ],
        "model": "m",
    }
    fake.add(Reply(200, json=body))
    response = await openai_lm.request(HI)
    assert dict(response.tool_calls[0].arguments) == {"city": "Paris"}


async def test_content_filter_is_an_error_and_usage_is_recorded(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    from fake_provider import Reply

    from imp.errors import LMError
    from imp.runtime.usage import track_usage

    body = {
        "choices": [{"finish_reason": "content_filter", "message": {"role": "assistant", "content": ""}}],
        "usage": {"prompt_tokens": 9, "completion_tokens": 0},
    }
    fake.add(Reply(200, json=body))
    with track_usage() as usage, pytest.raises(LMError) as info:
        await openai_lm.request(HI)
    assert info.value.content_filtered and not info.value.retryable
    assert usage.total.input_tokens == 9


async def test_openrouter_error_in_a_200_body(fake: FakeProvider) -> None:
    from fake_provider import Reply

    from imp.errors import LMError

    fake.add(Reply(200, json={"error": {"code": 502, "message": "Upstream error"}, "user_id": "u"}))
    client = lm("openrouter:x/y", api_key="k", base_url=fake.base_url, max_retries=0)
    async with client:
        with pytest.raises(LMError) as info:
            await client.request(HI)
    assert info.value.status == 502 and info.value.message == "Upstream error"


def test_dump_rebuilds_without_the_key() -> None:
    client = lm("openai:qwen3", api_key=SECRET, base_url="http://127.0.0.1:8000/v1", temperature=0.1)
    data = client.dump()
    assert data == {"model": "openai:qwen3", "base_url": "http://127.0.0.1:8000/v1", "temperature": 0.1}
    again = lm(**data)
    assert again.dump() == data and again.secrets == ()


def test_every_fixture_is_exercised() -> None:
    from pathlib import Path

    here = Path(__file__).parent
    sources = "".join(p.read_text() for p in here.glob("test_*.py"))
    fixtures = sorted((here / "fixtures" / "providers").glob("*/*.*"))
    assert len(fixtures) == 56
    unused = [f"{p.parent.name}/{p.name}" for p in fixtures if f"{p.parent.name}/{p.name}" not in sources]
    assert unused == []


async def test_n_is_one_or_refused(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    fake.add(*fixture_replies("llama_cpp/plain.json"))
    await openai_lm.request(HI, n=1)
    assert "n" not in fake.requests[0].json
    with pytest.raises(ValueError, match="n=3"):
        await openai_lm.request(HI, n=3)
    assert len(fake.requests) == 1


async def test_own_http_client_is_used_and_left_open(fake: FakeProvider) -> None:
    import httpx

    async with httpx.AsyncClient() as own:
        fake.add(*fixture_replies("llama_cpp/plain.json"), *fixture_replies("llama_cpp/plain.json"))
        client = lm("openai:m", base_url=fake.base_url, http_client=own)
        assert (await client.request(HI)).text
        await client.aclose()
        assert not own.is_closed
        response = await own.post(f"{fake.base_url}/chat/completions", json={})
        assert response.status_code == 200
