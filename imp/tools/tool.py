"""`Tool`, the value a model can call, and `tool`, which makes one from a function."""

from __future__ import annotations

import functools
import inspect
import os
import re
import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from types import MappingProxyType
from typing import Any, Literal, overload

import pydantic

from imp.records import plain
from imp.tools._docstring import Docstring, parse_docstring
from imp.tools.schema import EMPTY_OBJECT_SCHEMA, annotated, arguments_model, model_schema

__all__ = ["RESERVED_TOOL_NAMES", "CallWith", "Tool", "as_tool", "tool"]

RESERVED_TOOL_NAMES = frozenset({"submit"})
"""Names only imp's own (internal) tools may take; the loop offers `submit` itself."""

CallWith = Literal["keywords", "mapping"]
"""How the runner receives the validated arguments: as keyword arguments (one per schema
property the call holds) or as one mapping."""

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@dataclass(frozen=True, slots=True)
class Tool:
    """A function a model can call: what the model is shown (name, description, parameters)
    and what runs (the runner, with its timeout and whether it must run alone).

    Build one with `imp.tools.tool`. `internal=True` marks imp's own tools (`submit`): they may
    take a reserved name and are never sent to the authorizer. `requires_approval=True` never runs
    a call the model makes at once: the turn pauses with the call pending until it is decided.
    """

    name: str
    description: str
    parameters: Mapping[str, Any]
    runner: Callable[..., Any]
    timeout: float | None = None
    sequential: bool = False
    metadata: Mapping[str, Any] = field(default_factory=dict)
    internal: bool = False
    call_with: CallWith = "keywords"
    requires_approval: bool = False
    """Each call waits for a decision from outside the run (`imp.Allow`, `imp.Deny`, a result)."""
    arguments_model: type[pydantic.BaseModel] | None = field(default=None, repr=False, compare=False)
    """For a tool built from type hints: the pydantic model that turns checked JSON arguments
    into the function's typed values (enums, nested models)."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not _NAME.match(self.name):
            raise ValueError(f"a tool name is 1-64 letters, digits, '_' or '-', got {self.name!r}")
        if self.name in RESERVED_TOOL_NAMES and not self.internal:
            raise ValueError(f"the tool name {self.name!r} is reserved for imp's own tool")
        if not callable(self.runner):
            raise TypeError(f"tool {self.name!r}: the runner must be callable, got {type(self.runner).__name__}")
        if self.timeout is not None and (isinstance(self.timeout, bool) or not self.timeout > 0):
            raise ValueError(f"tool {self.name!r}: timeout is a positive number of seconds or None")
        if not isinstance(self.requires_approval, bool):
            raise TypeError(f"tool {self.name!r}: requires_approval is True or False")
        if self.requires_approval and self.internal:
            raise ValueError(f"tool {self.name!r}: imp's own tools never wait for an approval")
        if self.call_with not in ("keywords", "mapping"):
            raise ValueError(f"tool {self.name!r}: call_with is 'keywords' or 'mapping', got {self.call_with!r}")
        if not isinstance(self.parameters, Mapping):
            raise TypeError(f"tool {self.name!r}: parameters must be a JSON schema mapping")
        if self.parameters and self.parameters.get("type", "object") != "object":
            raise ValueError(f"tool {self.name!r}: the parameters schema must describe an object")
        object.__setattr__(self, "parameters", MappingProxyType(dict(self.parameters)))
        object.__setattr__(self, "metadata", MappingProxyType(dict(self.metadata)))

    def __hash__(self) -> int:
        return hash((self.name, self.description, self.runner))

    def __deepcopy__(self, memo: dict[int, Any]) -> Tool:
        return self  # a frozen value (its schema a read-only mapping): `copy.deepcopy(program)` shares it

    @property
    def is_async(self) -> bool:
        """Whether the runner is a coroutine function (it runs on the event loop, not in a thread)."""
        return _is_async(self.runner)

    def with_runner(self, runner: Callable[..., object]) -> Tool:
        """The same tool as the model sees it (name, description, schema) with another runner."""
        return replace(self, runner=runner)

    def spec(self) -> dict[str, Any]:
        """The OpenAI function-tool dict: `{"type": "function", "function": {...}}`."""
        parameters = plain(self.parameters) if self.parameters else dict(EMPTY_OBJECT_SCHEMA)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": parameters},
        }


def _is_async(fn: Callable[..., object]) -> bool:
    while isinstance(fn, functools.partial):
        fn = fn.func
    if inspect.iscoroutinefunction(fn):
        return True
    call = getattr(fn, "__call__", None)  # noqa: B004 - an object with an async __call__
    return call is not None and inspect.iscoroutinefunction(call)


def _documentation(fn: Callable[..., object]) -> Docstring:
    """The parsed docstring of a tool's function: a callable object's `__call__` docstring, or its
    class's when `__call__` has none; a partial's function's."""
    while isinstance(fn, functools.partial):
        fn = fn.func
    target = annotated(fn)
    if target is fn:
        return parse_docstring(inspect.getdoc(fn))
    # `getdoc` of a bound `__call__` without a docstring answers the slot's generic text.
    own = getattr(getattr(target, "__func__", None), "__doc__", None)
    return parse_docstring(own or inspect.getdoc(fn))


