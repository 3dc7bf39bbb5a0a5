"""Programs and how they are called: `await imp.call(program, inputs)`."""

from __future__ import annotations

import abc
import dataclasses
import functools
from collections.abc import Coroutine, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar, NoReturn

import anyio

from imp._redact import redact, redact_text
from imp.errors import DeadlineExceeded
from imp.prediction import Prediction
from imp.programs._parameters import (
    Changes,
    Optimized,
    Parameters,
    changes_for,
    optimized_by,
    replace_sub_programs,
    sub_programs,
)
from imp.programs.rendered import RenderedRequest, render
from imp.runtime.budget import Budget, budget_scope
from imp.runtime.deadline import time_left
from imp.runtime.events import RunCancelled, RunFailed, RunFinished, RunStarted
from imp.runtime.journal import Journal, SessionStore, current_journal_scope
from imp.runtime.run import EventSink, run_needed, run_scope
from imp.runtime.sync import run_sync
from imp.settings import settings
from imp.signature import Signature

if TYPE_CHECKING:
    from imp.tools import Tool

__all__ = ["Program", "call", "call_sync", "start_call"]


class Program(abc.ABC):
    """Something `imp.call` can run: it has a signature and answers inputs with a Prediction."""

    signature: Signature
    handles_deadline: ClassVar[bool] = False
    """True for programs that end their own work at the deadline (react returns an incomplete turn)."""
    resumable: ClassVar[bool] = False
    """True for programs whose turn can pause awaiting approval (`imp.call(..., resume=pending)`)."""

    @abc.abstractmethod
    async def acall(self, inputs: dict[str, Any], **call_options: Any) -> Prediction:
        """Run once on these inputs (already merged into one dict)."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        # A program's repr is the dataclass's, with credentials redacted (a `config` may carry an
        # `extra_headers` key): set here, before `@dataclass` runs, which keeps a `__repr__` a class has.
        if "__repr__" not in cls.__dict__:
            cls.__repr__ = _redacted_repr  # type: ignore[method-assign]

    if not TYPE_CHECKING:  # hidden from type checkers, which would take every missing name for Any

        def __getattr__(self, name: str) -> Any:
            """Only for names that are missing: DSPy's module methods say what imp has instead."""
            instead = _DSPY_METHODS.get(name)
            if instead is None:
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            raise AttributeError(f"an imp program has no `.{name}()` (a DSPy module's method): {instead}")

    def __call__(self, *args: Any, **kwargs: Any) -> NoReturn:
        """Refused, naming the way to run it: DSPy calls a module, imp runs a program with `imp.call`."""
        given = ", ".join([*(f"{k}=..." for k in kwargs)] or [f"{n}=..." for n in self.signature.inputs])
        raise TypeError(
            f"a {type(self).__name__} program is not called directly: run it with "
            f"`imp.call_sync(program, {given})` in a script or a notebook, "
            f"or `await imp.call(program, {given})` in async code"
        )

    def render(self, inputs: Mapping[str, object] | None = None, /, **fields: object) -> RenderedRequest:
        """The exact first request (messages and options) this program would send for these inputs, not sent."""
        return render(self, {**(inputs or {}), **fields})

    # --- what an optimizer may change -----------------------------------------------------

    def parameters(self) -> Parameters:
        """Each predictor's name, instructions and demos (and a loop's tools): what an optimizer may rewrite.

        A program that holds other programs as attributes exposes theirs by attribute name
        (`"draft.predict"`), as DSPy's `named_predictors()` does.
        """
        predictors: list[Any] = []
        tools: list[Any] = []
        for name, child in _children(self):
            found = child.parameters().prefixed(name)
            predictors.extend(found.predictors)
            tools.extend(found.tools)
        return Parameters(tuple(predictors), tuple(tools))

    def with_parameters(
        self,
        *,
        instructions: Mapping[str, str] | None = None,
        demos: Mapping[str, Sequence[Mapping[str, object]]] | None = None,
        tool_descriptions: Mapping[str, str] | None = None,
        tools: Sequence[Tool] | None = None,
    ) -> Program:
        """A new program with these instructions, demos or tool descriptions, by the names `parameters()` gives.

        A tool given in `tools` must keep its name and runner: an optimizer may rewrite what the
        model reads of a tool, never what the tool does.
        """
        changes = changes_for(self.parameters(), instructions, demos, tool_descriptions, tools)
        return self.apply_parameters(changes) if changes else self

    def apply_parameters(self, changes: Changes) -> Program:
        """The program with checked changes made (a program kind with predictors of its own overrides this)."""
        changed: dict[str, Program] = {}
        for name, child in _children(self):
            mine = changes.under(name)
            if mine:
                changed[name] = child.apply_parameters(mine)
        return replace_sub_programs(self, changed)

    def predictor_programs(self) -> list[tuple[str, Program]]:
        """The programs that answer as one predictor each, by their `parameters()` name (for traces)."""
        found: list[tuple[str, Program]] = []
        for name, child in _children(self):
            found.extend((f"{name}.{inner}", p) for inner, p in child.predictor_programs())
        return found

    @property
    def optimized(self) -> Optimized | None:
        """Which optimizer made this program, with what score (None for a program no optimizer made)."""
        return optimized_by(self)


