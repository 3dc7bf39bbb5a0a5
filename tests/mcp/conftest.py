"""Fixtures for the MCP tests: a git repository, an in-process Streamable HTTP server, and a
check after every test that no server process is left running."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fake_server
import pytest
import uvicorn
from mcp_helpers import descendants


@pytest.fixture(autouse=True)
def no_server_left() -> Iterator[None]:
    """Fail a test that leaves a process of its own running."""
    before = descendants(os.getpid())
    yield
    left = descendants(os.getpid()) - before
    for _ in range(50):
        if not left:
            break
        time.sleep(0.05)
        left = descendants(os.getpid()) - before
    assert not left, f"processes left running: {sorted(left)}"


@pytest.fixture
def repository(tmp_path: Path) -> Path:
    """A git repository with one commit and one uncommitted change."""
    repo = tmp_path / "repo"
    repo.mkdir()
    git = ["git", "-c", "user.name=Imp Test", "-c", "user.email=imp@example.com", "-c", "commit.gpgsign=false"]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "README.md").write_text("# Atlas\n")
    subprocess.run([*git, "-C", str(repo), "add", "README.md"], check=True)
    subprocess.run([*git, "-C", str(repo), "commit", "-q", "-m", "Add the README"], check=True)
    (repo / "README.md").write_text("# Atlas\n\nOn call: Maya.\n")
    return repo


class _RequireToken:
    """ASGI middleware: HTTP requests without `Authorization: Bearer <token>` get 401."""

    def __init__(self, app: Any, token: str) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = dict(scope.get("headers") or [])
            if headers.get(b"authorization") != f"Bearer {self.token}".encode():
                await send({"type": "http.response.start", "status": 401, "headers": []})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await self.app(scope, receive, send)


@pytest.fixture
def http_server() -> Iterator[Callable[..., str]]:
    """Start fake_server over Streamable HTTP on 127.0.0.1 (uvicorn in a thread); returns its URL."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(token: str | None = None, name: str = "fake") -> str:
        app: Any = fake_server.build(name).streamable_http_app()
        if token is not None:
            app = _RequireToken(app, token)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
        server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
        thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
        thread.start()
        for _ in range(200):
            if server.started:
                break
            time.sleep(0.02)
        servers.append((server, thread))
        return f"http://127.0.0.1:{port}/mcp"

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(10)
