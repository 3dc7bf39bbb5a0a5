"""The API key never shows: not in a repr, a log line, an exception, a cache key or a saved file."""

from __future__ import annotations

import logging
import traceback
from pathlib import Path

import pytest
from fake_provider import FakeProvider, Reply
from lm_constants import FAST_RETRIES, SECRET

from imp.errors import LMError
from imp.models import lm
from imp.models.cache import SQLiteCache

HI = [{"role": "user", "content": "hi"}]


@pytest.mark.parametrize("provider", ["openai", "anthropic", "openrouter"])
async def test_key_never_leaks_during_a_failing_call(
    fake: FakeProvider,
    provider: str,
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    capsys: pytest.CaptureFixture[str],
) -> None:
    echo = {
        "error": {
            "message": f"Incorrect API key provided: {SECRET}. Authorization: Bearer {SECRET}",
            "type": "invalid_request_error",
        }
    }
    fake.add(Reply(500, json=echo), Reply(500, json=echo), Reply(401, json=echo))
    cache = SQLiteCache(tmp_path / "c.sqlite")
    client = lm(f"{provider}:model", api_key=SECRET, base_url=fake.base_url, retry_policy=FAST_RETRIES, cache=cache)
    captured: list[str] = [repr(client), str(client)]
    caplog.set_level(logging.DEBUG)
    with pytest.raises(LMError) as info:
        await client.request(HI)
    logs = [r.msg for r in caplog.records if isinstance(r.msg, dict)]
    error = info.value
    captured += [str(error), repr(error), repr(error.body), error.message, repr(vars(error))]
    captured += ["".join(traceback.format_exception(error))]
    captured += [repr(entry) for entry in logs]
    captured += [caplog.text, *capsys.readouterr()]
    await client.aclose()
    cache.close()
    captured.append((tmp_path / "c.sqlite").read_bytes().decode("latin-1"))
    assert error.status == 401 and error.attempts == 3  # the key was really sent and echoed back
    assert any(SECRET in str(r.headers) for r in fake.requests)
    for text in captured:
        assert SECRET not in text
    assert any(entry.get("event") == "lm_retry" for entry in logs), "the retries were logged"
