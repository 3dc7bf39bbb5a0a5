"""The ReAct program: its options, its step signature and `submit` tool, and one call of the loop.

A call builds the turn's spec (what stays fixed: signatures, rule, tools, adapter, LM, settings)
and its state (what changes: steps, counters), then hands both to the loop.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from imp.adapters.base import FormatOptions
from imp.adapters.chat import ChatAdapter
from imp.errors import LMError, ReActStepError, ResumeError, ValidationFailed
from imp.history import History, Step
from imp.prediction import Prediction, PredictionMetadata
from imp.programs._parameters import Changes, Parameters, Predictor, apply_to_tools, trace_call
from imp.programs._stream_tap import any_tap, entered, streaming_program
from imp.programs._tool_loop import ToolLoop, check_max_iters
from imp.programs._validate import retries_of
from imp.programs.base import Program
from imp.programs.pending import Pending, pause, resolve_decisions, restore_inputs, resume_options
from imp.programs.predict import Validator, check_options, check_retry_options, prepare_inputs, resolve_lm
from imp.programs.react._last import EXTRACT_INSTRUCTIONS
from imp.programs.react._loop import run_turn
from imp.programs.react._messages import demo_steps
from imp.programs.react._resume import Resumed, check_paused
from imp.programs.react._spec import NOT_SENT, FinishRule, TurnSpec, episode_boundaries, rule_for
from imp.programs.react._state import (
    CALLS_FIELD,
    SUBMIT,
    THOUGHT_FIELD,
    Ending,
    FinishMode,
    FinishOn,
    HistoryReplay,
    TurnState,
)
from imp.programs.react._tools import check_outputs
from imp.runtime.budget import BudgetExceeded, reserve_tool_calls
from imp.runtime.deadline import deadline_passed, self_ending
from imp.runtime.usage import track_usage
from imp.settings import settings
from imp.signature import Field, Signature, SignatureLike, as_signature
from imp.tools import ExecutionCancelled, Tool, tool
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
        "validate",
        "max_retries",
    }
)


@dataclass(frozen=True, eq=False)
class ReAct(ToolLoop, Program):
    """The tool loop: each step one request with native tools; `submit`, a text answer or a tool ends the turn."""

    finish: FinishMode = "auto"
    finish_on: Mapping[str, FinishOn] = field(default_factory=dict)
    last_request_note: str | None = None
    last_request_tools: tuple[str, ...] = ()
    unsent_note: str | None = None
    history_replay: HistoryReplay = "full"
    extract_instructions: str | None = None
    """The extractor's instructions when an optimizer rewrote them; else the task's and a fixed paragraph."""
    validate: Validator | None = None
    """`check(prediction)` on an answer (`submit`'s outputs, a text answer): `imp.Retry("why")` refuses it."""
    max_retries: int | None = None
    """Answers `validate` may refuse in one turn (default 2) before `imp.ValidationFailed`."""
    _step_signatures: dict[tuple[str, bool], Signature] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )
    live_tools: Sequence[Tool] | None = field(default=None, init=False, repr=False, compare=False)
    """The list the tools came from when it refreshes itself (an MCP import): read at every step."""

    handles_deadline: ClassVar[bool] = True
    resumable: ClassVar[bool] = True
    loop_tool: ClassVar[str] = SUBMIT
    label: ClassVar[str] = "imp.react"
    zero_iters: ClassVar[str] = (
        "for one last request on a history you hold, give max_iters=0 to that call: "
        "imp.call(program, history=..., max_iters=0, last_request_note=...)"
    )

    def __post_init__(self) -> None:
        if getattr(self.tools, "refreshes_tools", False):
            object.__setattr__(self, "live_tools", self.tools)
        super().__post_init__()
        object.__setattr__(self, "last_request_tools", tuple(self.last_request_tools))
        object.__setattr__(self, "finish_on", dict(self.finish_on))
        names = self.tool_names
        if "tools" in self.config or "tool_choice" in self.config:
            raise ValueError("the loop sets `tools` and `tool_choice` itself; leave them out of config")
        _check_finish(self.finish)
        check_retry_options(self.validate, self.max_retries)
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
        if self.last_request_tools and self.rule(self.finish).has_submit:
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
        return rule_for(self.signature, "auto").text_output

    def rule(self, finish: FinishMode) -> FinishRule:
        """How a turn ends under a finish mode (a text answer, `submit`, or a `finish_on` tool)."""
        return rule_for(self.signature, finish)

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
        else:
            outputs = [Field(THOUGHT_FIELD, "output", str | None, default=None)]
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
        metadata = {
            "text_field": rule.text_field,
            "answer_fields": tuple(self.signature.outputs),
            "written_tools": written,
        }
        made = Signature(inputs, outputs, self.signature.instructions, metadata=metadata, name="ReActStep")
        cache[(finish, written)] = made
        return made

    def submit_tool(self) -> Tool:
        """The `submit` tool: its parameters are the outputs, every one required."""
        from imp.adapters.json import strict_output_schema

        signature = self.signature
        schema = strict_output_schema(signature) or dict(signature.json_schema())
        schema = {**schema, "required": list(signature.outputs)}
        schema.pop("title", None)

        def run_submit(arguments: Mapping[str, object]) -> dict[str, Any]:
            return check_outputs(signature, arguments, SUBMIT)

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

    def unsent_line(self, rule: FinishRule) -> str:
        """The line that follows a thought-only step when it is replayed."""
        if rule.kind == "submit":
            outputs = ", ".join(f"`{n}`" for n in self.signature.outputs)
            return f"{NOT_SENT} To reply, call `{SUBMIT}` with {outputs}; to keep working, call a tool."
        if rule.kind == "tools":
            if self.unsent_note:
                return self.unsent_note
            names = " or ".join(f"`{n}`" for n in self.finish_on)
            return f"{NOT_SENT} To end the turn, call {names}; to keep working, call a tool."
        return NOT_SENT

    # --- values --------------------------------------------------------------------------

    def parameters(self) -> Parameters:
        """Two predictors, the loop's step (`react`) and the extractor (`extract`), and the tools' descriptions."""
        step = Predictor(STEP, self.signature.instructions, self.demos, self.step_signature(self.finish))
        extractor = Predictor(EXTRACTOR, self.extractor_instructions, (), self.signature, takes_demos=False)
        return Parameters((step, extractor), self.tool_descriptions())

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

    # --- one call ------------------------------------------------------------------------

    async def acall(self, inputs: dict[str, Any], **call_options: Any) -> Prediction:
        tap = any_tap()
        if tap is not None and not entered(self):  # streamed: its parts are named after this loop
            with streaming_program(tap, self):
                return await self.acall(inputs, **call_options)
        resume, decisions = resume_options("imp.react", call_options)
        resumed: Resumed | None = None
        stands = False
        if resume is None:
            control = _control_of(inputs, self.signature)
            spec, state = self.start(inputs)
        else:
            spec, state, paused, control = self._resumed(inputs, resume)
            resumed = Resumed(paused, resolve_decisions(resume, decisions, spec.roster()))
            # A deadline already passed: no decided call may run, so the turn still waits and the same
            # pending turn (unclaimed, unreserved) is handed back, usable again with a later deadline.
            stands = bool(resumed.resolution.run) and deadline_passed()
            if not stands:
                try:
                    reserve_tool_calls(len(resumed.resolution.run))  # the resuming call's budget governs what it runs
                except BudgetExceeded as exc:  # refused before anything ran: the turn so far, as any stopped turn
                    exc.history = state.recorded(spec.base)
                    raise
                resume.claim()
        # The loop ends itself at the deadline, so the deadline's backstop waits for it.
        with track_usage() as usage, self_ending():
            try:
                ending = Ending(cause="deadline_exceeded") if stands else await run_turn(spec, state, resumed)
            except (LMError, ReActStepError, ExecutionCancelled, ValidationFailed, BudgetExceeded) as exc:
                exc.history = state.recorded(spec.base)  # what the turn did before the error ended it
                raise
            finally:
                state.recorded(spec.base)  # the call's inputs are kept even when no step recorded them
        complete = ending.reason not in ("incomplete", "awaiting_approval")
        pending = resume if stands else None
        if ending.reason == "awaiting_approval":
            last = state.steps[-1]
            kept = {
                k: v
                for k, v in spec.inputs.items()
                if v is not None and (k in self.signature.inputs or k == "user_name")
            }
            pending = pause("react", last.tool_calls or (), last.results or (), kept, control, state.dump())
        outputs = ending.outputs
        fields = dict(outputs) if outputs is not None else {n: None for n in self.signature.outputs}
        history = state.history(spec.base)
        metadata = PredictionMetadata(
            history=history,
            termination_reason=ending.reason,
            termination_cause=ending.cause,
            termination_error=list(state.errors) if not complete and state.errors else None,
            finished_by_tool=ending.finished_by,
            unexecuted_tool_calls=state.unexecuted,
            context_projection=state.projection(),
            finish_reason=state.finish_reason,
            usage=usage.total,
            usage_by_model=usage.by_model,
            adapter=spec.adapter.name,
            lm_calls=usage.total.requests,
            pending=pending,
        )
        if complete:  # a demo of this turn: its inputs, its outputs, and the steps that led to them
            steps = History(state.steps).dump()
            trace_call(
                self, {k: v for k, v in spec.inputs.items() if k in self.signature.inputs}, {**fields, "history": steps}
            )
        return Prediction(fields, metadata, complete=complete)

    def start(self, inputs: Mapping[str, Any]) -> tuple[TurnSpec, TurnState]:
        """The spec and the fresh state of one call on these inputs (the loop's control inputs read and checked)."""
        values = dict(inputs)
        control = {k: values.pop(k) for k in _CONTROL_INPUTS if k in values and k not in self.signature.inputs}
        history = as_history(control.get("history"))
        max_iters = control.get("max_iters", self.max_iters)
        check_max_iters(max_iters)
        finish: FinishMode = control.get("finish", self.finish)
        _check_finish(finish)
        if finish == "tools" and not self.finish_on:
            raise ValueError("finish='tools' needs at least one finish_on tool")
        note = control.get("last_request_note", self.last_request_note)
        if note is not None and not isinstance(note, str):
            raise TypeError("last_request_note is a string or None")
        last_tools = tuple(control.get("last_request_tools", self.last_request_tools) or ())
        names = self.tool_names
        unknown = [n for n in last_tools if n not in names]
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
        overrides = {n: t for n, t in roster.items() if t is not self._tool(n)}
        rule = self.rule(finish)
        tool_names = names
        if rule.has_submit:
            roster[SUBMIT] = self.submit_tool()
            tool_names = [*names, SUBMIT]
        prepared = prepare_inputs(_optional_inputs(self.signature) if history else self.signature, values)
        unrecorded = {
            k: v for k, v in prepared.items() if v is not None and (k in self.signature.inputs or k == "user_name")
        }
        lm = resolve_lm(self.lm)
        adapter = self.adapter or settings().adapter or ChatAdapter()
        written = not lm.capabilities.tool_calling
        spec = TurnSpec(
            task=self.signature,
            step_signature=self.step_signature(finish, written),
            rule=rule,
            adapter=adapter,
            lm=lm,
            written=written,
            format=FormatOptions.read(self.adapter_opts),
            config=config,
            max_iters=max_iters,
            tools=roster,
            tool_names=tuple(tool_names),
            live=self.live_tools,
            overrides=overrides,
            tool_policy=self.tool_policy,
            finish_on=self.finish_on,
            note=note,
            last_request_tools=last_tools,
            unsent_line=self.unsent_line(rule),
            replay=self.history_replay,
            extract_instructions=self.extractor_instructions,
            demos=demo_steps(self.demos, self.signature, rule.has_submit),
            inputs=prepared,
            base=history,
            episodes=tuple(episode_boundaries(history, list(self.signature.outputs))),
            starts_turn=bool(unrecorded) or "last_request_note" in control,
            validate=self.validate,
            max_retries=retries_of(self.validate, self.max_retries),
        )
        return spec, TurnState(unrecorded=unrecorded)

    def _resumed(self, inputs: Mapping[str, Any], pending: object) -> tuple[TurnSpec, TurnState, Step, dict[str, Any]]:
        """The spec, state and paused step of a turn resumed from `pending` (its inputs and options
        read back; only `tools` may be given again, as code never travels in pending data)."""
        if not isinstance(pending, Pending):
            raise TypeError(
                f"resume= takes an imp.Pending (imp.Pending.load(data) reads a dump), got {type(pending).__name__}"
            )
        if pending.program != "react":
            raise ResumeError(f"this pending turn was paused by {pending.program}; resume it with that program")
        extra = [k for k in inputs if k != "tools"]
        if extra:
            raise TypeError(
                f"a resumed turn takes its inputs from the pending turn; got {sorted(extra)} (only tools= may be given again)"
            )
        control = dict(pending.options)
        values = restore_inputs(self.signature, pending.inputs)
        spec, _ = self.start({**values, **control, **inputs})
        try:
            state = TurnState.load(pending.state)
        except ValueError as exc:
            raise ResumeError(f"the pending turn's state cannot be read: {exc}") from None
        return spec, state, check_paused(pending, state), control

    def _tool(self, name: str) -> Tool | None:
        return next((t for t in self.tools if t.name == name), None)

    def _call_roster(self, given: object, roster: dict[str, Tool]) -> dict[str, Tool]:
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


