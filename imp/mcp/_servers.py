"""Server descriptors of `imp.mcp`: their shape, the errors of an import, and the gate that
approves each descriptor before anything is started or dialed."""

from __future__ import annotations

import inspect
import os
import re
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Literal
from urllib.parse import urlsplit

import anyio

from imp.errors import ImpError
from imp.tools.authorization import DEFAULT_AUTHORIZE_TIMEOUT, Allow, Deny

__all__ = [
    "InvalidMCPServer",
    "MCPConnectionError",
    "MCPEnvironmentError",
    "MCPError",
    "MCPServerNotAuthorized",
    "MCPToolNameError",
    "ServerAuthorizer",
    "ServerSpec",
    "Unavailable",
    "approve",
    "parse_servers",
]

type ServerAuthorizer = Callable[[Mapping[str, Any]], bool | Allow | Deny | Awaitable[bool | Allow | Deny]]
"""Asked about each server descriptor before it is started or dialed: `True` / `Allow()` lets it
run, `False` / `Deny(reason)` refuses the import. It may be async; one that raises, gives another
answer, or does not answer within 30 s refuses."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_STDIO_KEYS = frozenset({"name", "type", "command", "args", "env", "cwd", "tool_prefix"})
_HTTP_KEYS = frozenset({"name", "type", "url", "headers", "headers_env", "bearer_token_env", "tool_prefix"})


class MCPError(ImpError):
    """Root of the errors of an MCP import."""


class InvalidMCPServer(MCPError, ValueError):
    """A descriptor that is not a server: it names the descriptor's position and what is wrong."""

    def __init__(self, index: int, problem: str) -> None:
        self.index = index
        self.problem = problem
        super().__init__(f"MCP server {index}: {problem}")


class MCPServerNotAuthorized(MCPError):
    """A descriptor that is neither trusted nor allowed by `authorize`; nothing was started."""

    def __init__(self, server: str, index: int, reason: str) -> None:
        self.server = server
        self.index = index
        self.reason = reason
        super().__init__(f"the MCP server `{server}` (index {index}) is not authorized: {reason}")


@dataclass(frozen=True, slots=True)
class Unavailable:
    """A server that could not be imported: its name, its index among the descriptors, and why."""

    server: str
    index: int
    reason: str


class MCPEnvironmentError(MCPError, RuntimeError):
    """A header's environment variable is not set: the server is not dialled (`variable` names it)."""

    def __init__(self, message: str, *, variable: str) -> None:
        self.variable = variable
        super().__init__(message)


class MCPConnectionError(MCPError):
    """One or more servers failed to start, initialize or list their tools (`on_failure="refuse"`)."""

    def __init__(self, failures: Sequence[Unavailable]) -> None:
        self.failures: tuple[Unavailable, ...] = tuple(failures)
        said = "; ".join(f"`{f.server}`: {f.reason}" for f in self.failures)
        super().__init__(f"MCP servers could not be imported: {said}")


class MCPToolNameError(MCPError):
    """A tool name imp cannot offer: two servers publish it, it is reserved, or it is not a valid name.

    imp never renames a tool to make it fit; give the servers a `tool_prefix` (or `prefix=`).
    """

    def __init__(self, tool: str, servers: Sequence[str], problem: str) -> None:
        self.tool = tool
        self.servers: tuple[str, ...] = tuple(servers)
        super().__init__(problem)


@dataclass(frozen=True, slots=True)
class ServerSpec:
    """One checked descriptor (`raw` is the descriptor as given, for the gate)."""

    index: int
    name: str
    transport: Literal["stdio", "http"]
    raw: Mapping[str, Any]
    command: str = ""
    args: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    url: str = ""
    headers: Mapping[str, str] = field(default_factory=dict)
    headers_env: Mapping[str, str] = field(default_factory=dict)
    """Header name -> the environment variable holding its value (read when connecting, never saved)."""
    bearer_token_env: str | None = None
    """The environment variable holding the `Authorization: Bearer` token."""
    tool_prefix: str | None = None

    def http_headers(self) -> tuple[dict[str, str], tuple[str, ...]]:
        """The headers to send, with the values read from the environment; and those values (secrets)."""
        headers = dict(self.headers)
        secrets: list[str] = []
        wanted = dict(self.headers_env)
        if self.bearer_token_env:
            wanted["Authorization"] = self.bearer_token_env
        for header, variable in wanted.items():
            value = os.environ.get(variable)
            if not value:
                raise MCPEnvironmentError(
                    f"the environment variable {variable} (for the {header} header of `{self.name}`) is not set",
                    variable=variable,
                )
            if header == "Authorization" and variable == self.bearer_token_env:
                value = f"Bearer {value}"
            headers[header] = value
            secrets.append(value)
        return headers, tuple(secrets)


