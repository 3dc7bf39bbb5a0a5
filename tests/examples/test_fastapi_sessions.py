"""docs/examples/fastapi_sessions.py under uvicorn: a conversation kept across a restart of the service."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"


class ChatModel:
    """An OpenAI-compatible server on 127.0.0.1 whose reply says how many user turns the request held."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.held = threading.Event()  # a request whose message says "slow" waits for `release`
        self.release = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                outer.requests.append(body)
                users = sum(1 for m in body["messages"] if m["role"] == "user")
                if "slow" in str(body["messages"][-1].get("content")):
                    outer.held.set()
                    outer.release.wait(30)
                content = f"[[ ## reply ## ]]\nreply to user turn {users}\n\n[[ ## completed ## ]]"
                data = json.dumps(
                    {
                        "choices": [
                            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
                        ]
                    }
                ).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/v1"


def serve(env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    command = [sys.executable, "-m", "uvicorn", "fastapi_sessions:app", "--app-dir", str(EXAMPLES)]
    command += ["--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    process = subprocess.Popen(
        command, env={**os.environ, **env}, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    url = f"http://127.0.0.1:{port}"
    end = time.monotonic() + 30
    while time.monotonic() < end:
        assert process.poll() is None, process.stdout.read() if process.stdout else ""
        try:
            httpx.get(url + "/chat/probe", timeout=1)
            return process, url
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise AssertionError("uvicorn did not start")


def test_a_conversation_continues_after_the_service_restarts(tmp_path: Path) -> None:
    model = ChatModel()
    env = {
        "IMP_LM": "openai:chat",
        "IMP_BASE_URL": model.base_url,
        "IMP_API_KEY": "sk-test-0000000000000000",
        "IMP_SESSIONS": str(tmp_path / "sessions.db"),
    }
    process, url = serve(env)
    try:
        first = httpx.post(url + "/chat/user-7", json={"message": "Hello, I am Ada."}, timeout=30).json()
        assert first == {"reply": "reply to user turn 1", "turns": 1}
        other = httpx.post(url + "/chat/user-8", json={"message": "Hi."}, timeout=30).json()
        assert other["turns"] == 1
        # A message sent twice: the second, while the first turn runs, is refused and loses nothing.
        answers: list[httpx.Response] = []
        sender = threading.Thread(
            target=lambda: answers.append(httpx.post(url + "/chat/user-9", json={"message": "slow"}, timeout=30))
        )
        sender.start()
        assert model.held.wait(30)
        again = httpx.post(url + "/chat/user-9", json={"message": "slow"}, timeout=30)
        assert again.status_code == 409 and "has a turn running" in again.json()["detail"]
        model.release.set()
        sender.join(30)
        assert answers[0].status_code == 200 and answers[0].json()["turns"] == 1
        assert len(httpx.get(url + "/chat/user-9", timeout=30).json()) == 1
    finally:
        process.terminate()
        process.wait(30)

    process, url = serve(env)  # a redeploy: a new process, the same file
    try:
        second = httpx.post(url + "/chat/user-7", json={"message": "What is my name?"}, timeout=30).json()
        assert second == {"reply": "reply to user turn 2", "turns": 2}
        sent = model.requests[-1]["messages"]
        assert any("Hello, I am Ada." in str(m.get("content")) for m in sent)  # the kept turn was sent
        assert not any(str(m.get("content")).strip() == "Hi." for m in sent)  # not another session's
        turns = httpx.get(url + "/chat/user-7", timeout=30).json()
        assert turns == [
            {"message": "Hello, I am Ada.", "reply": "reply to user turn 1"},
            {"message": "What is my name?", "reply": "reply to user turn 2"},
        ]
        assert httpx.delete(url + "/chat/user-7", timeout=30).json() == {"deleted": "user-7"}
        assert httpx.get(url + "/chat/user-7", timeout=30).json() == []
    finally:
        process.terminate()
        process.wait(30)
    assert oct((tmp_path / "sessions.db").stat().st_mode & 0o777) == "0o600"
