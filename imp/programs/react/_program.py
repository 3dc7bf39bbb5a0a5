"""The ReAct program: its options, its step signature and `submit` tool, and one call of the loop."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from imp.adapters.base import Adapter
from imp.adapters.chat import ChatAdapter
from imp.history import History
from imp.models.base import LM
from imp.prediction import Prediction, PredictionMetadata
from imp.programs._parameters import (
    Changes,
    Parameters,
    Predictor,
    ToolDescription,
    apply_to_tools,
    check_loop_demos,
    trace_call,
)
from imp.programs.base import Program
from imp.programs.predict import check_options, prepare_inputs, resolve_lm
from imp.programs.react._finish import FinishRule, rule_for
from imp.programs.react._last import EXTRACT_INSTRUCTIONS
from imp.programs.react._loop import run_turn
from imp.programs.react._request import as_history
from imp.programs.react._state import CALLS_FIELD, SUBMIT, THOUGHT_FIELD, FinishMode, HistoryReplay, Turn
from imp.programs.react._tools import FinishOn, check_outputs
from imp.runtime.deadline import self_ending
from imp.runtime.usage import track_usage
from imp.settings import settings
from imp.signature import Field, Signature, SignatureLike, as_signature
from imp.tools import ExecutionCancelled, Tool, ToolPolicy, as_tool, tool
from imp.tools.policy import validate_policy

__all__ = ["ReAct", "react"]

STEP, EXTRACTOR = "react", "extract"
"""The names of the loop's step and extractor in `parameters()`."""
_CONTROL_INPUTS = ("history", "max_iters", "last_request_note", "last_request_tools", "finish", "config", "tools")
_OPTIONS = frozenset(
    {
        "lm",
        "adapter",
        "demos",
        "config",
        "adapter_opts",
        "max_iters",
        "finish",
        "finish_on",
        "last_request_note",
        "last_request_tools",
        "unsent_note",
        "history_replay",
        "tool_policy",
        "extract_instructions",
    }
)


