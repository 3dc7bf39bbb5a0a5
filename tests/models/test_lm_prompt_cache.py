"""Anthropic prompt caching: breakpoints where the next step shares its prefix, cache usage, cost."""

from __future__ import annotations

import copy
import itertools
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from fake_provider import FakeProvider, Reply
from lm_constants import FAST_RETRIES, SECRET

import imp
from imp.models import Prices, lm
from imp.models._anthropic_cache import MAX_BREAKPOINTS
from imp.models.anthropic import AnthropicLM
from imp.records import Usage
from imp.runtime.usage import track_usage

TOOL = {"type": "function", "function": {"name": "look", "description": "d", "parameters": {"type": "object"}}}
EPHEMERAL = {"type": "ephemeral"}


def _marks(value: Any, path: str = "") -> list[str]:
    """Where a body carries `cache_control`, as paths."""
    if isinstance(value, dict):
        here = [path] if "cache_control" in value else []
        return here + [m for k, v in value.items() for m in _marks(v, f"{path}/{k}")]
    if isinstance(value, list):
        return [m for i, v in enumerate(value) for m in _marks(v, f"{path}/{i}")]
    return []


def _unmarked(value: Any) -> Any:
    """A body without its `cache_control` marks (they do not change the cached prefix)."""
    if isinstance(value, dict):
        return {k: _unmarked(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [_unmarked(v) for v in value]
    return value


def assert_reuses(now: dict[str, Any], nxt: dict[str, Any]) -> None:
    """`nxt` starts with all of `now` and marks the block `now` ended on: it reads `now`'s cache entry."""
    assert _unmarked(nxt.get("tools")) == _unmarked(now.get("tools")) and nxt.get("system") == now.get("system")
    assert _unmarked(nxt["messages"][: len(now["messages"])]) == _unmarked(now["messages"])
    newest = _marks(now["messages"])[-1]
    assert newest.startswith(f"/{len(now['messages']) - 1}/") and newest in _marks(nxt["messages"])
    assert len(_marks(nxt)) <= MAX_BREAKPOINTS


def _history(steps: int) -> list[dict[str, Any]]:
    """A ReAct turn's messages after `steps` tool calls (system, task, then call/result pairs)."""
    messages: list[dict[str, Any]] = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "task"}]
    for step in range(steps):
        call = {"id": f"c{step}", "type": "function", "function": {"name": "look", "arguments": "{}"}}
        messages.append({"role": "assistant", "content": f"thought {step}", "tool_calls": [call]})
        messages.append({"role": "tool", "tool_call_id": f"c{step}", "content": f"result {step}"})
    return messages


class _Bodies(AnthropicLM):
    def body(self, messages: list[dict[str, Any]], **options: Any) -> dict[str, Any]:
        """The body a request sends: the client's defaults merged with the call's options."""
        return self.build_body(messages, self._merged(options), stream=False)  # type: ignore[arg-type]


def _client(**settings: Any) -> _Bodies:
    return _Bodies("claude-sonnet-4-6", api_key=SECRET, **settings)


def test_breakpoints_on_tools_system_newest_and_previous_end() -> None:
    body = _client().body(_history(2), tools=[TOOL])
    assert body["tools"][-1]["cache_control"] == EPHEMERAL
    assert body["system"] == [{"type": "text", "text": "be brief", "cache_control": EPHEMERAL}]
    # messages: task, call 0, result 0, call 1, result 1: the newest and where the last request ended
    assert _marks(body["messages"]) == ["/2/content/0", "/4/content/0"]
    assert len(_marks(body)) == MAX_BREAKPOINTS


@pytest.mark.parametrize("steps", range(0, 12))
def test_each_step_request_starts_with_the_previous_one_marks_included(steps: int) -> None:
    """The next step's request holds this one's prefix and marks where this one ended: an exact cache read."""
    client = _client()
    now = client.body(_history(steps), tools=[TOOL])
    nxt = client.body(_history(steps + 1), tools=[TOOL])
    assert_reuses(now, nxt)


