"""Helpers of the MCP tests: server descriptors and a /proc scan for processes left running."""

from __future__ import annotations

import os
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

HERE = Path(__file__).resolve().parent

FAKE = str(HERE / "fake_server.py")


def time_server(name: str = "time") -> dict[str, Any]:
    """`mcp-server-time` from PyPI, over stdio, with UTC as its local time zone."""
    return {"name": name, "command": sys.executable, "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}


def git_server(repository: Path, name: str = "git") -> dict[str, Any]:
    """`mcp-server-git` from PyPI, over stdio, on one repository."""
    return {"name": name, "command": sys.executable, "args": ["-m", "mcp_server_git", "--repository", str(repository)]}


def fake(name: str = "fake", *args: str, env: dict[str, str] | None = None) -> dict[str, Any]:
    """The test server of fake_server.py, over stdio."""
    return {"name": name, "command": sys.executable, "args": [FAKE, *args], "env": env or {}}


async def until(predicate: Callable[[], bool], within: float = 10.0) -> None:
    """Wait until `predicate` holds (it reads what another process did, so there is no event to wait
    on); fail after `within` seconds, a bound against a hang, not a speed claim."""
    with anyio.fail_after(within):
        while not predicate():  # noqa: ASYNC110
            await anyio.sleep(0.01)


def _stat(pid: str) -> tuple[str, int, int] | None:
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rfind(")") + 2 :].split()
    return fields[0], int(fields[1]), int(fields[2])  # state, ppid, pgrp


def live_processes() -> dict[int, tuple[int, int]]:
    """Every process that is not a zombie: pid -> (ppid, pgrp)."""
    found = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit() and (stat := _stat(entry)) is not None and stat[0] not in ("Z", "X"):
            found[int(entry)] = (stat[1], stat[2])
    return found


def descendants(pid: int) -> set[int]:
    """The live processes below `pid`."""
    table = live_processes()
    below: set[int] = set()
    grew = True
    while grew:
        grew = False
        for child, (parent, _) in table.items():
            if (parent == pid or parent in below) and child not in below:
                below.add(child)
                grew = True
    return below


def group_members(pgid: int) -> set[int]:
    """The live processes of a process group."""
    return {pid for pid, (_, group) in live_processes().items() if group == pgid}


def with_token(token: str) -> set[int]:
    """Live processes whose command line holds `token`."""
    found = set()
    for pid in live_processes():
        try:
            if token.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                found.add(pid)
        except OSError:
            continue
    return found


def run(body: Callable[[], Awaitable[Any]], backend: str = "asyncio") -> Any:
    """Run an async test body to completion (pytest-asyncio claims every `async def` test)."""
    return anyio.run(body, backend=backend)