@dataclass(frozen=True, eq=False)
class ReAct(Program):
    """The tool loop: each step one request with native tools; `submit`, a text answer or a tool ends the turn."""

    signature: Signature
    tools: tuple[Tool, ...]
    lm: LM | None = None
    adapter: Adapter | None = None
    demos: tuple[Mapping[str, Any], ...] = ()
    config: Mapping[str, Any] = field(default_factory=dict)
    adapter_opts: Mapping[str, Any] = field(default_factory=dict)
    max_iters: int = 20
    finish: FinishMode = "auto"
    finish_on: Mapping[str, FinishOn] = field(default_factory=dict)
    last_request_note: str | None = None
    last_request_tools: tuple[str, ...] = ()
    unsent_note: str | None = None
    history_replay: HistoryReplay = "full"
    tool_policy: ToolPolicy = "allow"
    extract_instructions: str | None = None
    """The extractor's instructions when an optimizer rewrote them; else the task's and a fixed paragraph."""
    _step_signatures: dict[tuple[str, bool], Signature] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    live_tools: Sequence[Tool] | None = field(default=None, init=False, repr=False, compare=False)
    """The list the tools came from when it refreshes itself (an MCP import): read at every step."""

    handles_deadline: ClassVar[bool] = True

    def __post_init__(self) -> None:
        if getattr(self.tools, "refreshes_tools", False):
            object.__setattr__(self, "live_tools", self.tools)
        object.__setattr__(self, "tools", tuple(as_tool(t, "imp.react") for t in self.tools))
        object.__setattr__(self, "demos", tuple(self.demos))
        object.__setattr__(self, "last_request_tools", tuple(self.last_request_tools))
        object.__setattr__(self, "finish_on", dict(self.finish_on))
        names = [t.name for t in self.tools]
        if len(set(names)) != len(names):
            raise ValueError(f"two tools share a name: {sorted({n for n in names if names.count(n) > 1})}")
        if SUBMIT in names:
            raise ValueError("the tool name `submit` is reserved for the loop's own tool")
        if not isinstance(self.adapter_opts, Mapping):
            raise TypeError(f"adapter_opts must be a mapping, got {type(self.adapter_opts).__name__}")
        if "tools" in self.config or "tool_choice" in self.config:
            raise ValueError("the loop sets `tools` and `tool_choice` itself; leave them out of config")
        _check_max_iters(self.max_iters)
        if self.max_iters == 0:
            raise ValueError(
                "imp.react(max_iters=0): max_iters is how many tool steps one call may take (>= 1, 20 by "
                "default), so this program could never run a tool; for one last request on a history you "
                "hold, give max_iters=0 to that call: imp.call(program, history=..., max_iters=0, "
                "last_request_note=...)"
            )
        _check_finish(self.finish)
        if self.history_replay not in ("full", "actions"):
            raise ValueError(f"history_replay is 'full' or 'actions', got {self.history_replay!r}")
        # An MCP import's tools may change from step to step, so only a fixed list is checked.
        validate_policy(self.tool_policy, None if self.live_tools is not None else [*names, SUBMIT])
        for name, fn in self.finish_on.items():
            if name == SUBMIT or name not in names:
                raise ValueError(f"finish_on names `{name}`, which is not one of the program's tools {names}")
            if not callable(fn):
                raise TypeError(f"finish_on[{name!r}] must be a function (arguments, result, inputs)")
        if self.finish == "tools" and not self.finish_on:
            raise ValueError("finish='tools' needs at least one finish_on tool")
        unknown = [n for n in self.last_request_tools if n not in names]
        if unknown:
            raise ValueError(f"last_request_tools names tools the program does not hold: {unknown}")
        if self.last_request_tools and self._has_submit(self.finish):
            raise ValueError(
                "last_request_tools applies to a signature with one text output; this one ends with `submit`"
            )
        for name in ("history", "tools"):
            if name in self.signature.inputs:
                raise ValueError(f"an input named `{name}` is reserved by the loop")

    # --- shape of the turn ---------------------------------------------------------------

    @property
    def text_output(self) -> str | None:
        """The one unconstrained text output, if the signature has exactly that."""
        outputs = list(self.signature.outputs.values())
        return outputs[0].name if len(outputs) == 1 and outputs[0].is_plain_text else None

    def rule(self, finish: FinishMode) -> FinishRule:
        """How a turn ends under a finish mode (a text answer, `submit`, or a `finish_on` tool)."""
        return rule_for(self, finish)

    def _has_submit(self, finish: FinishMode) -> bool:
        return self.rule(finish).has_submit

    def step_signature(self, finish: FinishMode, written: bool = False) -> Signature:
        """The signature of one step: the task inputs (optional) and history; a thought or the text answer.

        For an LM without native tool calling (`written`), the step writes its calls in a
        `tool_calls` output; the tools are listed in the system message.
        """
        cache = self._step_signatures
        cached = cache.get((finish, written))
        if cached is not None:
            return cached
        inputs = [f.replace(default=None) if f.required else f for f in self.signature.inputs.values()]
        inputs.append(Field("history", "input", History))
        rule = self.rule(finish)
        if rule.text_output is not None:
            text = self.signature.outputs[rule.text_output]
            outputs = [text.replace(annotation=str | None, default=None)]
            text_field = text.name
        else:
            outputs = [Field(THOUGHT_FIELD, "output", str | None, default=None)]
            text_field = THOUGHT_FIELD
        if written:
            outputs.append(
                Field(
                    CALLS_FIELD,
                    "output",
                    list[dict[str, Any]],
                    'The calls to make now, as a JSON list of {"name": ..., "arguments": {...}}; '
                    'e.g. [{"name": "look", "arguments": {"where": "box"}}]. Empty when you are done.',
                    default=[],
                )
            )
        metadata = {"text_field": text_field, "answer_fields": tuple(self.signature.outputs), "written_tools": written}
        made = Signature(inputs, outputs, self.signature.instructions, metadata=metadata, name="ReActStep")
        cache[(finish, written)] = made
        return made

    def submit_tool(self) -> Tool:
        """The `submit` tool: its parameters are the outputs, every one required."""
        from imp.adapters.json import strict_output_schema

        schema = strict_output_schema(self.signature) or dict(self.signature.json_schema())
        schema = {**schema, "required": list(self.signature.outputs)}
        schema.pop("title", None)

        def run_submit(arguments: Mapping[str, Any]) -> dict[str, Any]:
            return check_outputs(self, arguments, SUBMIT)

        return tool(
            run_submit,
            name=SUBMIT,
            description="Submit the final outputs and end the turn.",
            schema=schema,
            internal=True,
            call_with="mapping",
        )

    @property
    def extractor_instructions(self) -> str:
        """What the extractor of an interrupted turn is told: the task's instructions and how to read the history."""
        if self.extract_instructions is not None:
            return self.extract_instructions
        return f"{self.signature.instructions}\n\n{EXTRACT_INSTRUCTIONS}"

    # --- values --------------------------------------------------------------------------

    def parameters(self) -> Parameters:
        """Two predictors, the loop's step (`react`) and the extractor (`extract`), and the tools' descriptions."""
        step = Predictor(STEP, self.signature.instructions, self.demos, self.step_signature(self.finish))
        extractor = Predictor(EXTRACTOR, self.extractor_instructions, (), self.signature, takes_demos=False)
        tools = tuple(ToolDescription(t.name, t.description, t.parameters, t) for t in self.tools)
        return Parameters((step, extractor), tools)

    def predictor_programs(self) -> list[tuple[str, Program]]:
        """Itself, as its step `react` (a traced run records the turn's inputs and outputs)."""
        return [(STEP, self)]

    def apply_parameters(self, changes: Changes) -> ReAct:
        """The same loop with the optimizer's instructions, demos and tool descriptions; runners unchanged."""
        made = self
        if STEP in changes.instructions:
            made = replace(made, signature=made.signature.with_instructions(changes.instructions[STEP]))
        if EXTRACTOR in changes.instructions:
            made = replace(made, extract_instructions=changes.instructions[EXTRACTOR])
        if STEP in changes.demos:
            made = made.with_demos(list(changes.demos[STEP]))
        if changes.tools or changes.tool_descriptions:
            made = replace(made, tools=apply_to_tools(made.tools, changes))
        return made

    def with_lm(self, lm: LM) -> ReAct:
        """The same program pinned to another LM."""
        return replace(self, lm=lm)

    def with_tools(self, tools: Sequence[Tool]) -> ReAct:
        """The same program with another roster."""
        return replace(self, tools=tuple(tools))

    def with_demos(self, demos: Sequence[Mapping[str, Any]]) -> ReAct:
        """The same program with these demos (signature-shaped examples shown before the history)."""
        return replace(self, demos=check_loop_demos(demos))

    # --- one call ------------------------------------------------------------------------

    async def acall(self, inputs: dict[str, Any], **call_options: Any) -> Prediction:
        turn = self._start(inputs)
        # The loop ends itself at the deadline, so the deadline's backstop waits for it.
        with track_usage() as usage, self_ending():
            try:
                ending = await run_turn(self, turn)
            except ExecutionCancelled as exc:
                exc.history = turn.recorded()
                raise
            finally:
                turn.recorded()  # the call's inputs are kept even when no step recorded them
        complete = ending.reason != "incomplete"
        outputs = ending.outputs
        fields = dict(outputs) if outputs is not None else {n: None for n in self.signature.outputs}
        projection = None
        if turn.cut:
            projection = {
                "reason": "context_window_exceeded",
                "omitted_prior_entries": turn.cut,
                "omitted_prior_groups": turn.omitted_groups,
                "recovery_requests": turn.projection_retries,
            }
        metadata = PredictionMetadata(
            history=turn.history,
            termination_reason=ending.reason,
            termination_cause=ending.cause,
            termination_error=list(turn.errors) if not complete and turn.errors else None,
            finished_by_tool=ending.finished_by,
            unexecuted_tool_calls=turn.unexecuted,
            context_projection=projection,
            finish_reason=turn.finish_reason,
            usage=usage.total,
            usage_by_model=usage.by_model,
            adapter=turn.adapter.name,
            lm_calls=usage.total.requests,
        )
        if complete:  # a demo of this turn: its inputs, its outputs, and the steps that led to them
            steps = History(list(turn.history)[len(turn.base) :]).dump()
            trace_call(
                self, {k: v for k, v in turn.inputs.items() if k in self.signature.inputs}, {**fields, "history": steps}
            )
        return Prediction(fields, metadata, complete=complete)

    def _start(self, inputs: dict[str, Any]) -> Turn:
        values = dict(inputs)
        control = {k: values.pop(k) for k in _CONTROL_INPUTS if k in values and k not in self.signature.inputs}
        history = as_history(control.get("history"))
        max_iters = control.get("max_iters", self.max_iters)
        _check_max_iters(max_iters)
        finish: FinishMode = control.get("finish", self.finish)
        _check_finish(finish)
        if finish == "tools" and not self.finish_on:
            raise ValueError("finish='tools' needs at least one finish_on tool")
        note = control.get("last_request_note", self.last_request_note)
        if note is not None and not isinstance(note, str):
            raise TypeError("last_request_note is a string or None")
        last_tools = tuple(control.get("last_request_tools", self.last_request_tools) or ())
        unknown = [n for n in last_tools if n not in {t.name for t in self.tools}]
        if unknown:
            raise ValueError(f"last_request_tools names tools the program does not hold: {unknown}")
        config = dict(self.config)
        per_call = control.get("config")
        if per_call is not None:
            if not isinstance(per_call, Mapping):
                raise TypeError("the per-call config is a mapping of request options")
            if "tools" in per_call or "tool_choice" in per_call:
                raise ValueError("the loop sets `tools` and `tool_choice` itself; leave them out of config")
            config.update(per_call)
        roster = {t.name: t for t in self.tools}
        if control.get("tools") is not None:
            roster = self._call_roster(control["tools"], roster)
        if self._has_submit(finish):
            roster[SUBMIT] = self.submit_tool()
        prepared = prepare_inputs(_optional_inputs(self.signature) if history else self.signature, values)
        pending = {
            k: v for k, v in prepared.items() if v is not None and (k in self.signature.inputs or k == "user_name")
        }
        lm = resolve_lm(self.lm)
        adapter = self.adapter or settings().adapter or ChatAdapter()
        return Turn(
            inputs=prepared,
            pending=pending,
            base=history,
            rule=self.rule(finish),
            max_iters=max_iters,
            note=note,
            last_request_tools=last_tools,
            config=config,
            roster=roster,
            lm=lm,
            adapter=adapter,
            starts_turn=bool(pending) or "last_request_note" in control,
            written=not lm.capabilities.tool_calling,
        )

    def _call_roster(self, given: Any, roster: dict[str, Tool]) -> dict[str, Tool]:
        if not isinstance(given, list | tuple):
            raise TypeError("the per-call tools are a list of imp tools")
        out = dict(roster)
        for item in given:
            if not isinstance(item, Tool):
                raise TypeError(f"invalid react tools: {item!r} is not an imp tool")
            held = roster.get(item.name)
            if held is None:
                raise ValueError(f"invalid react tools: the program does not hold a tool named `{item.name}`")
            if held.description != item.description or dict(held.parameters) != dict(item.parameters):
                raise ValueError(
                    f"invalid react tools: `{item.name}` is shown differently from the program's tool; "
                    "a call may change what a tool does, never what the model is shown"
                )
            out[item.name] = item
        return out


