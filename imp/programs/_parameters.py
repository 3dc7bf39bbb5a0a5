"""What an optimizer may change in a program: each predictor's instructions and demos, a loop's tool descriptions."""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import weakref
from collections.abc import Iterator, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from imp.signature import Signature
from imp.tools import Tool

__all__ = [
    "Changes",
    "Optimized",
    "Parameters",
    "Predictor",
    "ToolDescription",
    "TraceEntry",
    "check_loop_demos",
    "optimized_by",
    "set_optimized",
    "trace_call",
    "tracing",
]


@dataclass(frozen=True)
class Predictor:
    """One predictor inside a program: its name, the instructions and demos it is shown, the signature it answers."""

    name: str
    instructions: str
    demos: tuple[Mapping[str, Any], ...]
    signature: Signature
    takes_demos: bool = True
    """False for a predictor that shows no demos (the loop's extractor); demos for it are refused."""


@dataclass(frozen=True)
class ToolDescription:
    """A tool a loop offers the model: its name (prefixed like its predictor's), description and arguments."""

    name: str
    description: str
    parameters: Mapping[str, Any]
    tool: Tool


@dataclass(frozen=True)
class Parameters:
    """Everything an optimizer may rewrite in a program, by name (`program.parameters()`)."""

    predictors: tuple[Predictor, ...]
    tools: tuple[ToolDescription, ...] = ()

    def __getitem__(self, name: str) -> Predictor:
        for p in self.predictors:
            if p.name == name:
                return p
        raise KeyError(f"no predictor named {name!r}; the program has {self.names}")

    @property
    def names(self) -> list[str]:
        """The predictors' names, in program order."""
        return [p.name for p in self.predictors]

    @property
    def instructions(self) -> dict[str, str]:
        """Each predictor's instructions by name."""
        return {p.name: p.instructions for p in self.predictors}

    def prefixed(self, prefix: str) -> Parameters:
        """The same parameters named under an attribute of a program that holds this one."""
        return Parameters(
            tuple(
                Predictor(f"{prefix}.{p.name}", p.instructions, p.demos, p.signature, p.takes_demos)
                for p in self.predictors
            ),
            tuple(ToolDescription(f"{prefix}.{t.name}", t.description, t.parameters, t.tool) for t in self.tools),
        )


@dataclass(frozen=True)
class Changes:
    """The changes `with_parameters` makes, by predictor or tool name."""

    instructions: Mapping[str, str] = field(default_factory=dict)
    demos: Mapping[str, tuple[Mapping[str, Any], ...]] = field(default_factory=dict)
    tool_descriptions: Mapping[str, str] = field(default_factory=dict)
    tools: Mapping[str, Tool] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.instructions or self.demos or self.tool_descriptions or self.tools)

    def under(self, prefix: str) -> Changes:
        """The changes that concern the program held under `prefix`, with the prefix taken off."""
        start = f"{prefix}."

        def pick(m: Mapping[str, object]) -> dict[str, Any]:
            return {k[len(start) :]: v for k, v in m.items() if k.startswith(start)}

        return Changes(pick(self.instructions), pick(self.demos), pick(self.tool_descriptions), pick(self.tools))


def changes_for(
    params: Parameters,
    instructions: Mapping[str, str] | None,
    demos: Mapping[str, Sequence[Mapping[str, object]]] | None,
    tool_descriptions: Mapping[str, str] | None,
    tools: Sequence[Tool] | Mapping[str, Tool] | None,
) -> Changes:
    """Check `with_parameters`' arguments against what the program has, naming what is unknown or refused."""
    known = {p.name: p for p in params.predictors}
    held = {t.name: t for t in params.tools}
    for option, given in (("instructions", instructions), ("demos", demos)):
        for name in given or {}:
            if name not in known:
                raise ValueError(
                    f"with_parameters({option}=...) names {name!r}; the program's predictors are {list(known)}"
                )
    for name, text in (instructions or {}).items():
        if not isinstance(text, str):
            raise TypeError(f"instructions[{name!r}] is a string, got {type(text).__name__}")
    checked_demos: dict[str, tuple[Mapping[str, Any], ...]] = {}
    for name, rows in (demos or {}).items():
        if not known[name].takes_demos:
            raise ValueError(f"the predictor {name!r} shows no demos; give demos to another one of {list(known)}")
        if isinstance(rows, str | bytes | Mapping) or not isinstance(rows, Sequence):
            raise TypeError(f"demos[{name!r}] is a list of mappings of fields, got {type(rows).__name__}")
        checked_demos[name] = tuple(dict(r) for r in rows)
    for name, text in (tool_descriptions or {}).items():
        if name not in held:
            raise ValueError(
                f"with_parameters(tool_descriptions=...) names {name!r}; the program's tools are {list(held)}"
            )
        if not isinstance(text, str):
            raise TypeError(f"tool_descriptions[{name!r}] is a string, got {type(text).__name__}")
    given_tools = dict(tools) if isinstance(tools, Mapping) else {t.name: t for t in tools or ()}
    checked_tools: dict[str, Tool] = {}
    for name, new in given_tools.items():
        if not isinstance(new, Tool):
            raise TypeError(f"tools are imp tools, got {type(new).__name__}")
        key = name if name in held else next((k for k in held if k.rsplit(".", 1)[-1] == name), None)
        if key is None:
            raise ValueError(f"with_parameters(tools=...) names {name!r}; the program's tools are {list(held)}")
        old = held[key].tool
        if new.name != old.name or new.runner is not old.runner:
            raise ValueError(
                f"with_parameters refuses a changed tool `{old.name}`: an optimizer may rewrite what the model "
                "reads of a tool (its description, its arguments' descriptions), never what the tool does "
                "(its name or runner)"
            )
        checked_tools[key] = new
    return Changes(dict(instructions or {}), checked_demos, dict(tool_descriptions or {}), checked_tools)


