"""The program kinds imp saves: Predict, ChainOfThought, ReAct and ReActTrajectory (with their tools)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from imp.programs.base import Program
from imp.programs.function import FunctionProgram, dump_function, load_function
from imp.programs.predict import ChainOfThought, Predict
from imp.programs.react import ReAct
from imp.programs.react_trajectory import ReActTrajectory
from imp.records import plain
from imp.saving._codec import FUNCTION, Loader, ProgramKind, Saver, register_program_kind
from imp.tools import Tool

__all__: list[str] = []


# --- Predict and ChainOfThought ---------------------------------------------------------------------


def _dump_predict(program: Predict, saver: Saver) -> dict[str, Any]:
    owner = type(program).__name__
    opts = {k: v for k, v in program.adapter_opts.items() if k != "demos"}
    return {
        "signature": saver.signature(program.signature),
        "demos": [saver.value(d, f"demos[{i}]") for i, d in enumerate(program.demos)],
        "config": saver.value(program.config, "config", drop_secrets=True),
        "adapter": saver.adapter(program.adapter),
        "adapter_opts": saver.value(opts, "adapter_opts", drop_secrets=True, functions=True),
        "json_fallback": program.json_fallback,
        "lm": saver.lm(program.lm, owner),
    } | _dump_checks(program, saver)


def _dump_checks(program: Predict | ReAct, saver: Saver) -> dict[str, Any]:
    """A program's validator and `max_retries`, only when set: older files stay as they were."""
    saved: dict[str, Any] = {}
    if program.validate is not None:
        saved["validate"] = saver.function(program.validate, "validate")
    if program.max_retries is not None:
        saved["max_retries"] = program.max_retries
    return saved


def _load_checks(data: Mapping[str, Any], loader: Loader) -> dict[str, Any]:
    validate = data.get("validate")
    return {
        "validate": loader.function(validate, "validate") if validate is not None else None,
        "max_retries": data.get("max_retries"),
    }


def _predict_loader(cls: type[Predict]) -> Callable[[Mapping[str, Any], Loader], Program]:
    def load_predict(data: Mapping[str, Any], loader: Loader) -> Program:
        return cls(
            signature=loader.signature(data["signature"]),
            lm=loader.lm(data.get("lm")),
            adapter=loader.adapter(data.get("adapter")),
            demos=loader.demos(data.get("demos")),
            config=loader.config(data.get("config")),
            adapter_opts=loader.adapter_opts(data.get("adapter_opts")),
            json_fallback=bool(data.get("json_fallback", True)),
            **_load_checks(data, loader),
        )

    return load_predict


_PREDICT_KEYS = frozenset(
    {"signature", "demos", "config", "adapter", "adapter_opts", "json_fallback", "lm", "validate", "max_retries"}
)
register_program_kind(ProgramKind("predict", Predict, _dump_predict, _predict_loader(Predict), _PREDICT_KEYS))
register_program_kind(
    ProgramKind("chain_of_thought", ChainOfThought, _dump_predict, _predict_loader(ChainOfThought), _PREDICT_KEYS)
)


# --- ReAct ------------------------------------------------------------------------------------------


def _dump_tool(tool: Tool, saver: Saver) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "parameters": saver.value(dict(tool.parameters), f"tools.{tool.name}.parameters"),
        "runner": saver.function(tool.runner, f"the runner of tool `{tool.name}`"),
        "timeout": tool.timeout,
        "sequential": tool.sequential,
        "call_with": tool.call_with,
        "metadata": saver.value(dict(tool.metadata), f"tools.{tool.name}.metadata", drop_secrets=True),
    } | ({"requires_approval": True} if tool.requires_approval else {})


_TOOL_KEYS = frozenset(
    {
        "name",
        "description",
        "parameters",
        "runner",
        "timeout",
        "sequential",
        "call_with",
        "metadata",
        "requires_approval",
    }
)


def _load_tool(data: Mapping[str, Any], loader: Loader) -> Tool:
    loader.fields(data, _TOOL_KEYS, "a saved tool")
    name = str(data["name"])
    runner_name = str(data["runner"])
    parameters = dict(data.get("parameters") or {})
    given = loader.tool(runner_name)
    # A tool from the registry brings its arguments model (typed values: enums, nested models)
    # when the saved schema is still the one the model was built for.
    model = given.arguments_model if given is not None and plain(given.parameters) == parameters else None
    return Tool(
        name=name,
        description=str(data.get("description", "")),
        parameters=parameters,
        runner=loader.function(runner_name, f"the runner of tool `{name}`"),
        timeout=data.get("timeout"),
        sequential=bool(data.get("sequential", False)),
        call_with=data.get("call_with", "keywords"),
        metadata=dict(data.get("metadata") or {}),
        requires_approval=data.get("requires_approval", False) is True,
        arguments_model=model,
    )


