"""The ACP agent: sessions that run an imp program per prompt, streamed as session updates."""

from __future__ import annotations

import inspect
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

import acp
import anyio
from acp import schema
from anyio.abc import TaskGroup

from imp._version import version
from imp.acp._mcp import MCPApproval, open_servers
from imp.errors import AdapterParseError, ContentFiltered, ImpError
from imp.history import History
from imp.prediction import Prediction
from imp.programs.base import Program
from imp.programs.pending import Pending, PendingCall
from imp.programs.react import ReAct
from imp.programs.stream import StreamPart, stream
from imp.records import Step, ToolCall, ToolResult
from imp.tools import Allow, Deny, ExecutionCancelled, Tool
from imp.tools.authorization import AuthorizationRequest

__all__ = ["PermissionPolicy", "SessionContext", "SessionStore", "serve"]

Verdict = Literal["allow", "deny", "ask"]
PermissionPolicy = Literal["client", "allow"] | Callable[[AuthorizationRequest], Verdict | Awaitable[Verdict]]
"""`"client"` asks the client before each tool call; `"allow"` runs them; a function answers
`"allow"`, `"deny"` or `"ask"` (ask the client) per call."""

StopReason = Literal["end_turn", "max_tokens", "max_turn_requests", "refusal", "cancelled"]
_OPTIONS = [
    schema.PermissionOption(option_id="allow_once", name="Allow once", kind="allow_once"),
    schema.PermissionOption(option_id="allow_always", name="Allow always", kind="allow_always"),
    schema.PermissionOption(option_id="reject_once", name="Reject once", kind="reject_once"),
    schema.PermissionOption(option_id="reject_always", name="Reject always", kind="reject_always"),
]
_KINDS = frozenset({"read", "edit", "delete", "move", "search", "execute", "think", "fetch", "other"})


@dataclass(frozen=True, slots=True)
class SessionContext:
    """What a program factory is told about a new session: its working directory and MCP servers."""

    session_id: str
    cwd: str
    mcp_servers: tuple[Any, ...] = ()
    """The servers as the editor listed them (ACP's records)."""
    tools: tuple[Tool, ...] = ()
    """The listed servers' tools, connected through `imp.mcp` when `serve` was given `mcp=` approval."""


class SessionStore(Protocol):
    """Where sessions' histories are kept between processes (enables `session/load`)."""

    def save(self, session_id: str, history: Mapping[str, object]) -> None: ...

    def load(self, session_id: str) -> Mapping[str, Any] | None: ...


@dataclass
class _Session:
    context: SessionContext
    program: Program
    history: History | None = None
    always: dict[str, bool] = field(default_factory=dict)
    """Tool name -> allowed (True) or rejected (False) for the rest of the session."""
    scope: anyio.CancelScope | None = None
    closed: anyio.Event = field(default_factory=anyio.Event)
    """Set when the session ends: its MCP servers are closed."""
    ended: anyio.Event | None = None
    """Set once its MCP servers are shut down (None when it has none)."""

    async def close(self) -> None:
        """End the session: its running turn is cancelled and its MCP servers shut down (waited for)."""
        if self.scope is not None:
            self.scope.cancel()
        await _end_servers(self.closed, self.ended)


async def _end_servers(closed: anyio.Event, ended: anyio.Event | None) -> None:
    closed.set()
    if ended is not None:
        with anyio.move_on_after(_CLOSE_SECONDS, shield=True):
            await ended.wait()


_CLOSE_SECONDS = 10.0
"""How long closing a session waits for its MCP servers to end (imp.mcp stops each within its grace)."""


Factory = Callable[[SessionContext], Program | Awaitable[Program]]


