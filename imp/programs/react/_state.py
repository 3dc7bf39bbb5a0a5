"""The records of one turn: its names and modes, the state it changes as it runs, and how it ended.

`TurnState` is the part of a turn that changes: the steps recorded, the counters the loop keeps,
the context projection. Everything else a turn reads is fixed for the call and lives in the spec
(`_spec.TurnSpec`). The state is plain data: `dump()` gives JSON-ready values and `TurnState.load`
reads them back (versioned), so a turn can be kept outside the process that ran it and continued.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, Literal, get_args

from imp.history import History, Step, ToolCall
from imp.models.base import LMResponse
from imp.records import plain

__all__ = [
    "CALLS_FIELD",
    "CONTINUE",
    "STATE_VERSION",
    "SUBMIT",
    "THOUGHT_FIELD",
    "Ending",
    "Finish",
    "FinishMode",
    "FinishOn",
    "HistoryReplay",
    "TerminationCause",
    "TerminationReason",
    "TurnState",
]

SUBMIT = "submit"
"""The loop's own tool, whose parameters are the outputs; the name is reserved."""
THOUGHT_FIELD = "next_thought"
"""The step output holding the text a step wrote beside its calls (DSPy's name)."""
CALLS_FIELD = "tool_calls"
"""The step output in which an LM without native tool calling writes its calls."""

FinishMode = Literal["auto", "submit", "tools"]
"""How a turn may end: `auto` (a text answer for one text output, else `submit`), `submit`
(only the `submit` tool), `tools` (only a `finish_on` tool)."""
HistoryReplay = Literal["full", "actions"]
"""How earlier turns of a given history are replayed: `full` (thoughts included) or `actions`
(only their calls and results)."""
TerminationReason = Literal[
    "answered",
    "submit",
    "finished_by_tool",
    "forced_submit",
    "extracted",
    "last_text",
    "incomplete",
    "awaiting_approval",
]
TerminationCause = Literal[
    "max_iters",
    "parse_error",
    "prediction_error",
    "empty_tool_calls",
    "invalid_answer",
    "context_window_exceeded",
    "deadline_exceeded",
]


@dataclass(frozen=True, slots=True)
class Finish:
    """Returned by a `finish_on` function: end the turn with these outputs."""

    outputs: Mapping[str, Any]


class _Continue:
    """Returned by a `finish_on` function: let the loop go on."""

    def __repr__(self) -> str:
        return "imp.CONTINUE"


CONTINUE = _Continue()
FinishOn = Callable[[Mapping[str, Any], Any, Mapping[str, Any]], "Finish | _Continue"]
"""A `finish_on` function: `(arguments, result, inputs)` -> `Finish(outputs)` or `CONTINUE`."""


@dataclass(frozen=True, slots=True)
class Ending:
    """How a turn ended: its outputs, the reason, the cause, the finishing tool. With no outputs the
    turn is incomplete: `Ending(cause="max_iters")`."""

    outputs: Mapping[str, Any] | None = None
    reason: TerminationReason = "incomplete"
    cause: TerminationCause | None = None
    finished_by: str | None = None


STATE_VERSION = 1
"""The version `TurnState.dump` writes; `load` reads it and every older one."""
_STATE_TYPE = "react_turn"


