"""A journaled run's positions: each scope numbers its requests and nested calls, and keys its tool calls.

One `RunLog` holds what a run recorded (read once when the run starts) and writes each new step as
it completes. A `Scope` is one place in the run: the run itself, a nested call, an item of
`imp.parallel`, a tool call. The keys they give are the same in every process that runs the same
program on the same inputs, so a resumed run finds each recorded step where the first run put it.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol

from imp.durable._records import (
    call_digest,
    differences,
    dump_response,
    dump_tool_result,
    load_response,
    load_tool_result,
    request_digest,
)
from imp.durable._run_lock import Held, busy
from imp.errors import JournalBusy, JournalMismatch
from imp.models.base import LM, LMResponse
from imp.records import Message, ToolCall, ToolResult

__all__ = ["FORKED", "Recorded", "ReplayLM", "RunLog", "Scope", "StepWriter", "one_call"]


FORKED = "forked"
"""The digest of a step copied by `journal.fork`: replayed as it is, the request not compared."""


@dataclass(frozen=True, slots=True)
class Recorded:
    """One recorded step: its number in the run, kind, digest and body (JSON-ready)."""

    seq: int
    kind: str
    digest: Any
    body: Any


class StepWriter(Protocol):
    """Where a run's new steps go (the SQLite file, DBOS steps)."""

    async def record_step(
        self,
        run_id: str,
        seq: int,
        key: str,
        kind: str,
        digest: object,
        produce: Callable[[], Awaitable[object]],
    ) -> object:
        """Run `produce()` (the live step; it returns the body to keep, or None to keep nothing) and
        record its body, committed before this returns; return the body."""
        ...


@dataclass(slots=True)
class RunLog:
    """What one run recorded, and the count of steps answered from it."""

    run_id: str
    writer: StepWriter
    steps: dict[str, Recorded] = field(default_factory=dict)
    next_seq: int = 1
    replayed: int = 0
    digests: dict[str, str] = field(default_factory=dict)
    """Each message's digest by its text, for the run's requests (which repeat earlier messages)."""

    async def record(self, key: str, kind: str, digest: object, produce: Callable[[], Awaitable[object]]) -> None:
        seq = self.next_seq
        self.next_seq += 1
        body = await self.writer.record_step(self.run_id, seq, key, kind, digest, produce)
        if body is not None:
            self.steps[key] = Recorded(seq, kind, digest, body)

    def mismatch(self, key: str, recorded: Recorded, what: str) -> JournalMismatch:
        return JournalMismatch(
            f"run {self.run_id!r}, step {key} (#{recorded.seq} in the journal): {what} no longer "
            f"matches the journal, so the run is not continued on a mix of old and new steps. The program, "
            f"its instructions or its inputs changed since the step was recorded; continue from the step "
            f"before it with journal.fork({self.run_id!r}, new_run_id, before={recorded.seq}), or start a new run id",
            run_id=self.run_id,
            step=key,
            seq=recorded.seq,
        )


class ReplayLM(LM):
    """An LM that answers one request with a recorded response (the live LM's name and capabilities)."""

    def __init__(self, live: LM, response: LMResponse) -> None:
        self.provider = live.provider
        self.model = live.model
        self.capabilities = live.capabilities
        self._response = response

    async def request(self, messages: Sequence[Message], **options: object) -> LMResponse:
        return self._response


class Scope:
    """One position in a journaled run (implements `imp.runtime.journal.JournalScope`)."""

    __slots__ = ("count", "last", "log", "path")

    def __init__(self, log: RunLog, path: str) -> None:
        self.log = log
        self.path = path
        self.count = 0
        self.last = 0

    @property
    def idempotency_key(self) -> str:
        return f"{self.log.run_id}:{self.path}"

    def _key(self, label: str) -> str:
        return f"{self.path}/{label}" if self.path else label

    def child(self, label: str | None = None) -> Scope:
        if label is None:
            self.count += 1
            label = str(self.count)
        return Scope(self.log, self._key(label))

    async def exchange(
        self,
        lm: LM,
        messages: Sequence[Message],
        options: Mapping[str, Any],
        send: Callable[[LM], Awaitable[LMResponse]],
    ) -> LMResponse:
        self.count += 1
        self.last = self.count
        key = self._key(str(self.count))
        log = self.log
        digest = request_digest(lm, messages, options, log.digests)
        recorded = log.steps.get(key)
        if recorded is not None:
            if recorded.kind != "lm":
                raise log.mismatch(key, recorded, f"an LM request where a {recorded.kind} step was recorded:")
            old = recorded.digest if isinstance(recorded.digest, Mapping) else {}
            if recorded.digest != FORKED and old.get("all") != digest["all"]:
                raise log.mismatch(key, recorded, f"the LM request (it differs in {differences(old, digest)})")
            log.replayed += 1
            return await send(ReplayLM(lm, load_response(recorded.body)))
        sent: list[LMResponse] = []

        async def produce() -> object:
            response = await send(lm)
            sent.append(response)
            return dump_response(response)

        await log.record(key, "lm", digest, produce)
        return sent[0]

    def _tool_key(self, index: int, call: ToolCall) -> str:
        return self._key(f"{self.last}.{index}:{call.id}")

    async def tool_call(
        self, index: int, call: ToolCall, run: Callable[[], Awaitable[ToolResult | None]]
    ) -> ToolResult | None:
        key = self._tool_key(index, call)
        log = self.log
        recorded = log.steps.get(key)
        if recorded is not None:
            if recorded.kind != "tool" or recorded.digest not in (FORKED, call_digest(call)):
                raise log.mismatch(key, recorded, f"tool call {call.name!r} (its name or arguments)")
            log.replayed += 1
            return load_tool_result(recorded.body)
        ran: list[ToolResult | None] = []

        async def produce() -> object:
            result = await run()
            ran.append(result)
            return None if result is None else dump_tool_result(result)

        await log.record(key, "tool", call_digest(call), produce)
        return ran[0]

    def tool_scope(self, index: int, call: ToolCall) -> Scope:
        return Scope(self.log, self._tool_key(index, call))


_in_flight: set[tuple[str, str]] = set()
"""The (kind and file, id) of each journaled call and session turn running in this process."""
_in_flight_lock = threading.Lock()


@contextmanager
def one_call(journal: str, run_id: str, kind: Held = "run") -> Iterator[None]:
    """One call of a run (or one turn of a session) at a time in this process: a second at once (a
    request posted twice) would run again what is not recorded yet. Across processes, `_run_lock`."""
    key = (f"{kind}:{journal}", run_id)
    with _in_flight_lock:
        if key in _in_flight:
            raise JournalBusy(busy(kind, run_id, "in this process already"), kind=kind, key=run_id)
        _in_flight.add(key)
    try:
        yield
    finally:
        with _in_flight_lock:
            _in_flight.discard(key)