class ImpAgent:
    """An `acp.Agent`: each session is a program from the factory; each prompt is one streamed call."""

    def __init__(
        self,
        factory: Factory,
        *,
        input_key: str | None,
        output_key: str | None,
        permission_policy: PermissionPolicy,
        store: SessionStore | None,
        mcp: MCPApproval | None = None,
        group: TaskGroup | None = None,
    ) -> None:
        self._factory = factory
        self._input_key = input_key
        self._output_key = output_key
        self._policy = permission_policy
        self._store = store
        self._mcp = mcp
        self._group = group
        self._sessions: dict[str, _Session] = {}
        self._conn: Any = None

    def on_connect(self, conn: object) -> None:
        self._conn = conn

    async def initialize(self, protocol_version: int, **_: object) -> schema.InitializeResponse:
        return schema.InitializeResponse(
            protocol_version=acp.PROTOCOL_VERSION,
            agent_capabilities=schema.AgentCapabilities(
                load_session=self._store is not None,
                session_capabilities=schema.SessionCapabilities(close=schema.SessionCloseCapabilities()),
            ),
            agent_info=schema.Implementation(name="imp", version=version()),
        )

    async def _open(self, session_id: str, cwd: str, mcp_servers: Any) -> _Session:
        servers = tuple(mcp_servers or ())
        closed = anyio.Event()
        ended: anyio.Event | None = None
        tools: tuple[Tool, ...] = ()
        if servers and self._mcp is not None and self._group is not None:
            ended = anyio.Event()
            try:
                tools = tuple(await open_servers(self._group, servers, self._mcp, closed, ended))
            except ImpError as exc:
                raise acp.RequestError.invalid_params({"detail": f"the session's MCP servers: {exc}"}) from None
        context = SessionContext(session_id, cwd, servers, tools)
        try:
            program = await self._program(context)
        except BaseException:
            await _end_servers(closed, ended)  # no server outlives a factory that failed
            raise
        session = _Session(context, program, closed=closed, ended=ended)
        previous = self._sessions.pop(session_id, None)
        if previous is not None:  # loaded again: the old servers end, the new ones serve
            await previous.close()
        self._sessions[session_id] = session
        return session

    async def _program(self, context: SessionContext) -> Program:
        program = self._factory(context)
        if inspect.isawaitable(program):
            program = await program
        if not isinstance(program, Program):
            raise acp.RequestError.internal_error({"detail": "the factory did not return an imp program"})
        signature = program.signature
        if self._input_key is not None and self._input_key not in signature.inputs:
            detail = f"the program has no input {self._input_key!r} (input_key); its inputs: {list(signature.inputs)}"
            raise acp.RequestError.invalid_params({"detail": detail})
        if self._output_key is not None and self._output_key not in signature.outputs:
            detail = (
                f"the program has no output {self._output_key!r} (output_key); its outputs: {list(signature.outputs)}"
            )
            raise acp.RequestError.invalid_params({"detail": detail})
        return program

    async def close_session(self, session_id: str, **_: object) -> schema.CloseSessionResponse:
        """`session/close`: cancel its turn, end its MCP servers, forget it."""
        session = self._sessions.pop(session_id, None)
        if session is None:
            raise acp.RequestError.invalid_params({"sessionId": session_id, "detail": "no such session"})
        await session.close()
        return schema.CloseSessionResponse()

    async def aclose(self) -> None:
        """End every session (the agent is stopping): each one's MCP servers end with it."""
        sessions, self._sessions = list(self._sessions.values()), {}
        for session in sessions:
            await session.close()

    async def new_session(self, cwd: str, mcp_servers: object = None, **_: object) -> schema.NewSessionResponse:
        session_id = uuid.uuid4().hex
        await self._open(session_id, cwd, mcp_servers)
        return schema.NewSessionResponse(session_id=session_id)

    async def load_session(
        self, cwd: str, session_id: str, mcp_servers: object = None, **_: object
    ) -> schema.LoadSessionResponse | None:
        saved = self._store.load(session_id) if self._store is not None else None
        if saved is None:
            raise acp.RequestError.invalid_params({"sessionId": session_id, "detail": "no such session"})
        session = await self._open(session_id, cwd, mcp_servers)
        session.history = History.load(saved)
        input_key, output_key = self._keys(session.program)
        for step in session.history:  # the conversation replayed: each turn's prompt and answer
            asked, answered = step.get(input_key), step.get(output_key)
            if isinstance(asked, str) and asked:
                await self._update(session_id, acp.update_user_message_text(asked))
            if isinstance(answered, str) and answered:
                await self._update(session_id, acp.update_agent_message_text(answered))
        return schema.LoadSessionResponse()

    def _keys(self, program: Program) -> tuple[str, str]:
        """The input the prompt's text goes to and the output streamed as the agent's message."""
        signature = program.signature
        input_key = self._input_key or next(n for n in signature.inputs if n != signature.history_field)
        return input_key, self._output_key or next(iter(signature.outputs))

    async def cancel(self, session_id: str, **_: object) -> None:
        session = self._sessions.get(session_id)
        if session is not None and session.scope is not None:
            session.scope.cancel()

    async def prompt(self, session_id: str, prompt: list[Any], **_: object) -> schema.PromptResponse:
        session = self._sessions.get(session_id)
        if session is None:
            raise acp.RequestError.invalid_params({"sessionId": session_id, "detail": "no such session"})
        text = "\n".join(block.text for block in prompt if getattr(block, "type", None) == "text")
        signature = session.program.signature
        input_key, output_key = self._keys(session.program)
        inputs: dict[str, Any] = {input_key: text}
        history_key = signature.history_field or ("history" if isinstance(session.program, ReAct) else None)
        if history_key is not None and session.history is not None:
            inputs[history_key] = session.history
        stop: StopReason = "cancelled"
        seen = _Seen(input_key, text)
        with anyio.CancelScope() as scope:
            session.scope = scope
            try:
                stop = await self._turn(session, inputs, output_key, seen)
            except ContentFiltered:
                stop = "refusal"
            except AdapterParseError as exc:
                if exc.finish_reason != "length":
                    raise
                stop = "max_tokens"  # the reply was cut at max_tokens before its answer
            except ExecutionCancelled:
                stop = "cancelled"
            finally:
                session.scope = None
        if scope.cancelled_caught or stop == "cancelled":
            stop = "cancelled"
            session.history = seen.history(session.history)  # the history keeps what happened
        return schema.PromptResponse(stop_reason=stop)

    async def _turn(self, session: _Session, inputs: dict[str, Any], output_key: str, seen: _Seen) -> StopReason:
        session_id = session.context.session_id
        tail = ""  # the message text streamed since the last tool result
        prediction: Prediction | None = None
        authorize = self._authorizer(session)
        parts = stream(session.program, inputs, authorize=authorize)
        while True:
            prediction, pending, tail = await self._show(session, parts, output_key, seen, tail)
            if pending is None:
                break
            # A call that waits for approval: the editor's permission request is the decision.
            decisions: dict[str, object] = {c.id: await self._decide(session, c) for c in pending.calls}
            parts = stream(session.program, resume=pending, decisions=decisions, authorize=authorize)
        assert prediction is not None
        history = prediction.metadata.history
        if history is not None:
            session.history = history
            if self._store is not None:
                self._store.save(session_id, history.dump())
        answer = prediction.get(output_key)
        if isinstance(answer, str) and answer and answer.strip() != tail.strip():  # e.g. given by a submit tool
            await self._update(session_id, acp.update_agent_message_text(answer))
        usage = prediction.metadata.usage
        used = usage.input_tokens + usage.output_tokens if usage is not None else 0
        if used:
            await self._update(session_id, schema.UsageUpdate(session_update="usage_update", used=used, size=used))
        return _stop_reason(prediction)

    async def _show(
        self, session: _Session, parts: AsyncIterator[StreamPart], output_key: str, seen: _Seen, tail: str
    ) -> tuple[Prediction | None, Pending | None, str]:
        """Send one stream's parts to the editor: (the prediction, the pending turn when it paused, the message tail)."""
        session_id = session.context.session_id
        prediction: Prediction | None = None
        pending: Pending | None = None
        # The answer streams into the message only when one predictor writes it; a composite
        # (a draft and a review both writing `answer`) would show each writer's text in turn, so
        # there every predictor's text is a thought and the final answer is sent once at the end.
        writers = [
            p for p in session.program.parameters().predictors if output_key in p.signature.outputs and p.takes_demos
        ]
        live_answer = len(writers) <= 1
        async for part in parts:
            if part.kind == "field" and part.field == output_key and live_answer:
                tail += part.delta
                await self._update(session_id, acp.update_agent_message_text(part.delta))
            elif part.kind in ("field", "reasoning"):
                await self._update(session_id, acp.update_agent_thought_text(part.delta))
            elif part.kind == "tool_call" and part.tool_call_id:
                arguments = part.arguments if isinstance(part.arguments, Mapping) else {}
                if any(c.id == part.tool_call_id for c in seen.calls):  # a decided call runs: the editor knows it
                    update = acp.update_tool_call(part.tool_call_id, status="in_progress", raw_input=part.arguments)
                    await self._update(session_id, update)
                    continue
                seen.calls.append(ToolCall(part.tool_call_id, part.tool_name or "tool", arguments))
                tool = _tool_of(session.program, part.tool_name)
                await self._update(
                    session_id,
                    acp.start_tool_call(
                        part.tool_call_id,
                        part.tool_name or "tool",
                        kind=_kind(tool),
                        status="in_progress",
                        raw_input=part.arguments,
                    ),
                )
            elif part.kind == "tool_result" and part.outcome == "deferred" and part.tool_call_id:
                await self._update(session_id, acp.update_tool_call(part.tool_call_id, status="pending"))
            elif part.kind == "tool_result" and part.tool_call_id:
                tail = ""
                seen.results[part.tool_call_id] = ToolResult(
                    part.tool_call_id, part.tool_name or "tool", part.output, part.outcome or "unknown", part.error
                )
                failed = part.error is not None or part.outcome != "result"
                shown = part.error if part.error is not None else _text(part.output)
                await self._update(
                    session_id,
                    acp.update_tool_call(
                        part.tool_call_id,
                        status="failed" if failed else "completed",
                        content=[acp.tool_content(acp.text_block(str(shown)))],
                        raw_output=part.output if not failed else {"error": part.error},
                    ),
                )
            elif part.kind == "final":
                prediction = part.prediction
            elif part.kind == "pending":
                prediction, pending = part.prediction, part.pending
        return prediction, pending, tail

    async def _decide(self, session: _Session, call: PendingCall) -> Allow | Deny:
        """A waiting call's decision: the editor's answer to a permission request (an "always" answer
        for its tool is remembered for the session)."""
        remembered = session.always.get(call.tool)
        if remembered is not None:
            return Allow() if remembered else Deny("the user rejected this tool for the session")
        tool = _tool_of(session.program, call.tool)
        description = tool.description[:1000] if tool is not None else ""
        request = AuthorizationRequest(call.id, call.tool, call.arguments, description)
        return await self._ask(session, request)

    def _authorizer(self, session: _Session) -> Callable[[AuthorizationRequest], Awaitable[Allow | Deny]]:
        async def authorize(request: AuthorizationRequest) -> Allow | Deny:
            verdict: Verdict
            if self._policy == "allow":
                return Allow()
            if self._policy == "client":
                verdict = "ask"
            else:
                answer = self._policy(request)
                verdict = await answer if inspect.isawaitable(answer) else answer
            if verdict == "allow":
                return Allow()
            if verdict == "deny":
                return Deny("the agent's policy refused this call")
            remembered = session.always.get(request.tool_name)
            if remembered is not None:
                return Allow() if remembered else Deny("the user rejected this tool for the session")
            return await self._ask(session, request)

        return authorize

    async def _ask(self, session: _Session, request: AuthorizationRequest) -> Allow | Deny:
        tool = _tool_of(session.program, request.tool_name)
        call = schema.ToolCallUpdate(
            tool_call_id=request.tool_call_id,
            title=request.tool_name,
            kind=_kind(tool),
            status="pending",
            raw_input=dict(request.arguments),
        )
        response = await self._conn.request_permission(
            session_id=session.context.session_id, tool_call=call, options=_OPTIONS
        )
        outcome = response.outcome
        if isinstance(outcome, schema.DeniedOutcome):  # the client cancelled the request: end the turn
            if session.scope is not None:
                session.scope.cancel()
            return Deny("the permission request was cancelled")
        chosen = outcome.option_id
        if chosen.endswith("_always"):
            session.always[request.tool_name] = chosen.startswith("allow")
        if chosen.startswith("allow"):
            return Allow()
        return Deny("the user rejected this call")

    async def _update(self, session_id: str, update: object) -> None:
        await self._conn.session_update(session_id=session_id, update=update)


