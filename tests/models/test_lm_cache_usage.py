"""The response cache (memory LRU, SQLite, coalescing, failures) and usage accounting across tasks."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from fake_provider import FakeProvider, Reply, fixture_replies
from lm_constants import FAST_RETRIES, SECRET

from imp.models import lm
from imp.models._http import HTTPLM
from imp.models.base import LMResponse
from imp.models.cache import MemoryCache, ResponseCache, SQLiteCache, cache_key, using_cache
from imp.runtime.usage import track_usage

HI = [{"role": "user", "content": "hi"}]


def _plain(delay: float = 0.0) -> Reply:
    reply = fixture_replies("llama_cpp/plain.json")[0]
    reply.delay = delay
    return reply


async def test_cache_off_by_default(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    fake.add(_plain(), _plain())
    await openai_lm.request(HI)
    second = await openai_lm.request(HI)
    assert len(fake.requests) == 2 and not second.cache_hit


async def test_memory_cache_hit_reports_zero_usage(fake: FakeProvider) -> None:
    cache = MemoryCache(max_entries=8)
    fake.add(_plain())
    async with lm("openai:m", base_url=fake.base_url, cache=cache) as client:
        with track_usage() as usage:
            first = await client.request(HI, temperature=0)
            second = await client.request(HI, temperature=0)
        assert not first.cache_hit and second.cache_hit
        assert second.text == first.text and second.usage.total_tokens == 0
        assert usage.total.input_tokens == 15 and usage.total.requests == 1
        assert len(fake.requests) == 1 and cache.stats.hits == 1
        fake.add(_plain(), _plain(), _plain())
        await client.request(HI, temperature=0, rollout_id=2)  # another rollout: a miss
        await client.request(HI, temperature=0.5)  # another request: a miss
        assert len(fake.requests) == 3
        await client.request(HI, temperature=0, cache=False)  # per call off
        assert len(fake.requests) == 4


async def test_lru_bound() -> None:
    cache = MemoryCache(max_entries=2)
    for key in ("a", "b", "c"):
        await cache.set(key, LMResponse(text=key))
    assert await cache.get("a") is None and len(cache) == 2 and cache.stats.evictions == 1
    assert (await cache.get("c")) is not None


async def test_concurrent_identical_misses_are_coalesced(fake: FakeProvider) -> None:
    cache = MemoryCache()
    fake.add(_plain(delay=0.2))
    results: list[LMResponse] = []
    async with lm("openai:m", base_url=fake.base_url, cache=cache) as client:

        async def one() -> None:
            results.append(await client.request(HI))

        async with anyio.create_task_group() as group:
            for _ in range(5):
                group.start_soon(one)
    assert len(fake.requests) == 1
    assert sorted(r.cache_hit for r in results) == [False, True, True, True, True]
    assert cache.stats.coalesced == 4


async def test_sqlite_cache_survives_a_new_client(fake: FakeProvider, tmp_path: Path) -> None:
    path = tmp_path / "cache" / "lm.sqlite"
    fake.add(*fixture_replies("openai/tool_choice_required.json"))
    tools = [{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]
    async with lm("openai:m", base_url=fake.base_url, cache=SQLiteCache(path)) as client:
        first = await client.request(HI, tools=tools, tool_choice="required")
    reopened = SQLiteCache(path)
    async with lm("openai:m", base_url=fake.base_url, cache=reopened) as client:
        again = await client.request(HI, tools=tools, tool_choice="required")
    reopened.close()
    assert again.cache_hit and again.tool_calls == first.tool_calls and again.finish_reason == "tool_calls"
    assert len(fake.requests) == 1
    assert SECRET.encode() not in path.read_bytes()


class _Broken(ResponseCache):
    async def get(self, key: str) -> LMResponse | None:
        raise OSError("disk gone")

    async def set(self, key: str, response: LMResponse) -> None:
        raise OSError("disk gone")


async def test_a_failing_cache_never_fails_the_call(fake: FakeProvider) -> None:
    fake.add(_plain())
    broken = _Broken()
    async with lm("openai:m", base_url=fake.base_url, cache=broken) as client:
        response = await client.request(HI)
    assert response.text and broken.stats.errors == 2


async def test_configured_default_cache(fake: FakeProvider) -> None:
    fake.add(_plain())
    async with lm("openai:m", base_url=fake.base_url) as client:
        with using_cache(MemoryCache()) as cache:
            await client.request(HI)
            hit = await client.request(HI)
        assert hit.cache_hit and cache is not None and cache.stats.hits == 1


def test_cache_key_has_no_credentials() -> None:
    a = lm("openai:m", api_key=SECRET)
    b = lm("openai:m", api_key="sk-other-key-000000000000000")
    body = a.build_body(HI, {}, stream=False)
    assert body == b.build_body(HI, {}, stream=False)
    key = cache_key(a.provider, a.base_url, body)
    assert SECRET not in key and len(key) == 64
    assert key != cache_key(a.provider, a.base_url, body, rollout_id=1)


async def test_usage_of_concurrent_children_adds_up(fake: FakeProvider) -> None:
    for _ in range(6):
        fake.add(_plain(delay=0.02))
    async with lm("openai:m", base_url=fake.base_url, retry_policy=FAST_RETRIES) as client:
        with track_usage() as outer:

            async def child() -> None:
                with track_usage() as inner:
                    await client.request(HI)
                assert inner.total.input_tokens == 15

            async with anyio.create_task_group() as group:
                for _ in range(6):
                    group.start_soon(child)
    assert outer.total.requests == 6 and outer.total.input_tokens == 90 and outer.total.output_tokens == 78
    assert list(outer.by_model) == ["openai:m"]


def test_accumulators_nest_and_close_in_order() -> None:
    from imp.models.base import Usage
    from imp.runtime.usage import record_usage

    one = Usage(input_tokens=1, requests=1)
    with track_usage() as outer:
        record_usage("a:m", one)
        with track_usage() as inner:
            record_usage("b:m", one)
            with pytest.raises(RuntimeError, match="already open"):
                inner.__enter__()
        record_usage("a:m", one)  # the inner block is closed: only the outer one counts this
    record_usage("a:m", one)  # nothing is open
    assert inner.total == one and list(inner.by_model) == ["b:m"]
    assert outer.total.requests == 3 and outer.by_model["a:m"].input_tokens == 2


async def test_stream_records_usage(fake: FakeProvider, openai_lm: HTTPLM) -> None:
    fake.add_fixture("deepseek/stream_reasoning_content.json")
    with track_usage() as usage:
        async for _ in openai_lm.stream(HI):
            pass
    assert usage.total.output_tokens == 212 and usage.total.reasoning_tokens == 198


@pytest.mark.parametrize("cost", [0.0012, None])
async def test_provider_cost_is_kept(fake: FakeProvider, openai_lm: HTTPLM, cost: float | None) -> None:
    body = {
        "choices": [{"finish_reason": "stop", "message": {"content": "x"}}],
        "usage": {"prompt_tokens": 1, "completion_tokens": 1},
    }
    if cost is not None:
        body["usage"]["cost"] = cost  # type: ignore[index]
    fake.add(Reply(200, json=body))
    response = await openai_lm.request(HI)
    assert response.usage.cost == cost


async def test_imp_configure_cache_is_honoured(fake: FakeProvider, tmp_path: Path) -> None:
    from imp.settings import context

    fake.add(_plain())
    async with lm("openai:m", base_url=fake.base_url) as client:
        with context(cache=tmp_path / "configured.sqlite"):
            await client.request(HI)
            hit = await client.request(HI)
        assert hit.cache_hit
        with context(cache=False):
            fake.add(_plain())
            miss = await client.request(HI)
        assert not miss.cache_hit and len(fake.requests) == 2
