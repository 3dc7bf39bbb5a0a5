"""`connect`: one import of MCP servers' tools, each server's connection owned by its own task."""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import AsyncIterator, Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import anyio
from mcp import ClientSession, types

from imp._json import limits
from imp._redact import redact_text
from imp.mcp._http import HTTP_BROKEN, HTTP_STATUS_ERROR, HTTP_UNREACHABLE, http_streams
from imp.mcp._render import MCPResult, render_result
from imp.mcp._sdk import V2, cancelled_notification, error_of, unwrap, wire
from imp.mcp._servers import (
    MCPConnectionError,
    MCPToolNameError,
    ServerAuthorizer,
    ServerSpec,
    Unavailable,
    approve,
    parse_servers,
)
from imp.mcp._stdio import stdio_streams
from imp.tools.errors import ToolError
from imp.tools.schema import check_arguments, describe_problems
from imp.tools.tool import _NAME, RESERVED_TOOL_NAMES, Tool

__all__ = ["MCPTools", "connect"]

_CLIENT = types.Implementation(name="imp", version="0.1.0")


class MCPTools(list[Tool]):
    """The imported tools (a list of `imp.Tool`, in server order, then each server's order), with
    `unavailable`: the servers left out under `on_failure="drop"`, each an `Unavailable`.
    A server's `tools/list_changed` updates the list in place; `imp.react` built on it reads it each step."""

    refreshes_tools = True

    def __init__(self, tools: Iterable[Tool] = (), unavailable: Iterable[Unavailable] = ()) -> None:
        super().__init__(tools)
        self.unavailable: tuple[Unavailable, ...] = tuple(unavailable)


class _Import:
    """What every runner of one import shares: whether it is closed."""

    closed = False


class _Server:
    """One server's connection, owned by its own task for the whole import."""

    def __init__(self, spec: ServerSpec) -> None:
        self.spec = spec
        self.session: ClientSession | None = None
        self.tools: list[types.Tool] = []
        self.started = False
        self.failure = ""
        self.reason = ""
        self.pgid: int | None = None
        self.secrets: tuple[str, ...] = ()  # header values read from the environment: never shown
        self.changed = anyio.Event()  # the server sent `notifications/tools/list_changed`
        self.on_change: Callable[[], None] = lambda: None
        self.ready = anyio.Event()  # started, or failed to
        self.stop = anyio.Event()  # asked to end, or the connection ended
        self.dead = anyio.Event()  # everything of it is closed

    @property
    def name(self) -> str:
        return self.spec.name

    def end(self, reason: str) -> None:
        if not self.reason:
            self.reason = reason
        self.stop.set()

    def _streams(self, grace: float, timeout: float) -> contextlib.AbstractAsyncContextManager[Any]:
        spec = self.spec
        if spec.transport == "stdio":
            return stdio_streams(
                spec.command, spec.args, spec.env, spec.cwd, grace=grace, on_exit=self.end, on_start=self._started
            )
        headers, self.secrets = spec.http_headers()
        return http_streams(spec.url, headers, http_timeout=timeout)

    async def _message(self, message: object) -> None:
        """The session's handler for what the server sends on its own: a changed tool list."""
        if isinstance(unwrap(message), types.ToolListChangedNotification):
            self.changed.set()

    async def _refresh(self, session: ClientSession) -> None:
        """Read the tool list again after each change notice (outside the receive loop: a request
        made inside the message handler would wait for a response that loop has to deliver)."""
        while True:
            await self.changed.wait()
            self.changed = anyio.Event()
            try:
                self.tools = await _list_tools(session)
            except Exception:  # the old list stays; a call to a tool that went away is refused
                continue
            self.on_change()

    def _started(self, pgid: int) -> None:
        self.pgid = pgid

    async def run(self, *, connect_timeout: float, grace: float) -> None:
        try:
            with anyio.CancelScope(deadline=anyio.current_time() + connect_timeout) as scope:
                try:
                    async with (
                        self._streams(grace, connect_timeout) as (read, write),
                        ClientSession(read, write, client_info=_CLIENT, message_handler=self._message) as session,
                    ):
                        await session.initialize()
                        self.tools = await _list_tools(session)
                        self.session, self.started = session, True
                        scope.deadline = math.inf
                        self.ready.set()
                        async with anyio.create_task_group() as group:
                            group.start_soon(self._refresh, session)
                            await self.stop.wait()
                            group.cancel_scope.cancel()
                        self.session = None
                except Exception as exc:
                    if self.spec.transport == "stdio":
                        with anyio.move_on_after(0.5):  # the exit status says more than a broken pipe
                            await self.stop.wait()
                    described = redact_text(_describe(exc), self.secrets)
                    self.failure = self.reason or described
                    self.end(f"the connection failed: {described}")
            if scope.cancelled_caught and not self.started:
                self.failure = f"it did not start within {connect_timeout:g} s"
        finally:
            self.session = None
            if not self.started and not self.failure:
                self.failure = self.reason or "it stopped while starting"
            self.end("the connection ended")
            self.dead.set()
            self.ready.set()