def test_without_tools_or_system_the_marks_stay_on_messages() -> None:
    body = _client().body([{"role": "user", "content": "hi"}])
    assert body["messages"] == [
        {"role": "user", "content": [{"type": "text", "text": "hi", "cache_control": EPHEMERAL}]}
    ]
    assert "system" not in body


def test_thinking_blocks_are_never_marked() -> None:
    thinking = [{"type": "thinking", "thinking": "t", "signature": "s"}]
    history = [{"role": "user", "content": "q"}, {"role": "assistant", "content": None, "reasoning_data": thinking}]
    body = _client().body(history)
    assert body["messages"][-1]["content"] == thinking  # the prefill is left alone
    assert _marks(body) == ["/messages/0/content/0"]


def test_the_callers_history_is_not_changed() -> None:
    history = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    before = copy.deepcopy(history)
    _client().body(history)
    assert history == before


def test_off_one_hour_and_caller_marks() -> None:
    assert _marks(_client(prompt_cache="off").body(_history(2), tools=[TOOL])) == []
    assert _marks(_client(prompt_cache=False).body(_history(1))) == []
    long = _client(prompt_cache="1h")
    body = long.body(_history(2), tools=[TOOL])
    assert body["tools"][-1]["cache_control"] == {"type": "ephemeral", "ttl": "1h"}
    assert all(b["cache_control"]["ttl"] == "1h" for b in body["system"])
    assert "extended-cache-ttl" in long.request_headers({"prompt_cache": "1h"})["anthropic-beta"]
    assert _client().request_headers({}) == {}
    own = [{"role": "user", "content": [{"type": "text", "text": "x", "cache_control": EPHEMERAL}]}]
    assert _marks(_client().body([*own, *_history(1)[1:]], tools=[TOOL])) == ["/messages/0/content/0"]
    # per call, too
    assert _marks(_client().body(_history(1), prompt_cache="off")) == []


@pytest.mark.parametrize("bad", ["10m", 5, "on"])
def test_a_bad_prompt_cache_is_refused_at_construction(bad: Any) -> None:
    with pytest.raises(ValueError, match="prompt_cache is one of '5m', '1h', 'off'"):
        _client(prompt_cache=bad)


def test_only_anthropic_takes_prompt_cache() -> None:
    with pytest.raises(TypeError, match="prompt_cache"):
        lm("openai:gpt-4o", api_key=SECRET, prompt_cache="1h")


def test_the_setting_is_saved_with_the_client() -> None:
    client = _client(prompt_cache="1h", prices=Prices(input=3, output=15))
    dumped = client.dump()
    assert dumped["prompt_cache"] == "1h" and dumped["prices"] == {"input": 3, "output": 15}
    again = lm(**dumped)
    assert again.dump() == dumped and SECRET not in json.dumps(dumped)


def _anthropic_reply(content: list[dict[str, Any]], usage: dict[str, int], stop: str = "tool_use") -> Reply:
    body = {"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-sonnet-4-6"}
    return Reply(json={**body, "content": content, "stop_reason": stop, "usage": usage})


def _call(n: int) -> list[dict[str, Any]]:
    return [
        {"type": "text", "text": f"looking {n}"},
        {"type": "tool_use", "id": f"toolu_{n}", "name": "look", "input": {}},
    ]


USAGES = [
    {"input_tokens": 40, "cache_creation_input_tokens": 2000, "cache_read_input_tokens": 0, "output_tokens": 20},
    {"input_tokens": 10, "cache_creation_input_tokens": 60, "cache_read_input_tokens": 2000, "output_tokens": 20},
    {"input_tokens": 10, "cache_creation_input_tokens": 60, "cache_read_input_tokens": 2060, "output_tokens": 30},
]


@pytest.fixture
async def claude(fake: FakeProvider) -> AsyncIterator[AnthropicLM]:
    client = lm(
        "anthropic:claude-sonnet-4-6",
        api_key=SECRET,
        base_url=fake.base_url,
        retry_policy=FAST_RETRIES,
        prices={"input": 3.0, "output": 15.0},
    )
    assert isinstance(client, AnthropicLM)
    async with client:
        yield client


def _look() -> str:
    """Look around."""
    return "a box"


