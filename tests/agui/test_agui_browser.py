"""docs/examples/agui_app.py under uvicorn: its AG-UI endpoint read by an HTTP client, and its page
in headless Chromium, which sends a question, reads the event stream and shows the text and the
tool calls. The screenshot is kept in `IMP_TEST_ARTIFACTS` (default `build/test-artifacts/`)."""

from __future__ import annotations

import html
import importlib.util
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import httpx
import pytest
import uvicorn
from ag_ui.core import Event
from agui_helpers import REQUIRED, check_order, check_with_typescript_schemas
from pydantic import TypeAdapter

import imp

EXAMPLE = Path(__file__).resolve().parents[2] / "docs" / "examples" / "agui_app.py"
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
ARTIFACTS = Path(os.environ.get("IMP_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "build" / "test-artifacts"))


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("agui_app", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["agui_app"] = module
    spec.loader.exec_module(module)
    return module


def _model(messages: Any, options: Any) -> dict[str, Any]:
    """The agent's model: look the item up, then answer from what the tool said."""
    results = [m for m in messages if m["role"] == "tool"]
    if not results:
        return {"tool_calls": [{"name": "stock", "arguments": {"item": "kettle"}}]}
    return {"answer": f"There are {results[-1]['content']} kettles <b>in stock</b>.", "tool_calls": []}


@pytest.fixture
def app_url() -> Iterator[str]:
    example = _load()
    program = imp.react("question -> answer", [example.stock], lm=imp.StaticLM(_model))
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(example.create_app(program), log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    for _ in range(250):
        if server.started:
            break
        time.sleep(0.02)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)


def test_the_endpoint_streams_a_runs_events(app_url: str) -> None:
    body = {
        "threadId": "thread-1",
        "runId": "run-1",
        "state": {},
        "tools": [],
        "context": [],
        "forwardedProps": {},
        "messages": [{"id": "m1", "role": "user", "content": "How many kettles?"}],
    }
    events = []
    with httpx.Client(timeout=20) as client, client.stream("POST", f"{app_url}/agui", json=body) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data: "):
                data = json.loads(line[len("data: ") :])
                TypeAdapter(Event).validate_python(data)
                events.append(data)
    check_order(events)
    assert events[0] == {"type": "RUN_STARTED", "threadId": "thread-1", "runId": "run-1"}
    (call,) = [e for e in events if e["type"] == "TOOL_CALL_START"]
    assert call["toolCallName"] == "stock"
    (result,) = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert result["content"] == "3" and result["toolCallId"] == call["toolCallId"]
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "There are 3 kettles <b>in stock</b>."
    assert events[-1]["type"] == "RUN_FINISHED" and events[-1]["result"] == {"answer": text}
    assert check_with_typescript_schemas(events) == len(events)


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={profile}"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120, check=True)


@pytest.mark.skipif(
    CHROMIUM is None and not REQUIRED,
    reason="headless Chromium is not installed (apt-get install -y chromium, or make browser; .ci/run does)",
)
def test_the_page_shows_the_answer_and_the_tool_calls_in_a_real_browser(app_url: str, tmp_path: Path) -> None:
    page = f"{app_url}/?q=How%20many%20kettles%3F"
    for attempt in range(3):  # virtual time can run out before a loaded machine answers: ask again
        dom = _chromium("--virtual-time-budget=20000", "--dump-dom", page, profile=tmp_path / f"p{attempt}").stdout
        if 'data-done="1"' in dom:
            break
    assert 'data-done="1"' in dom, dom[-3000:]  # the page read the stream to its end
    messages = [html.unescape(m) for m in re.findall(r'<div class="message[^"]*"[^>]*>(.*?)</div>', dom, re.S)]
    assert messages == ["How many kettles?", "There are 3 kettles <b>in stock</b>."]
    assert "<b>in stock</b>" not in dom  # the model's text is shown as text, never as markup
    call = re.search(r'<div class="tool-call[^"]*" data-id="[^"]+">(.*?)</div></div>', dom, re.S)
    assert call is not None, dom[-3000:]
    shown = re.sub(r"<[^>]+>", " ", call.group(1))
    assert "stock" in shown and '{"item": "kettle"}' in html.unescape(shown) and "-&gt; 3" in shown
    assert re.search(r'<p id="status"[^>]*>finished</p>', dom), dom[-2000:]

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "agui_page.png"
    _chromium(
        "--virtual-time-budget=15000", "--window-size=900,600", f"--screenshot={shot}", page, profile=tmp_path / "p2"
    )
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 5_000
