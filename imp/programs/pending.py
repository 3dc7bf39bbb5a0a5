"""A paused turn: `imp.Pending` holds the turn so far and each call waiting for a decision.

A `react` (or `react_trajectory`) turn pauses when a call needs a decision from outside the run (a
`requires_approval` tool, or an authorizer's `imp.Defer`). `pending.dump()` is JSON-ready data and
`imp.Pending.load(data)` reads it back, in any process; `imp.call(program, resume=pending,
decisions={...})` goes on from there.

The data may come back from anywhere (a browser, a queue, a file), so it is read as an attacker
would write it: it names no code (a tool is named, and only a tool the resuming program holds runs),
holds no client or credential, and every value is checked by type on `load`; a resumed call's
arguments are checked against its tool's schema again before anything runs.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from imp._redact import is_secret_key
from imp.errors import ResumeError
from imp.records import ToolCall, ToolResult, plain
from imp.signature import Signature
from imp.tools import Allow, Deny, Tool
from imp.tools.schema import check_arguments, decode_arguments, describe_problems
from imp.values import CoercionError, coerce_value

__all__ = [
    "MAX_PENDING_CALLS",
    "PENDING_VERSION",
    "Pending",
    "PendingCall",
    "PendingProgram",
    "Resolution",
    "pause",
    "resolve_decisions",
    "restore_inputs",
    "resume_options",
]

PENDING_VERSION = 1
"""The version `Pending.dump` writes; `load` reads it and every older one."""
MAX_PENDING_CALLS = 1024
"""The most calls one pending turn may hold: a longer list in loaded data is refused."""
_TYPE = "imp.pending"

PendingProgram = Literal["react", "react_trajectory"]
"""Which loop paused: a turn resumes only on a program of the same kind."""


@dataclass(frozen=True, slots=True)
class PendingCall:
    """One call waiting for a decision: its id, its tool, the exact arguments that would run, and why it waits."""

    id: str
    tool: str
    arguments: Mapping[str, Any]
    """The arguments an `imp.Allow()` runs, exactly these (an `imp.Allow(arguments=...)` replaces them)."""
    reason: str = ""

    def dump(self) -> dict[str, Any]:
        """JSON-ready data."""
        return {"id": self.id, "tool": self.tool, "arguments": plain(self.arguments), "reason": self.reason}

    @classmethod
    def load(cls, data: object) -> PendingCall:
        """Read a dumped call; anything else is a ValueError naming the key."""
        if not isinstance(data, Mapping):
            raise ValueError("a pending call is a mapping with `id`, `tool`, `arguments` and `reason`")
        for key in ("id", "tool", "reason"):
            if not isinstance(data.get(key, ""), str):
                raise ValueError(f"a pending call's `{key}` is a string, got {type(data.get(key)).__name__}")
        arguments = data.get("arguments", {})
        if not isinstance(arguments, Mapping) or not all(isinstance(k, str) for k in arguments):
            raise ValueError("a pending call's `arguments` is a mapping with string keys")
        if not data.get("id") or not data.get("tool"):
            raise ValueError("a pending call names its `id` and its `tool`")
        return cls(str(data["id"]), str(data["tool"]), dict(arguments), str(data.get("reason", "")))


@dataclass(frozen=True, slots=True)
class Pending:
    """A turn paused for decisions: what ran so far (`state`), the calls waiting (`calls`), and the
    call's inputs and options (plain data), so `imp.call(program, resume=pending, decisions=...)`
    continues it in any process."""

    program: PendingProgram
    calls: tuple[PendingCall, ...]
    inputs: Mapping[str, Any]
    """The call's inputs, JSON-ready (read back into the signature's types on resume)."""
    options: Mapping[str, Any]
    """The call's loop options that are data: `history` (dumped), `max_iters`, `finish`,
    `last_request_note`, `last_request_tools`, `config` (without keys that name a credential)."""
    state: Mapping[str, Any] = field(repr=False)
    """The loop's own dumped turn state (`react`: `TurnState.dump()`), read by the loop that resumes it."""
    _claimed: list[bool] = field(default_factory=lambda: [False], init=False, repr=False, compare=False)

    def claim(self) -> None:
        """Mark this value resumed (its decisions were good and its calls about to run): a second
        resume of the same value is a `ResumeError`, so no approved call runs twice from it. A copy
        loaded from a dump is another value: a store that hands each pending turn out once (the
        FastAPI example's) keeps that promise across processes."""
        if self._claimed[0]:
            raise ResumeError("this pending turn was already resumed; its approved calls ran then")
        self._claimed[0] = True

    @property
    def ids(self) -> tuple[str, ...]:
        """The ids of the calls waiting, in order: the keys `decisions` must hold."""
        return tuple(call.id for call in self.calls)

    def call(self, call_id: str) -> PendingCall:
        """The waiting call with this id (KeyError naming the ids held)."""
        for call in self.calls:
            if call.id == call_id:
                return call
        raise KeyError(f"no pending call {call_id!r}; the pending calls are {list(self.ids)}")

    def dump(self) -> dict[str, Any]:
        """JSON-ready data (`Pending.load` reads it back): no tool, client or credential, only what happened."""
        return {
            "type": _TYPE,
            "version": PENDING_VERSION,
            "program": self.program,
            "calls": [call.dump() for call in self.calls],
            # Already JSON-ready (made so by `pause`, or read by `load`): copied, not converted again.
            "inputs": _copied(self.inputs),
            "options": _copied(self.options),
            "state": _copied(self.state),
        }

    @classmethod
    def load(cls, data: object) -> Pending:
        """Read dumped data (any version up to `PENDING_VERSION`), checking every value's type; a
        ValueError names the key that does not fit."""
        if not isinstance(data, Mapping) or data.get("type") != _TYPE:
            raise ValueError(f"not a dumped pending turn: expected a mapping with type {_TYPE!r}")
        version = data.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise ValueError(f"a pending turn's version is a whole number >= 1, got {version!r}")
        if version > PENDING_VERSION:
            raise ValueError(
                f"this pending turn was dumped by a newer imp (version {version}; this one reads up to {PENDING_VERSION})"
            )
        program = data.get("program")
        if program not in ("react", "react_trajectory"):
            raise ValueError(f"a pending turn's `program` is 'react' or 'react_trajectory', got {program!r}")
        calls = data.get("calls")
        if not isinstance(calls, list) or not calls:
            raise ValueError("a pending turn's `calls` is a non-empty list of pending calls")
        if len(calls) > MAX_PENDING_CALLS:
            raise ValueError(f"a pending turn holds at most {MAX_PENDING_CALLS} calls, got {len(calls)}")
        loaded = tuple(PendingCall.load(c) for c in calls)
        ids = [c.id for c in loaded]
        if len(set(ids)) != len(ids):
            raise ValueError(f"a pending turn's calls have distinct ids, got {ids}")
        mappings = {key: data.get(key, {}) for key in ("inputs", "options", "state")}
        for key, value in mappings.items():
            if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value):
                raise ValueError(f"a pending turn's `{key}` is a mapping with string keys")
        return cls(program, loaded, dict(mappings["inputs"]), dict(mappings["options"]), dict(mappings["state"]))


