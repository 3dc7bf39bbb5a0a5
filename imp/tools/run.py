"""Running one step's tool calls: concurrently, checked, authorized, each ending in one outcome.

Per call, in order: the `tool_call` event, name lookup, tool policy, argument decoding and the
schema check, authorization (not for imp's internal tools), then the run. The first check that
fails refuses the call. Every call ends with one `ToolResult` and a `tool_result` event; a
failure is a sentence the model reads, never an exception, except an authorizer's `Cancel`
(`ExecutionCancelled`) and the cancellation of the caller's own scope, which propagates. A call to
a `requires_approval` tool, or one the authorizer answers `Defer`, does not run: it ends
`deferred`, for the loop to pause its turn on.
"""

from __future__ import annotations

import functools
import time
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import anyio.lowlevel
import pydantic

from imp._redact import redact_text
from imp.history import ToolCall, ToolOutcome, ToolResult
from imp.runtime.journal import current_journal_scope
from imp.runtime.logging import get_logger
from imp.runtime.run import unstreamed
from imp.tools._threads import run_in_tool_thread, tool_thread_limiter
from imp.tools.authorization import (
    DEFAULT_AUTHORIZE_TIMEOUT,
    AuthorizationRequest,
    Authorizer,
    Cancel,
    Defer,
    Deny,
    ask_authorizer,
)
from imp.tools.errors import ExecutionCancelled, ToolError
from imp.tools.events import EventHandler, ToolEvent, _current_tool_call
from imp.tools.policy import ToolPolicy, check_policy, validate_policy
from imp.tools.schema import check_arguments, decode_arguments, describe_problems
from imp.tools.tool import Tool

__all__ = ["run_tool_calls"]


async def run_tool_calls(
    calls: Sequence[ToolCall],
    tools: Sequence[Tool] | Mapping[str, Tool],
    *,
    policy: ToolPolicy = "allow",
    authorize: Authorizer | None = None,
    authorize_timeout: float | None = DEFAULT_AUTHORIZE_TIMEOUT,
    on_event: EventHandler | None = None,
    limiter: anyio.CapacityLimiter | None = None,
    into: list[ToolResult] | None = None,
    approved: Collection[str] = (),
) -> list[ToolResult]:
    """Run one step's tool calls concurrently; return one `ToolResult` per call, in call order.

    - All calls run in one anyio task group. A `sequential=True` tool is a barrier: it starts
      after every call before it has ended, runs alone, and the calls after it start after it.
    - One call raising or timing out never cancels another. imp never retries a call.
    - `policy` and `authorize` decide which calls run (see `check_policy`, `ask_authorizer`);
      internal tools (`submit`) are never sent to `authorize`. `authorize_timeout` bounds
      each authorization (None waits forever).
    - Sync tools run in worker threads under `limiter` (default: `tool_thread_limiter()`).
    - `on_event` receives `ToolEvent`s: a group's `tool_call` events in call order before it
      starts, then each `tool_result` as its call ends.
    - `into`, when given, is filled with the results in call order when the step ends, also
      when it ends by cancellation, so a caller whose scope was cancelled still holds them.
    - A call to a `requires_approval` tool, or one `authorize` answers `Defer(reason)`, ends
      `deferred` without running. `approved` names calls (by id) already decided outside the run:
      they skip both and run, after the name, policy and schema checks like any call.

    An authorizer's `Cancel` records every call (finished ones keep their results, running ones
    become `unknown`, unstarted ones `not_sent`) and raises `ExecutionCancelled` with them.
    Cancelling the caller's scope cancels every running call, records them the same way and
    propagates the cancellation; no task is left behind (a sync tool's thread, which cannot be
    interrupted, finishes on its own and its value is dropped).
    """
    validate_policy(policy)
    roster = _roster(tools)
    step = _Step(
        slots=[_Slot(index, call) for index, call in enumerate(calls)],
        tools=roster,
        policy=policy,
        authorize=authorize,
        authorize_timeout=authorize_timeout,
        on_event=on_event,
        limiter=limiter,
        approved=frozenset(approved),
    )
    try:
        for group in step.groups():
            if step.cancel is not None:
                break
            for slot in group:
                step.emit_call(slot)
            async with anyio.create_task_group() as tg:
                step.scope = tg.cancel_scope
                for slot in group:
                    tg.start_soon(step.run, slot, name=f"imp tool call {slot.call.name}")
    finally:
        step.finish_unrecorded()
        if into is not None:
            into[:] = step.results()
    if step.cancel is not None:
        raise ExecutionCancelled(step.cancel.reason, tool_name=step.cancel_tool, results=step.results())
    return step.results()


def _roster(tools: Sequence[Tool] | Mapping[str, Tool]) -> dict[str, Tool]:
    items = tools.values() if isinstance(tools, Mapping) else tools
    roster: dict[str, Tool] = {}
    for item in items:
        if not isinstance(item, Tool):
            raise TypeError(f"tools must be imp Tool values, got {type(item).__name__}")
        if item.name in roster and roster[item.name] is not item:
            raise ValueError(f"two tools are named {item.name!r}")
        roster[item.name] = item
    return roster