def _with_argument_docs(schema: dict[str, Any], described: Mapping[str, str]) -> dict[str, Any]:
    """The schema with each undescribed property given its description from the docstring."""
    properties = schema.get("properties")
    if not isinstance(properties, dict):
        return schema
    for name, text in described.items():
        prop = properties.get(name)
        if isinstance(prop, dict) and "description" not in prop:
            properties[name] = {"description": text, **prop}
    return schema


@overload
def tool(
    fn: Callable[..., object],
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    schema: Mapping[str, object] | None = None,
    timeout: float | None = None,
    sequential: bool = False,
    metadata: Mapping[str, object] | None = None,
    call_with: CallWith = "keywords",
    internal: bool = False,
    requires_approval: bool = False,
) -> Tool: ...
@overload
def tool(
    fn: None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    schema: Mapping[str, object] | None = None,
    timeout: float | None = None,
    sequential: bool = False,
    metadata: Mapping[str, object] | None = None,
    call_with: CallWith = "keywords",
    internal: bool = False,
    requires_approval: bool = False,
) -> Callable[[Callable[..., object]], Tool]: ...
def tool(
    fn: Callable[..., object] | None = None,
    /,
    *,
    name: str | None = None,
    description: str | None = None,
    schema: Mapping[str, object] | None = None,
    timeout: float | None = None,
    sequential: bool = False,
    metadata: Mapping[str, object] | None = None,
    call_with: CallWith = "keywords",
    internal: bool = False,
    requires_approval: bool = False,
) -> Tool | Callable[[Callable[..., object]], Tool]:
    """Make a `Tool` from a sync or async function: `@tool`, `@tool(name=..., timeout=...)`,
    or `tool(fn, name="page", description="...", schema={...})`.

    The name is the function's, the description the first paragraph of its docstring, and the
    parameters' JSON schema comes from its type hints through pydantic (`Literal`, enums, nested
    models, defaults, `Optional`), unless given; the docstring's parameter sections (Google `Args:`,
    NumPy `Parameters`, Sphinx `:param x:`) describe parameters that have no description of their
    own. A callable object (with `name=`) is read through its `__call__`. With an explicit
    `schema`, the runner is called with the schema's properties as keyword arguments, or with one
    mapping (`call_with="mapping"`). `requires_approval=True`: every call pauses the turn until a
    person (or a system) decides it (see `imp.Pending`).
    """

    # The caller's locals resolve annotations naming classes defined beside the function.
    caller = sys._getframe(1)
    namespace = dict(caller.f_locals) if caller.f_locals is not caller.f_globals else None
    del caller

    def build(function: Callable[..., object]) -> Tool:
        if isinstance(function, Tool):
            raise TypeError("tool() takes a function; use tool.with_runner(fn) to change a tool's runner")
        if not callable(function):
            raise TypeError(f"tool() takes a function, got {type(function).__name__}")
        _refuse_program(function, "tool() takes a function")
        tool_name = name if name is not None else getattr(function, "__name__", "")
        if name is None and (tool_name == "<lambda>" or not tool_name):
            raise ValueError("a tool made from a lambda or a callable object needs `name=`")
        documented = _documentation(function)
        text = description if description is not None else documented.summary
        model: type[pydantic.BaseModel] | None = None
        if schema is not None:
            parameters: Mapping[str, Any] = dict(schema)
        else:
            if call_with == "mapping":
                raise ValueError(f"tool {tool_name!r}: call_with='mapping' needs an explicit `schema=`")
            model = arguments_model(function, tool_name, namespace)
            parameters = _with_argument_docs(model_schema(model), documented.parameters)
            if not internal:
                _warn_if_undescribed(function, tool_name, text)
        return Tool(
            name=tool_name,
            description=text,
            parameters=parameters,
            runner=function,
            timeout=timeout,
            sequential=sequential,
            metadata=dict(metadata or {}),
            internal=internal,
            call_with=call_with,
            requires_approval=requires_approval,
            arguments_model=model,
        )

    if fn is None:
        return build
    return build(fn)