def _optional_inputs(signature: Signature) -> Signature:
    return Signature(
        [f.replace(default=None) if f.required else f for f in signature.inputs.values()],
        list(signature.outputs.values()),
        signature.instructions,
    )


def _check_max_iters(value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"max_iters is a whole number >= 0, got {value!r}")


def _check_finish(value: Any) -> None:
    if value not in ("auto", "submit", "tools"):
        raise ValueError(f"finish is 'auto', 'submit' or 'tools', got {value!r}")


def react(
    signature: SignatureLike | type[Signature], tools: Sequence[Tool | Callable[..., Any]], **options: Any
) -> ReAct:
    """A ReAct program (native tool calls, `submit` or a text answer) over `tools`: `imp.tool`s, or plain functions (made tools with
    `imp.tool`). Options: `lm`, `adapter`, `demos`, `config`, `adapter_opts`, `max_iters`, `finish`,
    `finish_on`, `last_request_note`, `last_request_tools`, `unsent_note`, `history_replay`, `tool_policy`."""
    check_options("imp.react", options, _OPTIONS)
    if not isinstance(tools, list | tuple):
        raise TypeError("imp.react takes a list of tools")
    live = getattr(tools, "refreshes_tools", False)  # kept as given, so the loop reads it each step
    return ReAct(as_signature(signature), tools if live else tuple(tools), **options)  # type: ignore[arg-type]
