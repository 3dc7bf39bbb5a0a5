"""A response cache is keyed by who asks: two credentials never share an entry, nor two requests whose
headers may change the reply; the key holds no credential, and a SQLite cache file is its owner's alone."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest
from fake_provider import FakeProvider, Reply

from imp.models import MemoryCache, SQLiteCache, lm
from imp.models.cache import cache_key

HI = [{"role": "user", "content": "hi"}]
ALICE = "sk-alice-0123456789abcdefghijklmn"
BOB = "sk-bob-9876543210zyxwvutsrqponmlk"


def _reply(text: str) -> Reply:
    return Reply(200, json={"choices": [{"index": 0, "message": {"role": "assistant", "content": text}}]})


@pytest.mark.parametrize(
    ("alice", "bob"),
    [
        ({"api_key": ALICE}, {"api_key": BOB}),
        ({"headers": {"api-key": ALICE}}, {"headers": {"api-key": BOB}}),
        ({"extra_headers": {"X-Api-Key": ALICE}}, {"extra_headers": {"X-Api-Key": BOB}}),
    ],
    ids=["api_key", "header", "extra_headers"],
)
async def test_two_tenants_never_share_an_entry(
    fake: FakeProvider, alice: dict[str, object], bob: dict[str, object]
) -> None:
    fake.add(_reply("for alice"), _reply("for bob"))
    cache = MemoryCache()
    async with (
        lm("openai:m", base_url=fake.base_url, cache=cache, **alice) as a,
        lm(  # type: ignore[arg-type]
            "openai:m",
            base_url=fake.base_url,
            cache=cache,
            **bob,  # type: ignore[arg-type]
        ) as b,
    ):
        assert (await a.request(HI)).text == "for alice"
        assert (await b.request(HI)).text == "for bob"  # not alice's reply
        again = await a.request(HI)
    assert again.text == "for alice" and again.cache_hit and len(fake.requests) == 2


@pytest.mark.parametrize("header", ["OpenAI-Organization", "anthropic-beta", "X-Route"])
async def test_a_header_that_may_change_the_reply_is_in_the_key(fake: FakeProvider, header: str) -> None:
    fake.add(_reply("one"), _reply("two"))
    cache = MemoryCache()
    async with lm("openai:m", api_key=ALICE, base_url=fake.base_url, cache=cache) as client:
        assert (await client.request(HI, extra_headers={header: "a"})).text == "one"
        assert (await client.request(HI, extra_headers={header: "b"})).text == "two"
        assert (await client.request(HI, extra_headers={header: "a"})).cache_hit
    assert len(fake.requests) == 2


def test_the_key_holds_a_digest_of_the_credential_never_the_credential() -> None:
    body = {"model": "m", "messages": HI}
    alice = cache_key("openai", "u", body, headers={"authorization": f"Bearer {ALICE}"})
    bob = cache_key("openai", "u", body, headers={"authorization": f"Bearer {BOB}"})
    assert alice != bob and ALICE not in alice and len(alice) == 64
    assert cache_key("openai", "u", body, headers={"content-type": "application/json"}) == cache_key(
        "openai", "u", body
    )


async def test_a_sqlite_cache_file_is_its_owners_alone(fake: FakeProvider, tmp_path: Path) -> None:
    fake.add(_reply("kept"))
    path = tmp_path / "cache" / "replies.sqlite"
    old = os.umask(0o022)  # the usual umask, under which files are created 0644
    try:
        cache = SQLiteCache(path)
        async with lm("openai:m", api_key=ALICE, base_url=fake.base_url, cache=cache) as client:
            await client.request(HI)
            assert (await client.request(HI)).cache_hit
        cache.close()
    finally:
        os.umask(old)
    for file in path.parent.iterdir():
        assert stat.S_IMODE(file.stat().st_mode) == 0o600, file
    assert ALICE.encode() not in path.read_bytes()