def _dump_tool_loop(program: ReAct | ReActTrajectory, saver: Saver) -> dict[str, Any]:
    """What both tool loops save alike: the signature, tools, demos, config, adapter and policy."""
    policy = program.tool_policy
    saved_policy: Any = (
        {FUNCTION: saver.function(policy, "tool_policy")} if callable(policy) else saver.value(policy, "tool_policy")
    )
    opts = {k: v for k, v in program.adapter_opts.items() if k != "demos"}
    return {
        "signature": saver.signature(program.signature),
        "tools": [_dump_tool(t, saver) for t in program.tools],
        "demos": [saver.value(d, f"demos[{i}]") for i, d in enumerate(program.demos)],
        "config": saver.value(program.config, "config", drop_secrets=True),
        "adapter": saver.adapter(program.adapter),
        "adapter_opts": saver.value(opts, "adapter_opts", drop_secrets=True, functions=True),
        "max_iters": program.max_iters,
        "tool_policy": saved_policy,
    }


def _dump_react(program: ReAct, saver: Saver) -> dict[str, Any]:
    saved = _dump_tool_loop(program, saver)
    policy = saved.pop("tool_policy")  # kept in its place among the keys, after the loop's own
    saved |= {
        "finish": program.finish,
        "finish_on": {name: saver.function(fn, f"finish_on[{name!r}]") for name, fn in program.finish_on.items()},
        "last_request_note": program.last_request_note,
        "last_request_tools": list(program.last_request_tools),
        "unsent_note": program.unsent_note,
        "history_replay": program.history_replay,
        "tool_policy": policy,
        "lm": saver.lm(program.lm, "ReAct"),
    }
    if program.extract_instructions is not None:  # only when an optimizer rewrote them: older files stay as they were
        saved["extract_instructions"] = program.extract_instructions
    return saved | _dump_checks(program, saver)


def _load_tool_loop(data: Mapping[str, Any], loader: Loader) -> dict[str, Any]:
    """The arguments both tool loops load alike (what `_dump_tool_loop` saved, and the LM)."""
    return {
        "signature": loader.signature(data["signature"]),
        "tools": tuple(_load_tool(t, loader) for t in data.get("tools") or ()),
        "lm": loader.lm(data.get("lm")),
        "adapter": loader.adapter(data.get("adapter")),
        "demos": loader.demos(data.get("demos")),
        "config": loader.config(data.get("config")),
        "adapter_opts": loader.adapter_opts(data.get("adapter_opts")),
        "max_iters": int(data.get("max_iters", 20)),
        "tool_policy": loader.value(data.get("tool_policy", "allow"), "tool_policy"),
    }


def _load_react(data: Mapping[str, Any], loader: Loader) -> Program:
    return ReAct(
        **_load_tool_loop(data, loader),
        finish=data.get("finish", "auto"),
        finish_on={
            name: loader.function(fn, f"finish_on[{name!r}]") for name, fn in (data.get("finish_on") or {}).items()
        },
        last_request_note=data.get("last_request_note"),
        last_request_tools=tuple(data.get("last_request_tools") or ()),
        unsent_note=data.get("unsent_note"),
        history_replay=data.get("history_replay", "full"),
        extract_instructions=data.get("extract_instructions"),
        **_load_checks(data, loader),
    )


_LOOP_KEYS = frozenset(
    {"signature", "tools", "demos", "config", "adapter", "adapter_opts", "max_iters", "tool_policy", "lm"}
)
_REACT_KEYS = _LOOP_KEYS | {
    "finish",
    "finish_on",
    "last_request_note",
    "last_request_tools",
    "unsent_note",
    "history_replay",
    "extract_instructions",
    "validate",
    "max_retries",
}
register_program_kind(ProgramKind("react", ReAct, _dump_react, _load_react, _REACT_KEYS))


# --- ReActTrajectory ---------------------------------------------------------------------------------


def _dump_react_trajectory(program: ReActTrajectory, saver: Saver) -> dict[str, Any]:
    return _dump_tool_loop(program, saver) | {"lm": saver.lm(program.lm, "ReActTrajectory")}


def _load_react_trajectory(data: Mapping[str, object], loader: Loader) -> Program:
    return ReActTrajectory(**_load_tool_loop(data, loader))


register_program_kind(
    ProgramKind("react_trajectory", ReActTrajectory, _dump_react_trajectory, _load_react_trajectory, _LOOP_KEYS)
)
register_program_kind(
    ProgramKind("function", FunctionProgram, dump_function, load_function, frozenset({"function", "program"}))
)