_IMP_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _warn_if_undescribed(function: Callable[..., object], name: str, description: str) -> None:
    """Warn, naming what to add, when a tool tells the model nothing but names: no description, untyped parameters.

    A warning, not an error, as DSPy and pydantic-ai accept such tools: they run, but the model
    reads only the tool's and its parameters' names, and any JSON value passes for an untyped one.
    `Any` written out is a choice, and is not warned about.
    """
    try:
        params = list(inspect.signature(function).parameters.values())
    except (TypeError, ValueError):
        params = []
    untyped = [p.name for p in params if p.annotation is inspect.Parameter.empty]
    problems: list[str] = []
    if not description.strip():
        problems.append("no description: add a docstring (or description=...)")
    if untyped:
        them = "it" if len(untyped) == 1 else "them"
        problems.append(
            f"no type hint on {', '.join(f'`{n}`' for n in untyped)}: annotate {them} (e.g. `{untyped[0]}: str`; "
            "`Any` takes anything), so the model is told what to send and the arguments are checked"
        )
    if problems:
        warnings.warn(f"tool `{name}` has {'; and '.join(problems)}", UserWarning, stacklevel=_caller_level())


def _caller_level() -> int:
    """The `stacklevel` of the first caller outside imp, so a warning points at the user's line.

    (Walked by hand: `skip_file_prefixes` does not skip these frames on Python 3.12.1.) A
    dataclass's generated `__init__` (file `<string>`) counts as imp's.
    """
    frame = sys._getframe(1)  # the function that warns: stacklevel 1
    level = 1
    while frame.f_back is not None and (
        frame.f_code.co_filename.startswith(_IMP_DIR) or frame.f_code.co_filename == "<string>"
    ):
        frame = frame.f_back
        level += 1
    return level


def _refuse_program(value: object, refusal: str) -> None:
    """An imp program is not a tool (this room lies below programs, so it is known by its shape)."""
    if callable(getattr(value, "acall", None)) and hasattr(value, "signature") and not inspect.isroutine(value):
        raise TypeError(
            f"{refusal}, got a {type(value).__name__} program: give it a function that runs the program, "
            "e.g. `async def ask(question: str) -> str: return (await imp.call(program, question=question)).answer`"
        )


def as_tool(value: object, taker: str) -> Tool:
    """A program's tool: an `imp.Tool` as it is, a plain function made one with `tool` (as DSPy
    does); anything else is refused, naming the program (`taker`) that was given it."""
    if isinstance(value, Tool):
        return value
    _refuse_program(value, f"{taker} takes imp tools or functions")
    if callable(value) and not isinstance(value, type):
        made: Tool = tool(value)
        return made
    raise TypeError(f"{taker} takes imp tools or functions, got {type(value).__name__}")
