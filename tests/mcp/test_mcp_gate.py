"""Nothing is started or dialed before its descriptor is approved; descriptors are checked; a stdio
server gets a minimal environment."""

from __future__ import annotations

import functools
import re
import socket
import sys
from pathlib import Path
from typing import Any

import pytest
from mcp_helpers import fake, run, time_server

from imp.mcp import ENV_PASSED, InvalidMCPServer, MCPServerNotAuthorized, connect
from imp.tools import Allow, Deny, ToolCall, run_tool_calls


def _marker_server(marker: Path) -> dict[str, Any]:
    return {"name": "marker", "command": sys.executable, "args": ["-c", f"open({str(marker)!r}, 'w')"]}


async def _open(servers: list[dict[str, Any]], **options: Any) -> None:
    async with connect(servers, **options):
        raise AssertionError("the import must be refused")


def test_an_untrusted_server_is_never_started(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    server = _marker_server(marker)
    for trusted in ([], [{**server, "args": ["-c", "pass"]}], [{k: v for k, v in server.items() if k != "args"}]):
        with pytest.raises(MCPServerNotAuthorized) as caught:
            run(functools.partial(_open, [time_server(), server], trusted=[*trusted, time_server()]))
        assert (caught.value.server, caught.value.index) == ("marker", 1)
        assert "not one of the trusted ones" in str(caught.value)
    assert not marker.exists()


def test_an_untrusted_url_is_never_dialed() -> None:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    listener.setblocking(False)
    server = {"name": "remote", "url": f"http://127.0.0.1:{listener.getsockname()[1]}/mcp"}
    with pytest.raises(MCPServerNotAuthorized):
        run(lambda: _open([server], authorize=lambda descriptor: Deny("not on the list")))
    with pytest.raises(BlockingIOError):
        listener.accept()  # nobody connected
    listener.close()


def test_the_authorizer_sees_each_descriptor_and_fails_closed(tmp_path: Path) -> None:
    marker = tmp_path / "started"
    seen: list[dict[str, Any]] = []

    async def decide(descriptor: Any) -> Allow | Deny:
        seen.append(dict(descriptor))
        return Allow() if descriptor["name"] == "time" else Deny("only the time server")

    with pytest.raises(MCPServerNotAuthorized, match="only the time server"):
        run(lambda: _open([time_server(), _marker_server(marker)], authorize=decide))
    assert [d["name"] for d in seen] == ["time", "marker"]

    def broken(descriptor: Any) -> bool:
        raise RuntimeError("policy store unreachable")

    for authorize, said in [
        (broken, "authorization failed: policy store unreachable"),
        (lambda descriptor: "yes", "authorization gave no valid answer (got str)"),
        (lambda descriptor: False, "authorization denied it"),
    ]:
        with pytest.raises(MCPServerNotAuthorized, match=re.escape(said)):
            run(functools.partial(_open, [_marker_server(marker)], authorize=authorize))
    assert not marker.exists()

    def frozen(descriptor: Any) -> bool:
        descriptor["command"] = "/bin/sh"  # the authorizer cannot change what runs
        return True

    with pytest.raises(MCPServerNotAuthorized, match="authorization failed"):
        run(lambda: _open([_marker_server(marker)], authorize=frozen))


def test_trusted_or_authorize_is_required() -> None:
    with pytest.raises(TypeError, match="exactly one of"):
        run(lambda: _open([time_server()]))
    with pytest.raises(TypeError, match="exactly one of"):
        run(lambda: _open([time_server()], trusted=[time_server()], authorize=lambda d: True))


@pytest.mark.parametrize(
    ("descriptor", "problem"),
    [
        ({"command": "x"}, "`name` is 1-64 letters"),
        ({"name": "a b", "command": "x"}, "`name` is 1-64 letters"),
        ({"name": "a"}, "a stdio server needs a `command`"),
        ({"name": "a", "command": "x", "args": "--flag"}, "`args` is a list of strings"),
        ({"name": "a", "command": "x", "env": {"KEY": 1}}, "`env` is a mapping of strings to strings"),
        ({"name": "a", "command": "x", "enviroment": {}}, "unknown keys for a stdio server: enviroment"),
        ({"name": "a", "url": "ftp://example.com"}, "needs a `url` (http:// or https://)"),
        ({"name": "a", "url": "https://example.com", "headers": {"A": None}}, "`headers` is a mapping"),
        ({"name": "a", "type": "sse", "url": "https://example.com/sse"}, "legacy HTTP+SSE"),
        ({"name": "a", "type": "ws", "url": "wss://example.com"}, "`type` is 'stdio' or 'http'"),
    ],
)
def test_malformed_descriptors_are_refused(descriptor: dict[str, Any], problem: str) -> None:
    with pytest.raises(InvalidMCPServer, match=re.escape(problem)) as caught:
        run(lambda: _open([time_server(), descriptor], trusted=[time_server(), descriptor]))
    assert caught.value.index == 1


def test_two_descriptors_with_one_name_are_refused() -> None:
    with pytest.raises(InvalidMCPServer, match="the name `time` is also server 0's"):
        run(lambda: _open([time_server(), time_server()], trusted=[time_server()]))


def test_a_stdio_server_gets_a_minimal_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-parent-secret")
    monkeypatch.setenv("IMP_TEST_PARENT_ONLY", "parent")
    monkeypatch.setenv("LANG", "C.UTF-8")
    server = fake(env={"IMP_TEST_GIVEN": "given"})
    keys = ["OPENAI_API_KEY", "IMP_TEST_PARENT_ONLY", "IMP_TEST_GIVEN", "LANG", "PATH"]

    async def body() -> list[str]:
        async with connect([server], trusted=[server]) as tools:
            calls = [ToolCall(key, "getenv", {"key": key}) for key in keys]
            return [r.result for r in await run_tool_calls(calls, tools)]

    secret, parent_only, given, lang, path = run(body)
    assert (secret, parent_only, given, lang) == ("<unset>", "<unset>", "given", "C.UTF-8")
    assert path != "<unset>"
    assert "PATH" in ENV_PASSED and "OPENAI_API_KEY" not in ENV_PASSED