@dataclass
class _Seen:
    """What a turn did so far, kept in the session's history when the turn is cancelled."""

    input_key: str
    prompt: str
    calls: list[ToolCall] = field(default_factory=list)
    results: dict[str, ToolResult] = field(default_factory=dict)

    def history(self, before: History | None) -> History:
        """The history before the turn plus one step: the prompt and each call, unfinished ones cancelled."""
        results = [
            self.results.get(c.id) or ToolResult(c.id, c.name, None, "unknown", "cancelled: the turn was cancelled")
            for c in self.calls
        ]
        step = Step(
            fields={self.input_key: self.prompt},
            tool_calls=tuple(self.calls),
            results=tuple(results) if self.calls else None,
        )
        return (before or History()).append(step)


def _text(value: object) -> str:
    """A tool's output as the client shows it: text as it is, anything else as JSON."""
    if isinstance(value, str):
        return value
    import json

    return json.dumps(value, ensure_ascii=False, default=str)


def _tool_of(program: Program, name: str | None) -> Tool | None:
    tools = getattr(program, "tools", None) or ()
    found = {t.name: t for t in tools if isinstance(t, Tool)}
    return found.get(name or "")


def _kind(tool: Tool | None) -> Any:
    """The ACP tool kind: the tool's `metadata["acp_kind"]` when it names one, else "other"."""
    kind = tool.metadata.get("acp_kind") if tool is not None else None
    return kind if kind in _KINDS else "other"