def apply_to_tools(tools: Sequence[Tool], changes: Changes) -> tuple[Tool, ...]:
    """A loop's tools with their new descriptions (and shown forms); runners stay as they are."""
    out: list[Tool] = []
    for t in tools:
        new = changes.tools.get(t.name, t)
        text = changes.tool_descriptions.get(t.name)
        if text is not None:
            new = dataclasses.replace(new, description=text)
        out.append(new)
    return tuple(out)


def sub_programs[P](program: object, kind: type[P]) -> list[tuple[str, P]]:
    """The programs (of `kind`) a user's program holds, by attribute name (as DSPy's `named_predictors`)."""
    found: list[tuple[str, P]] = []
    for name, value in getattr(program, "__dict__", {}).items():
        if name.startswith("_"):
            continue
        if isinstance(value, kind):
            found.append((name, value))
        elif isinstance(value, list | tuple):
            found.extend((f"{name}[{i}]", v) for i, v in enumerate(value) if isinstance(v, kind))
    return found


def replace_sub_programs[P](program: P, changed: Mapping[str, object]) -> P:
    """A copy of a user's program holding the changed programs in place of the old ones."""
    if not changed:
        return program
    made = copy.copy(program)
    lists: dict[str, list[Any]] = {}
    for key, value in changed.items():
        if "[" in key:
            name, index = key[:-1].split("[")
            items = lists.setdefault(name, list(getattr(program, name)))
            items[int(index)] = value
        else:
            object.__setattr__(made, key, value)
    for name, items in lists.items():
        original = getattr(program, name)
        object.__setattr__(made, name, tuple(items) if isinstance(original, tuple) else items)
    return made


# --- traces: what each predictor was given and wrote during one run --------------------------------


@dataclass(frozen=True)
class TraceEntry:
    """One predictor's call during a traced run: the program, its inputs and its outputs."""

    program: Any
    inputs: Mapping[str, Any]
    outputs: Mapping[str, Any]


_TRACE: ContextVar[list[TraceEntry] | None] = ContextVar("imp_predictor_trace", default=None)
open_trace = _TRACE.get
"""The open trace, or None: the hot path asks this bound method first and calls `trace_call` only inside one."""


def trace_call(program: object, inputs: Mapping[str, object], outputs: Mapping[str, object]) -> None:
    """Record a predictor's call when a trace is open (an optimizer's run); costs one lookup otherwise."""
    trace = _TRACE.get()
    if trace is not None:
        trace.append(TraceEntry(program, dict(inputs), dict(outputs)))


@contextlib.contextmanager
def tracing() -> Iterator[list[TraceEntry]]:
    """Open a trace for the calls made inside (each task started inside gets its own copy of the context)."""
    trace: list[TraceEntry] = []
    token = _TRACE.set(trace)
    try:
        yield trace
    finally:
        _TRACE.reset(token)


# --- provenance: which optimizer made a program ---------------------------------------------------


@dataclass(frozen=True)
class Optimized:
    """Which optimizer made a program, with what score on which set; saved with the program."""

    optimizer: str
    score: float | None
    scored_on: str = "valset"
    details: Mapping[str, Any] = field(default_factory=dict)

    def dump(self) -> dict[str, Any]:
        """The record as JSON-safe data (for the saved file)."""
        return {
            "optimizer": self.optimizer,
            "score": self.score,
            "scored_on": self.scored_on,
            "details": dict(self.details),
        }

    @classmethod
    def load(cls, data: Mapping[str, Any]) -> Optimized:
        """The record from its saved data."""
        score = data.get("score")
        return cls(
            str(data.get("optimizer", "")),
            None if score is None else float(score),
            str(data.get("scored_on", "valset")),
            dict(data.get("details") or {}),
        )


_MADE_BY: weakref.WeakKeyDictionary[Any, Optimized] = weakref.WeakKeyDictionary()


def set_optimized[P](program: P, record: Optimized) -> P:
    """Mark a program as made by an optimizer (programs are values: the mark lives beside them)."""
    _MADE_BY[program] = record
    return program


def optimized_by(program: object) -> Optimized | None:
    """Which optimizer made this program, if one did."""
    return _MADE_BY.get(program)


def check_loop_demos(demos: Sequence[Mapping[str, object]]) -> tuple[Mapping[str, Any], ...]:
    """A tool loop's demos as a tuple of field mappings; a string or a non-mapping demo is a TypeError."""
    given: object = demos
    if isinstance(given, str | bytes) or not isinstance(given, list | tuple):
        raise TypeError(f"demos are a list of mappings of field values, got {type(demos).__name__}")
    for index, demo in enumerate(demos):
        if not isinstance(demo, Mapping):
            raise TypeError(f"demos[{index}] is a mapping of field values, got {type(demo).__name__}")
    return tuple(demos)