def _strings(index: int, value: object, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise InvalidMCPServer(index, f"`{what}` is a mapping of strings to strings")
    return dict(value)


def _parse(index: int, raw: object) -> ServerSpec:
    if not isinstance(raw, Mapping) or not all(isinstance(k, str) for k in raw):
        raise InvalidMCPServer(index, f"a descriptor is a mapping with string keys, got {type(raw).__name__}")
    name = raw.get("name")
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidMCPServer(index, "`name` is 1-64 letters, digits, '_' or '-'")
    kind = raw.get("type", "http" if "url" in raw and "command" not in raw else "stdio")
    if kind == "sse":
        raise InvalidMCPServer(index, "the legacy HTTP+SSE transport is not supported; use Streamable HTTP")
    if kind not in ("stdio", "http"):
        raise InvalidMCPServer(index, f"`type` is 'stdio' or 'http', got {kind!r}")
    allowed = _STDIO_KEYS if kind == "stdio" else _HTTP_KEYS
    unknown = sorted(set(raw) - allowed)
    if unknown:
        raise InvalidMCPServer(index, f"unknown keys for a {kind} server: {', '.join(unknown)}")
    prefix = raw.get("tool_prefix")
    if prefix is not None and (not isinstance(prefix, str) or not re.fullmatch(r"[A-Za-z0-9_-]{0,63}", prefix)):
        raise InvalidMCPServer(index, "`tool_prefix` is letters, digits, '_' or '-'")
    if kind == "stdio":
        command = raw.get("command")
        if not isinstance(command, str) or not command:
            raise InvalidMCPServer(index, "a stdio server needs a `command` (a non-empty string)")
        args = raw.get("args", [])
        if isinstance(args, str) or not isinstance(args, Sequence) or not all(isinstance(a, str) for a in args):
            raise InvalidMCPServer(index, "`args` is a list of strings")
        cwd = raw.get("cwd")
        if cwd is not None and not isinstance(cwd, str):
            raise InvalidMCPServer(index, "`cwd` is a string")
        env = _strings(index, raw.get("env"), "env")
        return ServerSpec(
            index, name, "stdio", raw, command=command, args=tuple(args), env=env, cwd=cwd, tool_prefix=prefix
        )
    url = raw.get("url")
    if not isinstance(url, str) or urlsplit(url).scheme not in ("http", "https") or not urlsplit(url).netloc:
        raise InvalidMCPServer(index, "an http server needs a `url` (http:// or https://)")
    headers = _strings(index, raw.get("headers"), "headers")
    headers_env = _strings(index, raw.get("headers_env"), "headers_env")
    bearer = raw.get("bearer_token_env")
    if bearer is not None and (not isinstance(bearer, str) or not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", bearer)):
        raise InvalidMCPServer(index, "`bearer_token_env` is the name of an environment variable (A-Z, 0-9, _)")
    if bearer is not None and any(h.lower() == "authorization" for h in (*headers, *headers_env)):
        raise InvalidMCPServer(index, "give the Authorization header once: `bearer_token_env` or a header, not both")
    return ServerSpec(
        index,
        name,
        "http",
        raw,
        url=url,
        headers=headers,
        headers_env=headers_env,
        bearer_token_env=bearer,
        tool_prefix=prefix,
    )


def parse_servers(servers: Sequence[Mapping[str, Any]]) -> list[ServerSpec]:
    """Check every descriptor; raise `InvalidMCPServer` for the first that is malformed."""
    if isinstance(servers, Mapping | str) or not isinstance(servers, Sequence):
        raise TypeError("servers is a list of descriptors (mappings)")
    specs = [_parse(index, raw) for index, raw in enumerate(servers)]
    seen: dict[str, int] = {}
    for spec in specs:
        if spec.name in seen:
            raise InvalidMCPServer(spec.index, f"the name `{spec.name}` is also server {seen[spec.name]}'s")
        seen[spec.name] = spec.index
    return specs


def _plain(value: object) -> object:
    if isinstance(value, Mapping):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return value


def _frozen(value: object) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({k: _frozen(v) for k, v in value.items()})
    if isinstance(value, list | tuple):
        return tuple(_frozen(v) for v in value)
    return value


async def approve(
    specs: Sequence[ServerSpec],
    trusted: Sequence[Mapping[str, Any]] | None,
    authorize: ServerAuthorizer | None,
) -> None:
    """Raise `MCPServerNotAuthorized` for the first descriptor not trusted (exactly) nor allowed."""
    if (trusted is None) == (authorize is None):
        raise TypeError("connect() takes exactly one of `trusted=` (descriptors) or `authorize=` (a function)")
    if trusted is not None:
        if isinstance(trusted, Mapping) or not isinstance(trusted, Sequence):
            raise TypeError("trusted is a list of server descriptors")
        known = [_plain(t) for t in trusted]
        for spec in specs:
            if _plain(spec.raw) not in known:
                raise MCPServerNotAuthorized(spec.name, spec.index, "its descriptor is not one of the trusted ones")
        return
    assert authorize is not None
    for spec in specs:
        reason = await _ask(authorize, spec)
        if reason is not None:
            raise MCPServerNotAuthorized(spec.name, spec.index, reason)


async def _ask(authorize: ServerAuthorizer, spec: ServerSpec) -> str | None:
    answer: object = None
    with anyio.move_on_after(DEFAULT_AUTHORIZE_TIMEOUT) as scope:
        try:
            answer = authorize(_frozen(spec.raw))
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as exc:
            return f"authorization failed: {str(exc) or type(exc).__name__}"
    if scope.cancelled_caught:
        return f"authorization did not answer within {DEFAULT_AUTHORIZE_TIMEOUT:g} s"
    if answer is True or isinstance(answer, Allow):
        return None
    if answer is False:
        return "authorization denied it"
    if isinstance(answer, Deny):
        return answer.reason.strip() or "authorization denied it"
    return f"authorization gave no valid answer (got {type(answer).__name__})"