def _turn_replies(fake: FakeProvider) -> None:
    fake.add(
        _anthropic_reply(_call(0), USAGES[0]),
        _anthropic_reply(_call(1), USAGES[1]),
        _anthropic_reply([{"type": "text", "text": "a box"}], USAGES[2], stop="end_turn"),
    )


async def test_a_react_turn_reuses_each_previous_request_and_reports_cache_usage(
    fake: FakeProvider, claude: AnthropicLM
) -> None:
    _turn_replies(fake)
    program = imp.react("question -> answer", [_look], lm=claude)
    with track_usage() as usage:
        prediction = await imp.call(program, question="what is here?")
    assert prediction.answer == "a box"
    bodies = [r.json for r in fake.requests]
    assert len(bodies) == 3
    for now, nxt in itertools.pairwise(bodies):
        assert_reuses(now, nxt)
    total = usage.total
    assert total.cached_tokens == 4060 and total.cache_write_tokens == 2120
    assert total.input_tokens == 60 + 4060 + 2120 and total.output_tokens == 70
    fresh, read, write, out = 60 * 3.0, 4060 * 0.3, 2120 * 3.75, 70 * 15.0
    assert total.cost == pytest.approx((fresh + read + write + out) / 1e6)

    # the history saved to a file and read back is sent with the same breakpoints
    saved = json.loads(json.dumps(prediction.metadata.history.dump()))
    for history in (prediction.metadata.history, imp.History.load(saved)):
        fake.add(_anthropic_reply([{"type": "text", "text": "still a box"}], USAGES[2], stop="end_turn"))
        await imp.call(program, question="and now?", history=history)
    live, replayed = fake.requests[-2].json, fake.requests[-1].json
    assert live == replayed and _marks(replayed["messages"])


async def test_stream_usage_carries_cache_reads_and_writes(fake: FakeProvider, claude: AnthropicLM) -> None:
    start = {"type": "message_start", "message": {"id": "m", "model": "c", "usage": USAGES[1]}}
    events = [
        start,
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}},
        {"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}},
        {"type": "message_stop"},
    ]
    body = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    fake.add(Reply(body=body, headers={"content-type": "text/event-stream"}, chunk_size=23))
    (final,) = [e async for e in claude.stream([{"role": "user", "content": "hi"}]) if e.kind == "final"]
    assert final.response is not None
    got = final.response.usage
    assert (got.cached_tokens, got.cache_write_tokens, got.input_tokens, got.output_tokens) == (2000, 60, 2070, 5)
    assert got.cost == pytest.approx((10 * 3 + 2000 * 0.3 + 60 * 3.75 + 5 * 15) / 1e6)


def test_prices() -> None:
    usage = Usage(input_tokens=1000, cached_tokens=600, cache_write_tokens=100, output_tokens=10, requests=1)
    assert Prices(input=1, output=2, cache_read=0.5, cache_write=4).cost(usage) == pytest.approx(
        (300 * 1 + 600 * 0.5 + 100 * 4 + 10 * 2) / 1e6
    )
    with pytest.raises(ValueError, match=r"prices\.input"):
        Prices(input=-1, output=1)
    with pytest.raises(TypeError, match="prices takes"):
        lm("anthropic:m", api_key=SECRET, prices={"inputs": 1})
    assert (Usage(cache_write_tokens=2) + Usage(cache_write_tokens=3)).cache_write_tokens == 5
    assert Usage(cache_write_tokens=7).dump()["cache_write_tokens"] == 7


async def test_a_provider_reported_cost_is_kept(fake: FakeProvider) -> None:
    reply = {"id": "x", "choices": [{"message": {"role": "assistant", "content": "hi"}, "finish_reason": "stop"}]}
    fake.add(Reply(json={**reply, "usage": {"prompt_tokens": 10, "completion_tokens": 2, "cost": 0.5}}))
    async with lm("openrouter:m", api_key=SECRET, base_url=fake.base_url, prices=Prices(input=1, output=1)) as client:
        response = await client.request([{"role": "user", "content": "hi"}])
    assert response.usage.cost == 0.5