def _redacted_repr(program: object) -> str:
    """`Name(field=value, ...)` as a dataclass writes it, each value redacted as events and errors are."""
    if isinstance(program, type) or not dataclasses.is_dataclass(program):
        return object.__repr__(program)
    shown = ", ".join(f"{f.name}={_shown(getattr(program, f.name))}" for f in dataclasses.fields(program) if f.repr)
    return f"{type(program).__qualname__}({shown})"


def _shown(value: object) -> str:
    return redact_text(repr(redact(value) if isinstance(value, Mapping) else value))


def _children(program: Program) -> list[tuple[str, Program]]:
    """The programs a user's program holds, by attribute name."""
    return sub_programs(program, Program)  # type: ignore[type-abstract]  # isinstance with an ABC is what is meant


_DSPY_METHODS = {
    "forward": "run it with `imp.call_sync(program, ...)`, or `await imp.call(program, ...)` in async code",
    "aforward": "run it with `await imp.call(program, ...)`",
    "batch": "run it over many inputs with `await imp.parallel(program, inputs)`",
    "named_predictors": "`program.parameters()` lists its predictors by name",
    "predictors": "`program.parameters()` lists its predictors by name",
    "set_lm": "programs are immutable: `program.with_lm(lm)` returns one pinned to `lm`",
    "get_lm": "the LM it was given is `program.lm`; else `imp.settings().lm`",
    "save": "`imp.save(program, path)`",
    "load": "`imp.load(path)` returns the saved program",
    "dump_state": "`imp.save(program, path)` writes its state",
    "load_state": "`imp.load(path)` returns the saved program",
    "deepcopy": "programs are immutable values; use it as it is",
    "reset_copy": "programs are immutable values; use it as it is",
    "inspect_history": "`imp.inspect_history(n)` shows the last n requests",
}
"""DSPy `Module` methods a newcomer reaches for, and what an imp program offers instead."""


