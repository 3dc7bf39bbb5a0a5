"""Programs as MCP tools: each one's name, schemas and description, and one call of it run to a result.

Nothing here knows the SDK: a tool is described and answered in the protocol's wire form (plain
dicts), which `_serve` hands to whichever `mcp` line is installed.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

import pydantic
from pydantic_core import to_jsonable_python

from imp._jsondata import JSONObject
from imp._redact import redact_text
from imp.programs.base import Program
from imp.programs.stream import StreamPart, stream
from imp.signature import Signature
from imp.tools.schema import check_arguments, describe_problems, model_schema
from imp.tools.tool import _NAME

__all__ = ["Progress", "ServedProgram", "describe_part", "served_programs"]

Progress = Callable[[float, str], Awaitable[None]]
"""Called for each stream part of a call: the count of parts so far, and what the part says."""

_SHOWN = 200
"""How much of a tool call's arguments or an error a progress message shows."""


def _input_schema(signature: Signature) -> JSONObject:
    """The inputs' JSON schema (the history input left out: a caller over MCP has none to give)."""
    definitions: dict[str, Any] = {}  # (annotation, FieldInfo) pairs, as create_model takes them
    for f in signature.inputs.values():
        if f.name == signature.history_field:
            continue
        info = pydantic.Field(
            default=f.default if f.has_default else (None if f.optional else ...),
            description=f.desc or None,
            **dict(f.constraints),
        )
        definitions[f.name] = (f.annotation, info)
    config = pydantic.ConfigDict(extra="forbid", arbitrary_types_allowed=True)
    model = pydantic.create_model("Inputs", __config__=config, **definitions)
    return model_schema(model)


def _output_schema(signature: Signature) -> JSONObject:
    schema: JSONObject = model_schema(signature.output_model)
    schema["additionalProperties"] = False
    return schema


@dataclass(frozen=True, slots=True)
class ServedProgram:
    """One program offered as one MCP tool."""

    name: str
    program: Program
    description: str
    input_schema: JSONObject
    output_schema: JSONObject

    @classmethod
    def of(cls, name: str, program: Program) -> ServedProgram:
        if not isinstance(program, Program):
            raise TypeError(
                f"imp.mcp.serve: `{name}` is a {type(program).__name__}, not an imp program "
                "(predict, chain_of_thought, react, a function program)"
            )
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError(
                f"imp.mcp.serve: {name!r} is not a tool name MCP clients take: 1-64 letters, digits, '_' or '-'"
            )
        signature = program.signature
        try:
            inputs, outputs = _input_schema(signature), _output_schema(signature)
        except (pydantic.PydanticUserError, TypeError, ValueError) as exc:
            raise TypeError(f"imp.mcp.serve: `{name}`'s signature has no JSON schema: {exc}") from exc
        description = (
            signature.instructions or f"Given {_listed(signature.inputs)}, gives {_listed(signature.outputs)}."
        )
        return cls(name, program, description, inputs, outputs)

    def tool(self) -> JSONObject:
        """The tool as `tools/list` publishes it."""
        return {
            "name": self.name,
            "description": self.description,
            "inputSchema": self.input_schema,
            "outputSchema": self.output_schema,
        }

    async def call(self, arguments: Mapping[str, object] | None, progress: Progress | None) -> JSONObject:
        """Run the program on the arguments through `imp.stream`; the `CallToolResult` (wire form).

        Bad arguments, a failed run and a run that ended without its answer are error results
        (`isError`), which the calling model reads; cancelling the task cancels the run.
        """
        arguments = dict(arguments or {})
        problems = check_arguments(self.input_schema, arguments)
        if problems:
            return _error(f"{self.name} got invalid arguments: {describe_problems(problems)}.")
        prediction = None
        count = 0
        try:
            async for part in stream(self.program, arguments):
                if part.kind == "final":
                    prediction = part.prediction
                elif progress is not None:
                    count += 1
                    await progress(count, describe_part(part))
        except Exception as exc:
            return _error(f"{self.name} failed: {type(exc).__name__}: {exc}")
        if prediction is None:  # pragma: no cover - a stream always ends with its final part or raises
            return _error(f"{self.name} ended without a prediction.")
        if not prediction.complete:
            cause = prediction.metadata.termination_cause or "it was interrupted"
            return _error(f"{self.name} ended without an answer ({cause}).")
        structured = {
            name: to_jsonable_python(prediction.get(name), fallback=str) for name in self.program.signature.outputs
        }
        text = json.dumps(structured, ensure_ascii=False)
        return {"content": [{"type": "text", "text": text}], "structuredContent": structured, "isError": False}


def _listed(fields: Mapping[str, object]) -> str:
    names = [f"`{name}`" for name in fields]
    return ", ".join(names) if names else "nothing"


def _error(text: str) -> JSONObject:
    return {"content": [{"type": "text", "text": redact_text(text)}], "isError": True}


def _short(value: object) -> str:
    text = value if isinstance(value, str) else json.dumps(to_jsonable_python(value, fallback=str), ensure_ascii=False)
    return text if len(text) <= _SHOWN else text[: _SHOWN - 3] + "..."


def describe_part(part: StreamPart) -> str:
    """What a progress notification says of a stream part: a field's delta, a tool call, a retry."""
    if part.kind == "field":
        return f"{part.field}: {part.delta}"
    if part.kind == "reasoning":
        return f"reasoning: {part.delta}"
    if part.kind == "tool_call":
        return f"calling {part.tool_name}({_short(part.arguments)})"
    if part.kind == "tool_result":
        if part.error is not None or part.outcome not in (None, "result"):
            return f"{part.tool_name} failed: {_short(part.error or part.outcome)}"
        return f"{part.tool_name} answered: {_short(part.output)}"
    if part.kind == "retry":
        return f"asking again: {part.reason or 'the reply could not be read'}"
    return str(part.kind)


def served_programs(programs: Program | Mapping[str, Program], name: str) -> list[ServedProgram]:
    """The tools of `programs`: one program is the tool `name`; a mapping names each of its programs."""
    if isinstance(programs, Program):
        return [ServedProgram.of(name, programs)]
    if isinstance(programs, Mapping):
        if not programs:
            raise ValueError("imp.mcp.serve needs at least one program")
        return [ServedProgram.of(tool, program) for tool, program in programs.items()]
    raise TypeError(
        "imp.mcp.serve takes a program (served as the tool `name`) or a mapping of tool name to program, "
        f"got {type(programs).__name__}"
    )