def _stop_reason(prediction: Prediction) -> StopReason:
    """The ACP stop reason of a finished turn."""
    cause = prediction.metadata.termination_cause
    if cause == "max_iters":
        return "max_turn_requests"
    if prediction.metadata.finish_reason == "length":
        return "max_tokens"
    if prediction.metadata.finish_reason == "content_filter":
        return "refusal"
    return "end_turn"


async def serve(
    program_factory: Factory,
    *,
    input_key: str | None = None,
    output_key: str | None = None,
    permission_policy: PermissionPolicy = "client",
    store: SessionStore | None = None,
    mcp: MCPApproval | None = None,
) -> None:
    """Serve ACP on stdin and stdout until stdin closes: a session per `session/new`, its program from
    `program_factory(SessionContext)`; the prompt's text goes to `input_key` (default: the first input),
    `output_key` (default: the first output) is streamed as the agent's message. With `mcp`
    (`{"trusted": [...]}` or `{"authorize": fn}`, as `imp.mcp.connect` takes), the MCP servers a
    session lists are connected and their tools given to the factory as `context.tools`."""
    async with anyio.create_task_group() as group:
        agent = ImpAgent(
            program_factory,
            input_key=input_key,
            output_key=output_key,
            permission_policy=permission_policy,
            store=store,
            mcp=mcp,
            group=group,
        )
        try:
            # session/close is in the SDK's unstable set; imp serves it, so it is routed without a warning
            await acp.run_agent(agent, use_unstable_protocol=True)  # type: ignore[arg-type]  # the methods a session needs
        finally:
            with anyio.CancelScope(shield=True):
                await agent.aclose()  # stdin closed (or the server stopped): every session's MCP servers end
            group.cancel_scope.cancel()