@dataclass(slots=True)
class _Slot:
    """One call's state during a step."""

    index: int
    call: ToolCall
    result: ToolResult | None = None
    received: float | None = None
    running: bool = False


@dataclass(slots=True)
class _Step:
    """One step's calls, their tools and rules, and what has happened so far."""

    slots: list[_Slot]
    tools: dict[str, Tool]
    policy: ToolPolicy
    authorize: Authorizer | None
    authorize_timeout: float | None
    on_event: EventHandler | None
    limiter: anyio.CapacityLimiter | None
    approved: frozenset[str] = frozenset()
    cancel: Cancel | None = None
    cancel_tool: str = ""
    scope: anyio.CancelScope | None = None
    emitted: set[int] = field(default_factory=set)

    def groups(self) -> list[list[_Slot]]:
        """The calls split at each sequential tool: runs of concurrent calls, and barriers alone."""
        groups: list[list[_Slot]] = []
        current: list[_Slot] = []
        for slot in self.slots:
            known = self.tools.get(slot.call.name)
            if known is not None and known.sequential:
                if current:
                    groups.append(current)
                groups.append([slot])
                current = []
            else:
                current.append(slot)
        if current:
            groups.append(current)
        return groups

    def results(self) -> list[ToolResult]:
        return [slot.result for slot in self.slots if slot.result is not None]

    # --- events and recording -----------------------------------------------------------------

    def emit(self, event: ToolEvent) -> None:
        if self.on_event is None:
            return
        try:
            self.on_event(event)
        except Exception as exc:  # an observer never steers the step
            get_logger().warning("imp.tools.on_event_failed", kind=event.kind, error=str(exc) or type(exc).__name__)

    def emit_call(self, slot: _Slot) -> None:
        slot.received = time.monotonic()
        self.emitted.add(slot.index)
        decoded, _ = decode_arguments(slot.call.arguments)
        shown = decoded if decoded is not None else slot.call.arguments
        self.emit(ToolEvent.call(slot.index, slot.call.id, slot.call.name, shown))

    def record(self, slot: _Slot, outcome: ToolOutcome, *, result: object = None, error: str | None = None) -> None:
        if slot.result is not None:
            return
        if error:
            # The model reads this sentence (and the provider receives it): an exception's text
            # may hold a connection URL, a password pair or a key, redacted by the events' shapes.
            error = redact_text(error)
        slot.result = ToolResult(id=slot.call.id, name=slot.call.name, result=result, outcome=outcome, error=error)
        if slot.index not in self.emitted:
            self.emit_call(slot)
        duration = time.monotonic() - (slot.received or time.monotonic())
        self.emit(ToolEvent.result(slot.index, slot.result, duration))

    def record_interrupted(self, slot: _Slot) -> None:
        """Record a call the step's end caught unfinished: it may have run, or it never ran."""
        name = slot.call.name
        if self.cancel is not None:
            reason = self.cancel.reason.strip()
            why = "the execution was cancelled" + (f": {reason}" if reason else "")
        else:
            why = "the step was cancelled"
        if slot.running:
            self.record(slot, "unknown", error=f"{name} was cancelled while running ({why}); it may have run.")
        else:
            self.record(slot, "not_sent", error=f"{name} was not run; {why}.")

    def finish_unrecorded(self) -> None:
        for slot in self.slots:
            if slot.result is None:
                self.record_interrupted(slot)

    # --- one call -------------------------------------------------------------------------

    async def run(self, slot: _Slot) -> None:
        """Decide one call, then run it if it was not refused; every path records its result."""
        _current_tool_call.set(slot.call.id)  # this task runs this call alone; its context ends with it
        journal = current_journal_scope.get()
        if journal is None:
            await self._run(slot)
            return

        async def live() -> ToolResult | None:
            current_journal_scope.set(journal.tool_scope(slot.index, slot.call))
            await self._run(slot)
            return slot.result if self.cancel is None else None  # a cancelled step keeps nothing

        recorded = await journal.tool_call(slot.index, slot.call, live)
        if slot.result is None and recorded is not None:  # finished before: its result, never a second run
            self.record(slot, recorded.outcome, result=recorded.result, error=recorded.error)

    async def _run(self, slot: _Slot) -> None:
        try:
            decided = await self._decide(slot)
            if decided is not None:
                await self._execute(slot, *decided)
        except anyio.get_cancelled_exc_class():
            self.record_interrupted(slot)
            raise

    async def _decide(self, slot: _Slot) -> tuple[Tool, _Invocation] | None:
        """Whether the call runs, and how: its tool and arguments, or None once it is refused.

        Every check but the run itself: name, policy, arguments, schema, authorization.
        """
        call = slot.call
        tool = self.tools.get(call.name)
        if tool is None:
            self.record(slot, "refused", error=self._unknown_tool_sentence(call.name))
            return None
        arguments, problem = decode_arguments(call.arguments)
        checked_call = ToolCall(call.id, call.name, arguments if arguments is not None else {})
        refusal = await check_policy(self.policy, checked_call)
        if refusal is not None:
            self.record(slot, "refused", error=refusal)
            return None
        if arguments is None:
            self.record(slot, "refused", error=f"{call.name} got arguments that {problem}.")
            return None
        prepared = self._prepare(tool, arguments)
        if isinstance(prepared, str):
            self.record(slot, "refused", error=prepared)
            return None
        if tool.internal or call.id in self.approved:
            return tool, prepared
        if tool.requires_approval:
            self.record(slot, "deferred", error=f"{call.name} waits for approval.")
            return None
        if self.authorize is not None:
            request = AuthorizationRequest(
                tool_call_id=call.id,
                tool_name=call.name,
                arguments=arguments,
                description=tool.description[:1000],
                metadata=tool.metadata,
            )
            decision = await ask_authorizer(self.authorize, request, authorize_timeout=self.authorize_timeout)
            if isinstance(decision, Cancel):
                reason = decision.reason.strip()
                self.record(
                    slot,
                    "refused",
                    error=f"{call.name} was not allowed; the execution was cancelled"
                    + (f": {reason}." if reason else "."),
                )
                if self.cancel is None:
                    self.cancel, self.cancel_tool = decision, call.name
                    if self.scope is not None:
                        self.scope.cancel()
                return None
            if isinstance(decision, Deny):
                reason = decision.reason.strip() or "the person declined it"
                self.record(slot, "refused", error=f"{call.name} was not allowed; {_end(reason)}")
                return None
            if isinstance(decision, Defer):
                reason = decision.reason.strip() or "it waits for approval"
                self.record(slot, "deferred", error=f"{call.name} was deferred: {_end(reason)}")
                return None
        return tool, prepared

    def _unknown_tool_sentence(self, name: str) -> str:
        shown = name if len(name) <= 64 else name[:61] + "..."
        if not self.tools:
            return f"there is no tool named `{shown}`; no tools are available."
        names = ", ".join(f"`{n}`" for n in self.tools)
        return f"there is no tool named `{shown}`; the tools are {names}."

    def _prepare(self, tool: Tool, arguments: dict[str, Any]) -> _Invocation | str:
        """The runner's arguments, or the refusal sentence when they do not fit the schema."""
        problems = check_arguments(tool.parameters, arguments)
        if problems:
            return f"{tool.name} got invalid arguments: {describe_problems(problems)}."
        model = tool.arguments_model
        if model is not None:
            try:
                instance = model.model_validate(arguments)
            except pydantic.ValidationError as exc:
                return f"{tool.name} got invalid arguments: {_pydantic_problems(exc)}."
            values = instance.__dict__
            return _Invocation(kwargs={name: values[name] for name in type(instance).model_fields})
        if tool.call_with == "mapping":
            return _Invocation(mapping=arguments)
        properties = tool.parameters.get("properties")
        known = properties if isinstance(properties, Mapping) else {}
        return _Invocation(kwargs={key: value for key, value in arguments.items() if key in known})

    async def _execute(self, slot: _Slot, tool: Tool, invocation: _Invocation) -> None:
        name = tool.name
        slot.running = True
        value: object = None
        with anyio.move_on_after(tool.timeout) as scope:
            try:
                value = await self._invoke(tool, invocation)
            except ToolError as exc:
                self.record(slot, exc.outcome, error=exc.message or f"{name} failed.")
                return
            except Exception as exc:
                self.record(slot, "unknown", error=f"{name} failed: {_exception_text(exc)}")
                return
        if scope.cancelled_caught:
            self.record(slot, "unknown", error=f"{name} did not finish within {tool.timeout:g} s; it may have run.")
            return
        self.record(slot, "result", result=value)

    async def _invoke(self, tool: Tool, invocation: _Invocation) -> object:
        runner = tool.runner
        if invocation.mapping is not None:
            bound = functools.partial(runner, invocation.mapping)
        else:
            bound = functools.partial(runner, **invocation.kwargs)
        with unstreamed():  # a program the tool calls answers as the tool's result
            if tool.is_async:
                value = await bound()
            else:
                limiter = self.limiter if self.limiter is not None else tool_thread_limiter()
                async with limiter:
                    value = await run_in_tool_thread(bound)
        return value


@dataclass(frozen=True, slots=True)
class _Invocation:
    """How a runner is called: keyword arguments, or one mapping."""

    kwargs: Mapping[str, Any] = field(default_factory=dict)
    mapping: Mapping[str, Any] | None = None


def _pydantic_problems(exc: pydantic.ValidationError) -> str:
    parts = []
    for error in exc.errors()[:3]:
        path = ".".join(str(p) for p in error.get("loc", ()))
        message = str(error.get("msg", "is invalid"))
        parts.append(f"`{path}`: {message[0].lower() + message[1:]}" if path else message)
    return "; ".join(parts)


def _exception_text(exc: BaseException) -> str:
    text = str(exc).strip()
    return text if text else type(exc).__name__


def _end(text: str) -> str:
    return text if text.endswith((".", "!", "?")) else text + "."