async def call(
    program: Program,
    inputs: Mapping[str, object] | None = None,
    /,
    *,
    authorize: object = None,
    on_event: EventSink | None = None,
    run_id: str | None = None,
    journal: Journal | None = None,
    session_id: str | None = None,
    sessions: SessionStore | None = None,
    resume: object = None,
    decisions: Mapping[str, object] | None = None,
    budget: Budget | None = None,
    **fields: Any,
) -> Prediction:
    """Run a program on inputs (a mapping, keyword fields, or both) and return its Prediction.

    `authorize(request)` is asked before each tool call (`imp.Allow()`, `imp.Deny(reason)`,
    `imp.Cancel(reason)`, `imp.Defer(reason)`); `on_event(event)` receives the run's ordered,
    redacted events. `resume=pending, decisions={call_id: ...}` continues a turn that paused
    awaiting approval (`prediction.metadata.pending`), in this process or another; a journaled run
    that paused resumes by its id alone (`run_id=..., decisions={...}`), its pending turn kept in
    the journal.
    Under `imp.deadline`, a `predict` that does not finish in time raises `imp.DeadlineExceeded`;
    a `react` turn returns what it has, incomplete. With `run_id` and a `journal`
    (`imp.SQLiteJournal`, or `imp.configure(journal=...)`) the run's LM exchanges and tool calls are
    recorded, and a second call with the same run id replays them (docs/durable.md). With
    `session_id` and `sessions` (`imp.SQLiteSessions`) the program's history input is the session's,
    and the new turn is added to it. Under `budget=imp.Budget(...)` no request or tool call that would
    pass one of its limits is made (`imp.BudgetExceeded`); nested calls share it (docs/cost.md).
    """
    if budget is not None:
        with budget_scope(budget):
            return await call(
                program,
                inputs,
                authorize=authorize,
                on_event=on_event,
                run_id=run_id,
                journal=journal,
                session_id=session_id,
                sessions=sessions,
                resume=resume,
                decisions=decisions,
                **fields,
            )
    if not isinstance(program, Program):
        raise TypeError(
            f"imp.call runs an imp program (predict, chain_of_thought, react), got {type(program).__name__}"
        )
    if inputs is not None and not isinstance(inputs, Mapping):
        raise TypeError(f"inputs are a mapping of field names to values, got {type(inputs).__name__}")
    merged = {**inputs, **fields} if inputs else fields
    options = _NO_OPTIONS if resume is None and decisions is None else _resume_options(program, resume, decisions)
    if run_id is not None or journal is not None or session_id is not None or sessions is not None:
        return await _durable_call(program, merged, authorize, on_event, run_id, journal, session_id, sessions, options)
    scope = current_journal_scope.get()
    if scope is not None:  # nested in a journaled run: this call's steps take the next position
        token = current_journal_scope.set(scope.child())
        try:
            return await _call(program, merged, authorize, on_event, options)
        finally:
            current_journal_scope.reset(token)
    if on_event is None and authorize is None and not run_needed():
        # The plain call awaits the program itself: no `_call` frame per call in flight.
        left = time_left()
        if left is None or program.handles_deadline:
            return await (program.acall(merged, **options) if options else program.acall(merged))
    return await _call(program, merged, authorize, on_event, options)


async def _durable_call(
    program: Program,
    inputs: dict[str, Any],
    authorize: object,
    on_event: EventSink | None,
    run_id: str | None,
    journal: Journal | None,
    session_id: str | None,
    sessions: SessionStore | None,
    options: Mapping[str, Any],
) -> Prediction:
    """A call with a run id (a journaled run) or a session id (a kept conversation), or both."""
    if (session_id is None) != (sessions is None):
        given, missing = (
            ("session_id", "sessions=imp.SQLiteSessions(path)") if sessions is None else ("sessions", "session_id=")
        )
        raise TypeError(f"imp.call was given {given} without {missing}: a session needs both")
    if journal is None and run_id is not None:
        journal = settings().journal
        if journal is None:
            raise TypeError(
                "imp.call was given run_id without a journal: pass journal=imp.SQLiteJournal(path), "
                "or set one with imp.configure(journal=...)"
            )
    if journal is not None and run_id is None:
        raise TypeError("imp.call was given a journal without run_id: a journaled run is named by its run_id")

    async def run_turn(given: dict[str, Any]) -> Prediction:
        if journal is None or run_id is None:
            return await _call(program, given, authorize, on_event, options)
        if options:  # a paused run resumed: by its run id, or from the pending turn given
            decisions = options["decisions"]

            async def resumed(pending: object) -> Prediction:
                return await _call(program, given, authorize, on_event, {"resume": pending, "decisions": decisions})

            result = await journal.resume(run_id, type(program).__name__, options["resume"], decisions, resumed)
        else:
            result = await journal.run(
                run_id, type(program).__name__, given, lambda: _call(program, given, authorize, on_event, options)
            )
        if not isinstance(result, Prediction):
            raise TypeError(f"{journal!r} returned {type(result).__name__} for a call, not a Prediction")
        return result

    if sessions is not None and session_id is not None:
        return await sessions.run(session_id, program, inputs, run_turn, resumed=bool(options))
    return await run_turn(inputs)