async def _list_tools(session: ClientSession) -> list[types.Tool]:
    listed = await session.list_tools()
    tools = list(listed.tools)
    for _ in range(1000):
        cursor = wire(listed).get("nextCursor")
        if not cursor:
            break
        listed = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor))
        tools.extend(listed.tools)
    return tools


async def _cancel(session: ClientSession, outcome: Mapping[str, object], reason: str) -> None:
    """Tell the server a call was given up (`notifications/cancelled`), so it can stop the work.
    The 2.x SDK sends it itself when a caller gives up, so imp sends it only under 1.x."""
    request_id = outcome.get("id")
    if V2 or not isinstance(request_id, int) or "result" in outcome:
        return
    notification = cancelled_notification(request_id, reason)
    with anyio.move_on_after(2.0), contextlib.suppress(Exception):
        await session.send_notification(notification)


def _describe(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    error = error_of(exc)
    if error is not None:
        return error[1]
    return str(exc) or type(exc).__name__


class _Runner:
    """Calls one MCP tool: checks the arguments, sends one `tools/call`, and turns what came back
    (or did not) into a value or a `ToolError` with its outcome. It never retries."""

    def __init__(self, server: _Server, state: _Import, tool: str, name: str, timeout: float | None) -> None:
        self.server, self.state, self.tool, self.name, self.timeout = server, state, tool, name, timeout
        self.parameters: Mapping[str, object] = {}

    async def __call__(self, arguments: Mapping[str, object]) -> MCPResult:
        name, server = self.name, self.server
        problems = check_arguments(self.parameters, arguments)
        if problems:
            raise ToolError(f"{name} got invalid arguments: {describe_problems(problems)}.", outcome="refused")
        if self.state.closed:
            raise ToolError(f"{name} was not sent: the MCP import is closed.", outcome="not_sent")
        if self.tool not in {t.name for t in server.tools}:
            raise ToolError(
                f"{name} was not sent: the MCP server `{server.name}` no longer offers it (its tool list changed).",
                outcome="refused",
            )
        session = server.session
        if session is None or server.stop.is_set():
            why = server.reason or server.failure or "it is not connected"
            raise ToolError(
                f"{name} was not sent: the MCP server `{server.name}` is not running ({why}).", outcome="not_sent"
            )
        outcome: dict[str, object] = {}

        async def call(scope: anyio.CancelScope) -> None:
            # The SDK numbers requests from this counter as it sends (no await in between), and
            # does not tell the server when a caller gives up: imp sends `notifications/cancelled`.
            outcome["id"] = getattr(session, "_request_id", None)
            try:
                outcome["result"] = await session.call_tool(self.tool, dict(arguments))
            except Exception as exc:
                outcome["error"] = exc
            scope.cancel()

        async def watch(scope: anyio.CancelScope) -> None:
            await server.stop.wait()
            scope.cancel()

        try:
            with anyio.move_on_after(self.timeout) as timer:
                async with anyio.create_task_group() as tasks:
                    tasks.start_soon(call, tasks.cancel_scope)
                    tasks.start_soon(watch, tasks.cancel_scope)
        except anyio.get_cancelled_exc_class():
            with anyio.CancelScope(shield=True):
                await _cancel(session, outcome, "the caller cancelled the call")
            raise
        if timer.cancelled_caught and "result" not in outcome and "error" not in outcome:
            await _cancel(session, outcome, f"no answer within {self.timeout:g} s")
        try:
            return self._outcome(outcome, timer.cancelled_caught)
        except ToolError as error:
            raise ToolError(redact_text(error.message, server.secrets), outcome=error.outcome) from None

    def _outcome(self, outcome: Mapping[str, Any], timed_out: bool) -> MCPResult:
        name, server = self.name, self.server
        if "result" in outcome:
            result = wire(outcome["result"])
            rendered = render_result(result)
            size = len(rendered.text) + sum(len(image.data) for image in rendered.images)
            if size > limits().max_chars:  # a hostile server's answer must not fill the model's context or memory
                raise ToolError(
                    f"{name}'s answer is {size:,} characters, over imp's limit of {limits().max_chars:,} "
                    "(imp.ParseLimits.max_chars)",
                    outcome="result",
                )
            if result.get("isError"):
                raise ToolError(rendered.text or f"{name} reported an error.", outcome="result")
            return rendered
        if "error" in outcome:
            raise self._failure(outcome["error"])
        if timed_out:
            raise ToolError(f"{name} did not answer within {self.timeout:g} s; it may have run.", outcome="unknown")
        why = "the MCP import was closed" if self.state.closed else server.reason or "the connection ended"
        raise ToolError(
            f"{name} got no answer: the MCP server `{server.name}` stopped ({why}); it may have run.", outcome="unknown"
        )

    def _failure(self, exc: Exception) -> ToolError:
        name, server = self.name, self.server.name
        if isinstance(exc, anyio.ClosedResourceError | anyio.BrokenResourceError):
            return ToolError(f"{name} was not sent: the connection to `{server}` is closed.", outcome="not_sent")
        error = error_of(exc)
        if error is None:
            return ToolError(f"{name} failed: {_describe(exc)}", outcome="unknown")
        code, message, data = error
        if code == types.CONNECTION_CLOSED:
            why = self.server.reason or "the connection closed"
            return ToolError(
                f"{name} got no answer: the MCP server `{server}` stopped ({why}); it may have run.", outcome="unknown"
            )
        if code == HTTP_UNREACHABLE:
            return ToolError(f"{name} was not sent: `{server}` could not be reached ({message}).", outcome="not_sent")
        if code == HTTP_BROKEN:
            return ToolError(f"{name} got no answer from `{server}` ({message}); it may have run.", outcome="unknown")
        if code == HTTP_STATUS_ERROR:
            status = data.get("status") if isinstance(data, dict) else None
            if status in (401, 403):
                return ToolError(
                    f"{name} was not run: `{server}` refused the credentials (HTTP {status}).", outcome="auth_refused"
                )
            if status in (429, 503, 529):
                return ToolError(
                    f"{name} was not run: `{server}` is busy (HTTP {status}); try later.", outcome="refused"
                )
            return ToolError(
                f"{name} got no answer: `{server}` answered HTTP {status}; it may have run.", outcome="unknown"
            )
        return ToolError(f"{name} failed on the MCP server `{server}`: {message}", outcome="result")


def _prefix_of(spec: ServerSpec, prefix: bool | Mapping[str, str]) -> str:
    if spec.tool_prefix is not None:
        return spec.tool_prefix
    if isinstance(prefix, Mapping):
        return str(prefix.get(spec.name, ""))
    return f"{spec.name}_" if prefix else ""


def _build_tools(
    servers: Sequence[_Server], state: _Import, prefix: bool | Mapping[str, str], timeout: float | None
) -> list[Tool]:
    owners: dict[str, str] = {}
    tools: list[Tool] = []
    for server in servers:
        if not server.started:
            continue
        for listed in server.tools:
            name = _prefix_of(server.spec, prefix) + listed.name
            if name in owners:
                both = [owners[name], server.name]
                where = "servers" if both[0] != both[1] else "server"
                problem = f"the MCP {where} `{both[0]}` and `{both[1]}` both publish a tool named `{name}`"
                raise MCPToolNameError(name, both, problem + "; give one of them a tool_prefix")
            if name in RESERVED_TOOL_NAMES or not _NAME.match(name):
                problem = "is reserved for imp's own tool" if name in RESERVED_TOOL_NAMES else "is not a valid name"
                raise MCPToolNameError(
                    name, [server.name], f"the MCP server `{server.name}` publishes `{name}`, which {problem}"
                )
            owners[name] = server.name
            tools.append(_tool(server, state, listed, name, timeout))
    return tools


def _tool(server: _Server, state: _Import, listed: types.Tool, name: str, timeout: float | None) -> Tool:
    spelled = wire(listed)
    annotations = dict(spelled.get("annotations") or {})
    title = spelled.get("title") or annotations.get("title")
    metadata = {
        "mcp": {
            "server": server.name,
            "index": server.spec.index,
            "tool": listed.name,
            "title": title,
            "annotations": annotations,
            "output_schema": spelled.get("outputSchema"),
        }
    }
    runner = _Runner(server, state, listed.name, name, timeout)
    schema = dict(spelled.get("inputSchema") or {"type": "object"})
    try:
        made = Tool(
            name=name,
            description=spelled.get("description") or spelled.get("title") or "",
            parameters=schema,
            runner=runner,
            metadata=metadata,
            call_with="mapping",
        )
    except (TypeError, ValueError) as exc:
        raise MCPToolNameError(
            name, [server.name], f"the MCP server `{server.name}` publishes `{name}`: {exc}"
        ) from exc
    runner.parameters = made.parameters
    return made


@contextlib.asynccontextmanager
async def connect(
    servers: Sequence[Mapping[str, Any]],
    *,
    trusted: Sequence[Mapping[str, Any]] | None = None,
    authorize: ServerAuthorizer | None = None,
    on_failure: Literal["refuse", "drop"] = "refuse",
    prefix: bool | Mapping[str, str] = False,
    call_timeout: float | None = 30.0,
    connect_timeout: float = 30.0,
    kill_after: float = 2.0,
) -> AsyncIterator[MCPTools]:
    """Start (stdio) or dial (Streamable HTTP) each server, and yield their tools as `MCPTools`.

    - `servers`: descriptors, `{"name", "command", "args", "env", "cwd"}` for stdio or
      `{"name", "url", "headers"}` for Streamable HTTP (`"type"` optional), each with an
      optional `"tool_prefix"`.
    - `trusted` (descriptors that must equal a server's exactly) or `authorize` (a function of
      the descriptor): exactly one. Every server is approved before any is started.
    - `on_failure`: `"refuse"` raises `MCPConnectionError` when a server cannot start,
      initialize or list its tools; `"drop"` leaves it out, listed in `tools.unavailable`.
    - `prefix`: `True` names each tool `<server>_<tool>`, a mapping gives a prefix per server
      name; a descriptor's `tool_prefix` wins. Two servers publishing one name raise
      `MCPToolNameError`, naming both.
    - `call_timeout`: seconds for each call (None: no limit); `connect_timeout`: for each server to
      start and list its tools; `kill_after`: seconds between SIGTERM and SIGKILL at the end.

    Leaving the context closes every session and ends each stdio server's process group.
    """
    if on_failure not in ("refuse", "drop"):
        raise ValueError(f"on_failure is 'refuse' or 'drop', got {on_failure!r}")
    if not isinstance(prefix, bool | Mapping):
        raise TypeError("prefix is True, False or a mapping of server name to prefix")
    if call_timeout is not None and not call_timeout > 0:
        raise ValueError("call_timeout is a positive number of seconds or None")
    if not connect_timeout > 0 or not kill_after >= 0:
        raise ValueError("connect_timeout is a positive number of seconds, kill_after one >= 0")
    specs = parse_servers(servers)
    await approve(specs, trusted, authorize)
    state = _Import()
    running = [_Server(spec) for spec in specs]
    error: Exception | None = None
    async with anyio.create_task_group() as tasks:
        try:
            for server in running:
                tasks.start_soon(functools.partial(server.run, connect_timeout=connect_timeout, grace=kill_after))
            for server in running:
                await server.ready.wait()
            failed = [Unavailable(s.name, s.spec.index, s.failure) for s in running if not s.started]
            if failed and on_failure == "refuse":
                raise MCPConnectionError(failed)
            listed = MCPTools(_build_tools(running, state, prefix, call_timeout), failed)

            def rebuild() -> None:
                """A server changed its tools: the list becomes the new roster (kept when it collides)."""
                with contextlib.suppress(MCPToolNameError):
                    listed[:] = _build_tools(running, state, prefix, call_timeout)

            for server in running:
                server.on_change = rebuild
            yield listed
        except Exception as exc:  # raised after the task group, so it is not wrapped in a group
            error = exc
        finally:
            state.closed = True
            for server in running:
                server.end("the MCP import was closed")
    if error is not None:
        raise error
