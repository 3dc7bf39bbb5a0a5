"""The hook a durable run reaches the layers below through: asked at each LM request and each tool call.

A journal (`imp.SQLiteJournal`, `imp.dbos`) lives above the programs it records, in `imp/durable/`.
The layers that send requests and run tools never import it: they read the journal scope of the
current task from this context variable and, when one is set, let it answer (a recorded step) or
record what happened (a live one). Nothing is set by default, and then a request or a tool call
costs one context-variable read more.

A scope is one position in a run's tree of steps: a call's LM requests and nested calls take the
next number of its scope, in order; a tool call is keyed by the request that made it and its call
id; an item of `imp.parallel` (a row of `imp.evaluate`) by its index. So a step's key is the same
in every process that runs the same program on the same inputs.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, Protocol

# The LM and its response are named loosely here: runtime/ sits below models/, which imports it.
LM = Any
LMResponse = Any

if TYPE_CHECKING:
    from imp.prediction import Prediction
    from imp.records import Message, ToolCall, ToolResult

__all__ = ["Journal", "JournalScope", "SessionStore", "current_journal_scope", "idempotency_key", "journal_position"]


class Journal(Protocol):
    """Where a run's steps are kept (`imp.SQLiteJournal`, `imp.dbos.DBOSJournal`): `imp.call` hands it the run."""

    async def run(
        self, run_id: str, program: str, inputs: Mapping[str, Any], body: Callable[[], Awaitable[Any]]
    ) -> Any:
        """Run `body` as the run `run_id` (`program` names what runs; `inputs` are what it was given):
        recorded steps answered from the journal, the others run and recorded."""
        ...

    async def resume(
        self,
        run_id: str,
        program: str,
        pending: object,
        decisions: object,
        body: Callable[[Any], Awaitable[Any]],
    ) -> Any:
        """Resume the run `run_id`, paused awaiting approval, with `decisions`: `body(pending_turn)` runs
        the program on from the run's kept pending turn (or `pending`, the `imp.Pending` given, checked
        to be it), its steps recorded as the run's next segment; the same decisions again replay it."""
        ...


class SessionStore(Protocol):
    """Where conversations are kept by id (`imp.SQLiteSessions`): `imp.call` hands it the turn."""

    async def run(
        self,
        session_id: str,
        program: Any,
        inputs: dict[str, Any],
        turn: Callable[[dict[str, Any]], Awaitable[Prediction]],
        *,
        resumed: bool = False,
    ) -> Prediction:
        """Run one turn of the session: `turn(inputs)` with the session's history as the program's
        history input, then keep the history with the new turn added. A `resumed` turn (one that
        paused awaiting approval) holds its history already: it is run as it is, and kept as it ends."""
        ...


class JournalScope(Protocol):
    """One position in a journaled run: what the request and tool layers ask when a run is recorded."""

    @property
    def idempotency_key(self) -> str:
        """The run id and this scope's step key: the same in every process that reaches this step."""
        ...

    def child(self, label: str | None = None) -> JournalScope:
        """The scope of a nested call: the next number of this scope, or `label` (an item's index)."""
        ...

    async def exchange(
        self,
        lm: LM,
        messages: Sequence[Message],
        options: Mapping[str, Any],
        send: Callable[[LM], Awaitable[LMResponse]],
    ) -> LMResponse:
        """One LM request: `send(lm)` sends it live; a recorded one is answered from the journal
        (`send` is given an LM that answers with the recorded response, so a stream still streams)."""
        ...

    async def tool_call(
        self, index: int, call: ToolCall, run: Callable[[], Awaitable[ToolResult | None]]
    ) -> ToolResult | None:
        """The call at `index` of the newest request: its recorded result, or `run()` (in this call's
        own scope, `tool_scope`) recorded when it gives one (None: it ended without a result to keep)."""
        ...

    def tool_scope(self, index: int, call: ToolCall) -> JournalScope:
        """The scope a tool call runs in (its idempotency key; the calls it makes)."""
        ...


current_journal_scope: ContextVar[JournalScope | None] = ContextVar("imp_journal_scope", default=None)
"""The journal scope of the current task (inherited by the tasks it starts); None when unrecorded."""


def idempotency_key() -> str | None:
    """The key a tool passes on to deduplicate its side effect: the run id and the call's step, the same
    when a resumed run runs a call again that was running at a crash. None outside a journaled run."""
    scope = current_journal_scope.get()
    return None if scope is None else scope.idempotency_key


@contextmanager
def journal_position(label: str | None = None) -> Iterator[None]:
    """Run the block at a position of its own in a journaled run: the next number of the current
    scope, or `label` (for work started concurrently, whose order of starting may vary). Nothing
    outside a journaled run."""
    scope = current_journal_scope.get()
    if scope is None:
        yield
        return
    token = current_journal_scope.set(scope.child(label))
    try:
        yield
    finally:
        current_journal_scope.reset(token)