async def _call(
    program: Program,
    merged: dict[str, Any],
    authorize: object,
    on_event: EventSink | None,
    options: Mapping[str, Any],
) -> Prediction:
    if on_event is None and authorize is None and not run_needed():
        # Nothing listens and nothing authorizes: no run to open, and one coroutine frame fewer.
        left = time_left()
        if left is None or program.handles_deadline:
            return await (program.acall(merged, **options) if options else program.acall(merged))
        return await _run_until(program, merged, left, options)
    with run_scope(on_event=on_event, authorize=authorize) as run:
        if run.on_event is None:
            return await _run(program, merged, options)
        run.emit(RunStarted(type(program).__name__))
        try:
            prediction = await _run(program, merged, options)
        except anyio.get_cancelled_exc_class():
            run.emit(RunCancelled())
            raise
        except BaseException as exc:
            run.emit(RunFailed(f"{type(exc).__name__}: {exc}"))
            raise
        meta = prediction.metadata
        run.emit(RunFinished(prediction.complete, meta.termination_reason, meta.termination_cause))
        return prediction


def start_call(program: Program, inputs: Mapping[str, object]) -> Coroutine[Any, Any, Prediction]:
    """`call(program, inputs)` for a checked program and inputs, started where it will be awaited:
    the program's own `acall` coroutine when `call` would only await it (no run, no deadline), one
    coroutine frame fewer per call in flight (`imp.parallel` starts its items this way)."""
    if not run_needed() and current_journal_scope.get() is None:
        left = time_left()
        if left is None or program.handles_deadline:
            return program.acall(dict(inputs))
    return call(program, inputs)


def _resume_options(program: Program, resume: object, decisions: object) -> dict[str, Any]:
    """`resume` and `decisions` for a program that can pause (a tool loop); refused for one that cannot."""
    if not program.resumable:
        raise TypeError(f"{type(program).__name__} never pauses, so it takes no resume= or decisions=")
    return {"resume": resume, "decisions": decisions}


_NO_OPTIONS: dict[str, Any] = {}


async def _run(program: Program, inputs: dict[str, Any], options: Mapping[str, Any] = _NO_OPTIONS) -> Prediction:
    left = time_left()
    if left is None or program.handles_deadline:
        return await program.acall(inputs, **options)
    return await _run_until(program, inputs, left, options)


async def _run_until(
    program: Program, inputs: dict[str, Any], left: float, options: Mapping[str, Any] = _NO_OPTIONS
) -> Prediction:
    """Run a program that does not end its own work at the deadline inside a cancel scope that does."""
    if left <= 0:
        raise DeadlineExceeded("the deadline had passed before the call started")
    try:
        with anyio.fail_after(left):
            return await program.acall(inputs, **options)
    except TimeoutError as exc:
        if isinstance(exc, DeadlineExceeded):
            raise
        raise DeadlineExceeded("the deadline passed while the call was running") from None


def call_sync(program: Program, inputs: Mapping[str, object] | None = None, /, **fields: Any) -> Prediction:
    """`imp.call` for scripts and notebooks: runs its own event loop, on a helper thread when one is
    already running in this thread (a notebook's), which then waits; in async code, `await imp.call`."""
    return run_sync(functools.partial(call, program, inputs, **fields))