def _control_of(inputs: Mapping[str, Any], signature: Signature) -> dict[str, Any]:
    return {k: inputs[k] for k in _CONTROL_INPUTS if k in inputs and k not in signature.inputs}


def as_history(value: object) -> History:
    """The `history` input as a History (a History, its dump, or a list of turns)."""
    if value is None:
        return History()
    if isinstance(value, History):
        return value
    if isinstance(value, Mapping) and "messages" in value:
        return History.load(value) if value.get("type") == "history" else History(value["messages"])
    if isinstance(value, list | tuple):
        return History(value)
    raise TypeError(f"history is an imp.History (or a list of turns), got {type(value).__name__}")


def _optional_inputs(signature: Signature) -> Signature:
    return Signature(
        [f.replace(default=None) if f.required else f for f in signature.inputs.values()],
        list(signature.outputs.values()),
        signature.instructions,
    )


def _check_finish(value: object) -> None:
    if value not in ("auto", "submit", "tools"):
        raise ValueError(f"finish is 'auto', 'submit' or 'tools', got {value!r}")


def react(
    signature: SignatureLike | type[Signature], tools: Sequence[Tool | Callable[..., object]], **options: object
) -> ReAct:
    """A ReAct program (native tool calls, `submit` or a text answer) over `tools`: `imp.tool`s, or plain functions (made tools with
    `imp.tool`). Options: `lm`, `adapter`, `demos`, `config`, `adapter_opts`, `max_iters`, `finish`,
    `finish_on`, `last_request_note`, `last_request_tools`, `unsent_note`, `history_replay`, `tool_policy`,
    `validate` (a check of the answer that may raise `imp.Retry`), `max_retries`."""
    check_options("imp.react", options, _OPTIONS)
    if not isinstance(tools, list | tuple):
        raise TypeError("imp.react takes a list of tools")
    live = getattr(tools, "refreshes_tools", False)  # kept as given, so the loop reads it each step
    return ReAct(as_signature(signature), tools if live else tuple(tools), **options)  # type: ignore[arg-type]