def _copied(value: Any) -> Any:
    """A copy of a JSON-ready value (mappings and lists copied, everything else as it is)."""
    if isinstance(value, dict):
        return {k: _copied(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copied(v) for v in value]
    if isinstance(value, Mapping):
        return {str(k): _copied(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_copied(v) for v in value]
    return value


def loop_options(control: Mapping[str, Any]) -> dict[str, Any]:
    """The call's loop options as kept in a pending turn: data only, and no request option that names a credential."""
    out: dict[str, Any] = {}
    for key, value in control.items():
        if key == "tools":
            continue  # code: a resumed call runs the program's tools (or the `tools=` given again)
        if key == "config" and isinstance(value, Mapping):
            value = {k: v for k, v in value.items() if not is_secret_key(str(k))}
        if key == "history" and hasattr(value, "dump"):
            value = value.dump()
        out[key] = plain(value)
    return out


# --- deciding -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Resolution:
    """What the decisions make of a pending turn: the calls to run now (with the arguments that run)
    and the results given without running (denials, results from outside), by call id."""

    run: tuple[ToolCall, ...]
    given: Mapping[str, ToolResult]


def resolve_decisions(pending: Pending, decisions: object, roster: Mapping[str, Tool]) -> Resolution:
    """Check every decision before anything runs (fail closed): each waiting call has one, each names
    a waiting call, an approved call's tool is one the program holds and its arguments fit the
    tool's schema. A `ResumeError` names what does not fit."""
    if not isinstance(decisions, Mapping):
        raise ResumeError(
            "decisions are a mapping of call id -> imp.Allow() | imp.Deny(reason) | imp.ToolResult(...); "
            f"got {type(decisions).__name__}"
        )
    undecided = [call.id for call in pending.calls if call.id not in decisions]
    if undecided:
        raise ResumeError(
            f"no decision for the pending call(s) {undecided}; a call without a decision never runs "
            "(decide each with imp.Allow(), imp.Deny(reason) or a result)",
            undecided=undecided,
        )
    unknown = [key for key in decisions if key not in pending.ids]
    if unknown:
        raise ResumeError(f"decisions name calls that are not pending: {unknown}; pending: {list(pending.ids)}")
    run: list[ToolCall] = []
    given: dict[str, ToolResult] = {}
    for call in pending.calls:
        decision = decisions[call.id]
        if isinstance(decision, Allow):
            arguments = decision.arguments if decision.arguments is not None else call.arguments
            run.append(_approved(call, arguments, roster))
        elif isinstance(decision, Deny):
            reason = decision.reason.strip() or "the person declined it"
            ending = reason if reason.endswith((".", "!", "?")) else reason + "."
            given[call.id] = ToolResult(call.id, call.tool, None, "refused", f"{call.tool} was not allowed; {ending}")
        elif isinstance(decision, ToolResult):
            if decision.id != call.id or decision.name != call.tool:
                raise ResumeError(
                    f"the result given for call {call.id!r} names call {decision.id!r} of `{decision.name}`; "
                    f"it answers `{call.tool}` (write imp.ToolResult({call.id!r}, {call.tool!r}, result))"
                )
            if decision.outcome == "deferred":
                raise ResumeError(f"the result given for call {call.id!r} is itself `deferred`")
            given[call.id] = decision
        else:
            raise ResumeError(
                f"the decision for call {call.id!r} is imp.Allow(), imp.Deny(reason) or an imp.ToolResult, "
                f"got {type(decision).__name__}"
            )
    return Resolution(tuple(run), given)


def _approved(call: PendingCall, arguments: object, roster: Mapping[str, Tool]) -> ToolCall:
    tool = roster.get(call.tool)
    if tool is None or tool.internal:
        raise ResumeError(f"call {call.id!r} names `{call.tool}`, which is not one of the program's tools")
    if not isinstance(arguments, Mapping) or not all(isinstance(k, str) for k in arguments):
        raise ResumeError(f"the arguments approved for call {call.id!r} are a mapping with string keys")
    problems = check_arguments(tool.parameters, dict(arguments))
    if problems:
        raise ResumeError(
            f"the arguments approved for call {call.id!r} do not fit `{call.tool}`: {describe_problems(problems)}"
        )
    return ToolCall(call.id, call.tool, plain(arguments))


def waiting(calls: Sequence[ToolCall], results: Sequence[ToolResult]) -> tuple[PendingCall, ...]:
    """The calls of a step whose results are `deferred`, as pending calls (the reason is the result's sentence)."""
    by_id = {result.id: result for result in results if result.outcome == "deferred"}
    out: list[PendingCall] = []
    for call in calls:
        if call.id in by_id:
            arguments, _ = decode_arguments(call.arguments)  # a deferred call's arguments passed the schema
            out.append(PendingCall(call.id, call.name, plain(arguments or {}), by_id[call.id].error or ""))
    return tuple(out)


def pause(
    program: PendingProgram,
    calls: Sequence[ToolCall],
    results: Sequence[ToolResult],
    inputs: Mapping[str, Any],
    control: Mapping[str, Any],
    state: Mapping[str, Any],
) -> Pending:
    """The pending turn of a loop that paused on a step with these calls and results."""
    return Pending(program, waiting(calls, results), plain(inputs), loop_options(control), state)


def restore_inputs(signature: Signature, data: Mapping[str, Any]) -> dict[str, Any]:
    """A pending turn's inputs read back into the signature's types (`user_name` kept; nothing else)."""
    values: dict[str, Any] = {}
    for name, value in data.items():
        if name == "user_name" and isinstance(value, str):
            values[name] = value
            continue
        field = signature.inputs.get(name)
        if field is None:
            raise ResumeError(f"the pending turn's input `{name}` is not an input of this program's signature")
        try:
            values[name] = coerce_value(field, value)
        except CoercionError as exc:
            raise ResumeError(f"the pending turn's input `{name}` does not fit its field: {exc}") from None
    return values


def resume_options(label: str, options: Mapping[str, object]) -> tuple[Any, Any]:
    """A loop's call options as (resume, decisions); anything else, or decisions without a pending
    turn, is refused (only `resume` and `decisions` reach a loop)."""
    rest = dict(options)
    resume, decisions = rest.pop("resume", None), rest.pop("decisions", None)
    if rest:
        raise TypeError(f"{label} got unknown call option(s) {sorted(rest)}; it takes resume= and decisions=")
    if resume is None and decisions is not None:
        raise TypeError(
            "decisions= goes with resume=pending (the pending turn they decide), or with the run_id= and "
            "journal= of a journaled run that paused"
        )
    return resume, decisions