@dataclass(slots=True)
class TurnState:
    """What one call of the loop has done so far: the steps it recorded and the counters it keeps.

    The loop changes nothing else; the given history, the tools and the options are the call's
    spec. A state dumped between two steps and loaded again continues the turn as if it had not
    stopped: the loop's counters are all here, and the request a step sends is rebuilt from the
    spec and these steps.
    """

    unrecorded: dict[str, Any] = field(default_factory=dict)
    """The call's inputs (and `user_name`) not yet put on a step: the first step recorded takes them."""
    steps: list[Step] = field(default_factory=list)
    """This call's steps, in order (the given history is the spec's)."""
    step: int = 0
    """The number of the newest step request (each request, the last one included, counts one)."""
    thoughts: int = 0
    """Thought-only steps in a row; the finish rule says how many interrupt the turn."""
    forgiven: int = 0
    """Failed step requests given one more ordinary step (each adds one to the turn's budget)."""
    cut: int = 0
    """How many steps of the given history are left out of the requests (a full context window)."""
    omitted_groups: int = 0
    """How many episodes of the given history `cut` leaves out."""
    projection_retries: int = 0
    """Requests sent again with older episodes left out."""
    errors: list[str] = field(default_factory=list)
    """Each failure met on the way, redacted (`termination_error` when the turn ends incomplete)."""
    finish_reason: str | None = None
    """The provider's finish reason of the reply that answered."""
    unexecuted: tuple[ToolCall, ...] = ()
    """Calls the last request made that were not run (only `last_request_tools` run there)."""
    refused: list[dict[str, Any]] = field(default_factory=list)
    """Answers the program's validator refused this turn: each `{"outputs": ..., "reason": ...}`."""
    last_cause: TerminationCause | None = None
    """Set while the last request's calls wait for approval: what interrupted the turn. Resumed, the
    decided calls run and the turn ends with that request's text (`last_text`), not another request."""
    last_text: str | None = None
    """The text the paused last request wrote, its answer once its calls were decided."""

    def history(self, base: History) -> History:
        """The history so far: the one given, then this call's steps."""
        return base.extend(self.steps) if self.steps else base

    def newest(self, base: History) -> Step | None:
        """The newest step of the history, or None when it is empty."""
        if self.steps:
            return self.steps[-1]
        return base[-1] if len(base) else None

    def add(self, step: Step) -> Step:
        """Record a step; the call's inputs (and `user_name`) go on its first one."""
        if self.unrecorded:
            values = dict(self.unrecorded)
            name = values.pop("user_name", None)
            step = replace(step, fields={**values, **step.fields}, user_name=step.user_name or name)
            self.unrecorded = {}
        self.steps.append(step)
        return step

    def add_calls(
        self,
        calls: Sequence[ToolCall],
        thought: str | None,
        response: LMResponse | None = None,
    ) -> Step:
        """Record a step that makes `calls` (with the thought written beside them and the reply's
        reasoning), before they run: the calls' results are put on it as they come."""
        return self.add(
            Step(
                thought=thought or None,
                tool_calls=tuple(calls),
                results=(),
                reasoning=response.reasoning or None if response is not None else None,
                reasoning_data=response.reasoning_data if response is not None else None,
            )
        )

    def recorded(self, base: History) -> History:
        """The history to hand out as the turn ends: the call's inputs kept even when no step recorded them."""
        if self.unrecorded:
            self.add(Step(tool_calls=(), results=()))
        return self.history(base)

    def projection(self) -> dict[str, Any] | None:
        """The context projection the prediction reports (None when no step of the history was left out)."""
        if not self.cut:
            return None
        return {
            "reason": "context_window_exceeded",
            "omitted_prior_entries": self.cut,
            "omitted_prior_groups": self.omitted_groups,
            "recovery_requests": self.projection_retries,
        }

    # --- kept outside the process -----------------------------------------------------------

    def dump(self) -> dict[str, Any]:
        """JSON-ready data (`TurnState.load` reads it back): no tool, client or credential, only what happened."""
        return {
            "type": _STATE_TYPE,
            "version": STATE_VERSION,
            "step": self.step,
            "thoughts": self.thoughts,
            "forgiven": self.forgiven,
            "projection": {
                "cut": self.cut,
                "omitted_groups": self.omitted_groups,
                "retries": self.projection_retries,
            },
            "unrecorded": plain(self.unrecorded),
            "steps": [step.dump() for step in self.steps],
            "errors": list(self.errors),
            "finish_reason": self.finish_reason,
            "unexecuted": [call.dump() for call in self.unexecuted],
            # only when a validator refused an answer: a turn without one dumps as version 1 always did
            **({"refused": plain(self.refused)} if self.refused else {}),
            # only when the last request paused: every other turn dumps as version 1 always did
            **({"last": {"cause": self.last_cause, "text": self.last_text}} if self.last_cause else {}),
        }

    @classmethod
    def load(cls, data: Mapping[str, object]) -> TurnState:
        """Read a dumped state (any version up to `STATE_VERSION`); anything else is a ValueError naming the key."""
        if not isinstance(data, Mapping) or data.get("type") != _STATE_TYPE:
            raise ValueError("not a dumped react turn: expected a mapping with type 'react_turn'")
        version = data.get("version")
        if not isinstance(version, int) or isinstance(version, bool) or version < 1:
            raise ValueError(f"a dumped react turn's version is a whole number >= 1, got {version!r}")
        if version > STATE_VERSION:
            raise ValueError(
                f"this react turn was dumped by a newer imp (version {version}; this one reads up to {STATE_VERSION})"
            )
        projection = _mapping(data, "projection")
        steps = data.get("steps", [])
        if not isinstance(steps, list):
            raise ValueError("a dumped react turn's `steps` is a list of steps")
        errors = data.get("errors", [])
        if not isinstance(errors, list) or not all(isinstance(e, str) for e in errors):
            raise ValueError("a dumped react turn's `errors` is a list of strings")
        reason = data.get("finish_reason")
        if reason is not None and not isinstance(reason, str):
            raise ValueError("a dumped react turn's `finish_reason` is a string or None")
        refused = data.get("refused", [])
        if not isinstance(refused, list) or not all(isinstance(r, Mapping) for r in refused):
            raise ValueError("a dumped react turn's `refused` is a list of mappings")
        unexecuted = data.get("unexecuted", [])
        if not isinstance(unexecuted, list) or not all(isinstance(c, Mapping) for c in unexecuted):
            raise ValueError("a dumped react turn's `unexecuted` is a list of tool calls")
        last = _mapping(data, "last")
        last_cause, last_text = last.get("cause"), last.get("text")
        if last and (last_cause not in get_args(TerminationCause) or not isinstance(last_text, str | None)):
            raise ValueError("a dumped react turn's `last` is a mapping with a termination `cause` and a `text`")
        return cls(
            unrecorded=dict(_mapping(data, "unrecorded")),
            steps=[Step.load(step) for step in steps],
            step=_count(data, "step"),
            thoughts=_count(data, "thoughts"),
            forgiven=_count(data, "forgiven"),
            cut=_count(projection, "cut"),
            omitted_groups=_count(projection, "omitted_groups"),
            projection_retries=_count(projection, "retries"),
            errors=list(errors),
            finish_reason=reason,
            unexecuted=tuple(ToolCall.load(c) for c in unexecuted),
            refused=[dict(r) for r in refused],
            last_cause=last_cause if last else None,
            last_text=last_text if last else None,
        )


def _mapping(data: Mapping[str, object], key: str) -> Mapping[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, Mapping):
        raise ValueError(f"a dumped react turn's `{key}` is a mapping, got {type(value).__name__}")
    return value


def _count(data: Mapping[str, object], key: str) -> int:
    value = data.get(key, 0)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise ValueError(f"a dumped react turn's `{key}` is a whole number >= 0, got {value!r}")
    return value
