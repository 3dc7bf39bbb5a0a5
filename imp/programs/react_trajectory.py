"""The older loop (experimental): DSPy's trajectory ReAct, built on `imp.Predict`.

Each step is one Predict over the task inputs and the trajectory so far (as text), answering
`next_thought`, `next_tool_name` (a tool or `finish`) and `next_tool_args`. The tool runs through
`run_tool_calls` (policy, authorization, events), its observation joins the trajectory, and after
`finish` or `max_iters` a ChainOfThought extractor reads the trajectory and gives the outputs.
A request over the context window is retried with the oldest steps of the trajectory left out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal, cast

from imp._redact import redact_text
from imp.adapters.base import Adapter, FormatOptions
from imp.adapters.chat import ChatAdapter
from imp.errors import AdapterParseError, LMError, ResumeError
from imp.history import ToolCall, ToolResult
from imp.prediction import Prediction, PredictionMetadata
from imp.programs._parameters import (
    Changes,
    Parameters,
    Predictor,
    apply_to_tools,
    trace_call,
)
from imp.programs._partial import submitting
from imp.programs._stream_tap import any_tap, entered, streaming_program
from imp.programs._tool_loop import ToolLoop, check_max_iters, waits
from imp.programs.base import Program
from imp.programs.pending import Pending, pause, resolve_decisions, restore_inputs, resume_options
from imp.programs.predict import ChainOfThought, Predict, check_options, prepare_inputs
from imp.records import plain
from imp.runtime.budget import reserve_tool_calls
from imp.runtime.events import ContextProjected, ModelRequest, ModelResponse, Reasoning
from imp.runtime.run import current_run, emit
from imp.runtime.usage import track_usage
from imp.settings import settings
from imp.signature import Field, Signature, SignatureLike, as_signature
from imp.tools import Tool, ToolEvent, format_tool_result, forward_tool_event, run_tool_calls, tool
from imp.tools.policy import validate_policy
from imp.values import holds_media, render_value

__all__ = ["FINISH", "MAX_TRIMS", "ReActTrajectory", "TrajectoryStep", "react_trajectory"]

FINISH = "finish"
MAX_TRIMS = 3
"""How many times one request is retried with the oldest shown step left out (DSPy: 3 attempts)."""

_OPTIONS = frozenset({"lm", "adapter", "demos", "config", "adapter_opts", "max_iters", "tool_policy"})
_CONTROL_INPUTS = ("max_iters", "config")


@dataclass(slots=True)
class TrajectoryStep:
    """One step of the trajectory: the thought, the chosen tool and its arguments, then what it returned."""

    thought: str
    tool_name: str
    tool_args: dict[str, Any]
    observation: Any = None
    """The tool's result as the model reads it (None until the tool has run); a result holding media
    (an image, an MCP tool's screenshot) is kept as it is, so the adapter places its media as media."""

    def sections(self) -> list[tuple[str, Any]]:
        """The step's parts in DSPy's trajectory order, named as DSPy names them (`thought`, `tool_name`, ...)."""
        parts: list[tuple[str, Any]] = [
            ("thought", self.thought),
            ("tool_name", self.tool_name),
            ("tool_args", self.tool_args),
        ]
        if self.observation is not None:
            parts.append(("observation", self.observation))
        return parts


class _Overflow(Exception):
    """Internal: the request does not fit even with every droppable step left out."""

    def __init__(self, error: LMError) -> None:
        self.error = error


@dataclass(slots=True)
class _Turn:
    """One call: the inputs, the steps so far, and how many of the oldest are no longer shown."""

    values: dict[str, Any]
    config: dict[str, Any]
    adapter: Adapter
    steps: list[TrajectoryStep] = field(default_factory=list)
    cut: int = 0
    trims: int = 0
    errors: list[str] = field(default_factory=list)
    deferred: ToolResult | None = None
    """The newest step's result when it waits for a decision (the turn pauses)."""

    def failed(self, exc: BaseException) -> str:
        """Record a request's failure; its termination cause."""
        error = exc.error if isinstance(exc, _Overflow) else exc
        self.errors.append(redact_text(f"{type(error).__name__}: {error}"))
        if isinstance(exc, _Overflow):
            return "context_window_exceeded"
        return "parse_error" if isinstance(exc, AdapterParseError) else "prediction_error"

    def trajectory(self) -> dict[str, Any]:
        """The full trajectory in DSPy's shape: `thought_0`, `tool_name_0`, `tool_args_0`, `observation_0`, ..."""
        return {f"{key}_{i}": value for i, step in enumerate(self.steps) for key, value in step.sections()}

    def dump(self) -> dict[str, Any]:
        """What changes as the turn runs, JSON-ready (a paused turn keeps it in its `imp.Pending`)."""
        return {
            "steps": [
                {
                    "thought": s.thought,
                    "tool_name": s.tool_name,
                    "tool_args": plain(s.tool_args),
                    # a media observation is kept as its text form: pending data holds no media bytes
                    "observation": s.observation
                    if s.observation is None or isinstance(s.observation, str)
                    else render_value(s.observation),
                }
                for s in self.steps
            ],
            "cut": self.cut,
            "trims": self.trims,
            "errors": list(self.errors),
        }

    def load(self, data: Mapping[str, Any]) -> None:
        """Take the steps and counters of a dumped turn (checked by type: the data may come from anywhere)."""
        steps, cut, trims, errors = data.get("steps"), data.get("cut", 0), data.get("trims", 0), data.get("errors", [])
        if not isinstance(steps, list) or not all(isinstance(s, Mapping) for s in steps):
            raise ResumeError("the pending trajectory's `steps` is a list of steps")
        for count in (cut, trims):
            if not isinstance(count, int) or isinstance(count, bool) or not 0 <= count <= len(steps):
                raise ResumeError("the pending trajectory's `cut` and `trims` are whole numbers within its steps")
        if not isinstance(errors, list) or not all(isinstance(e, str) for e in errors):
            raise ResumeError("the pending trajectory's `errors` is a list of strings")
        for step in steps:
            texts = (step.get("thought"), step.get("tool_name"))
            observation, arguments = step.get("observation"), step.get("tool_args")
            if not all(isinstance(t, str) for t in texts) or not isinstance(arguments, Mapping):
                raise ResumeError("a pending trajectory step has a `thought`, a `tool_name` and `tool_args`")
            if observation is not None and not isinstance(observation, str):
                raise ResumeError("a pending trajectory step's `observation` is a string or None")
            self.steps.append(TrajectoryStep(texts[0], texts[1], dict(arguments), observation))
        self.cut, self.trims, self.errors = cut, trims, list(errors)


@dataclass(frozen=True, eq=False)
class ReActTrajectory(ToolLoop, Program):
    """Trajectory ReAct: thought, tool name and arguments per step; `finish`; then a separate extraction."""

    step: Predict = field(init=False, repr=False)
    """The step's Predict (task inputs, trajectory -> next_thought, next_tool_name, next_tool_args)."""
    extract: ChainOfThought = field(init=False, repr=False)
    """The extraction's ChainOfThought (task inputs, trajectory -> the task's outputs)."""
    roster: Mapping[str, Tool] = field(init=False, repr=False)
    """The tools a step may name, `finish` included."""

    loop_tool: ClassVar[str] = FINISH
    resumable: ClassVar[bool] = True
    label: ClassVar[str] = "imp.react_trajectory"
    zero_iters: ClassVar[str] = "a call that should go straight to the extraction gives its own max_iters=0"

    def __post_init__(self) -> None:
        super().__post_init__()
        names = self.tool_names
        if "trajectory" in self.signature.inputs:
            raise ValueError("an input named `trajectory` is reserved by the loop")
        validate_policy(self.tool_policy, [*names, FINISH])
        roster = {t.name: t for t in self.tools}
        roster[FINISH] = self.finish_tool()
        object.__setattr__(self, "roster", roster)
        common: dict[str, Any] = {"lm": self.lm, "adapter": self.adapter, "config": dict(self.config)}
        object.__setattr__(self, "step", Predict(self.step_signature(), adapter_opts=self.adapter_opts, **common))
        extract_sig = Signature(
            [*self.signature.inputs.values(), Field("trajectory", "input", str)],
            list(self.signature.outputs.values()),
            self.signature.instructions,
            name="ReActTrajectoryExtract",
        )
        extract = ChainOfThought.build(extract_sig, demos=self.demos, adapter_opts=self.adapter_opts, **common)
        object.__setattr__(self, "extract", extract)

    # --- what an optimizer may change ----------------------------------------------------

    def parameters(self) -> Parameters:
        """One predictor, `react`: the task's instructions (read by every step and the extraction), the
        demos (shown to the extraction), and the tools' descriptions."""
        own = Predictor("react", self.signature.instructions, self.demos, self.step.signature)
        return Parameters((own,), self.tool_descriptions())

    def predictor_programs(self) -> list[tuple[str, Program]]:
        """Itself, as `react` (its inner step and extraction are not predictors of their own here)."""
        return [("react", self)]

    def apply_parameters(self, changes: Changes) -> ReActTrajectory:
        """The same loop with the optimizer's instructions, demos and tool descriptions; runners unchanged."""
        made = self
        if "react" in changes.instructions:
            made = replace(made, signature=made.signature.with_instructions(changes.instructions["react"]))
        if "react" in changes.demos:
            made = replace(made, demos=changes.demos["react"])
        if changes.tools or changes.tool_descriptions:
            made = replace(made, tools=apply_to_tools(made.tools, changes))
        return made

    # --- shape --------------------------------------------------------------------------

    def finish_tool(self) -> Tool:
        """The `finish` tool: no arguments; it marks the outputs as ready to be extracted."""
        outputs = ", ".join(f"`{n}`" for n in self.signature.outputs)
        return tool(
            lambda: "Completed.",
            name=FINISH,
            description=f"Marks the task as complete: everything needed to produce {outputs} is now available.",
            schema={"type": "object", "properties": {}},
            internal=True,
        )

    def step_signature(self) -> Signature:
        """The step's signature: task inputs and `trajectory` -> thought, tool name, tool arguments."""
        inputs = ", ".join(f"`{n}`" for n in self.signature.inputs)
        outputs = ", ".join(f"`{n}`" for n in self.signature.outputs)
        listing = [*self.tools, self.finish_tool()]
        lines = [
            f"{self.signature.instructions}\n",
            f"You are an Agent. Each episode gives you the fields {inputs} and your trajectory so far.",
            f"Use one of the tools below at a time to gather what you need to produce {outputs}.\n",
            "Every turn, including the one that finishes the task, writes next_thought, then "
            "next_tool_name and next_tool_args.",
            "The observation of each tool call is appended to your trajectory.\n",
            "In next_thought, reason about where things stand and plan what comes next.",
            "next_tool_name must be one of:\n",
            *(f"({i}) {_describe(t)}" for i, t in enumerate(listing, start=1)),
            "next_tool_args is a JSON object of the chosen tool's arguments.",
        ]
        names = tuple(t.name for t in listing)
        return Signature(
            [*self.signature.inputs.values(), Field("trajectory", "input", str)],
            [
                Field("next_thought", "output", str),
                Field("next_tool_name", "output", cast(Any, Literal)[names]),
                Field("next_tool_args", "output", dict[str, Any]),
            ],
            "\n".join(lines),
            name="ReActTrajectoryStep",
        )

    def render_trajectory(self, steps: Sequence[TrajectoryStep], adapter: Adapter, start: int = 0) -> str:
        """The steps as input sections (`[[ ## thought_0 ## ]]` ...), numbered from `start`."""
        opts = FormatOptions.read(self.adapter_opts)
        sections = [
            adapter.render_section(Field(f"{key}_{i}", "input", Any), value, opts)
            for i, step in enumerate(steps, start=start)
            for key, value in step.sections()
        ]
        return "\n\n".join(sections)

    # --- one call -----------------------------------------------------------------------

    async def acall(self, inputs: dict[str, Any], **call_options: Any) -> Prediction:
        tap = any_tap()
        if tap is not None and not entered(self):  # streamed: its parts are named after this loop
            with streaming_program(tap, self):
                return await self.acall(inputs, **call_options)
        resume, decisions = resume_options("imp.react_trajectory", call_options)
        values = dict(inputs)
        if resume is not None:
            values = self._resumed_inputs(values, resume)
        control = {k: values.pop(k) for k in _CONTROL_INPUTS if k in values and k not in self.signature.inputs}
        max_iters = control.get("max_iters", self.max_iters)
        check_max_iters(max_iters)
        per_call = control.get("config") or {}
        if not isinstance(per_call, Mapping):
            raise TypeError("the per-call config is a mapping of request options")
        prepared = prepare_inputs(self.signature, values)
        task = {k: v for k, v in prepared.items() if k in self.signature.inputs}
        adapter = self.adapter or settings().adapter or ChatAdapter()
        turn = _Turn(task, dict(per_call), adapter)
        with track_usage() as usage:
            if resume is not None:
                reason, cause = await self._resume(turn, resume, decisions, max_iters)
            else:
                reason, cause = await self._loop(turn, max_iters)
            if reason == "awaiting_approval":
                outputs, reasoning = None, None
            else:
                outputs, reasoning, cause = await self._extract(turn, cause)
        complete = outputs is not None
        pending = None
        if turn.deferred is not None:
            last = turn.steps[-1]
            call = ToolCall(turn.deferred.id, last.tool_name, last.tool_args)
            pending = pause("react_trajectory", [call], [turn.deferred], task, control, turn.dump())
        fields = dict(outputs) if outputs is not None else {n: None for n in self.signature.outputs}
        projection = {"reason": "context_window_exceeded", "omitted_steps": turn.cut, "recovery_requests": turn.trims}
        metadata = PredictionMetadata(
            termination_reason=reason if complete or pending is not None else "incomplete",
            termination_cause=cause,
            termination_error=list(turn.errors) if turn.errors else None,
            context_projection=projection if turn.cut else None,
            usage=usage.total,
            usage_by_model=usage.by_model,
            adapter=adapter.name,
            lm_calls=usage.total.requests,
            pending=pending,
            extra={"trajectory": turn.trajectory(), "reasoning": reasoning},
        )
        if complete:
            trace_call(self, task, fields)
        return Prediction(fields, metadata, complete=complete)

    def _resumed_inputs(self, given: Mapping[str, Any], pending: object) -> dict[str, Any]:
        """The inputs and options of a turn resumed from `pending` (none may be given again)."""
        if not isinstance(pending, Pending):
            raise TypeError(
                f"resume= takes an imp.Pending (imp.Pending.load(data) reads a dump), got {type(pending).__name__}"
            )
        if pending.program != "react_trajectory":
            raise ResumeError(f"this pending turn was paused by {pending.program}; resume it with that program")
        if given:
            raise TypeError(f"a resumed turn takes its inputs from the pending turn; got {sorted(given)}")
        return {**restore_inputs(self.signature, pending.inputs), **pending.options}

    async def _resume(self, turn: _Turn, pending: Pending, decisions: object, max_iters: int) -> tuple[str, str | None]:
        """Decide the paused step's call (only it, only once), then go on with the loop."""
        turn.load(pending.state)
        last = turn.steps[-1] if turn.steps else None
        waiting = pending.calls[0]
        if (
            last is None
            or last.observation is not None
            or len(pending.calls) != 1
            or waiting.id != f"call_{len(turn.steps)}"
            or waiting.tool != last.tool_name
        ):
            raise ResumeError("the pending trajectory's newest step does not hold the call waiting for a decision")
        resolution = resolve_decisions(pending, decisions, self.roster)
        reserve_tool_calls(len(resolution.run))  # the resuming call's budget governs what it runs
        pending.claim()
        result = resolution.given.get(waiting.id)
        if result is not None:  # a denial or a result from outside: reported as `imp.react` reports it
            forward_tool_event(ToolEvent.call(0, waiting.id, waiting.tool, dict(last.tool_args)))
            forward_tool_event(ToolEvent.result(0, result, 0.0))
        else:
            run = current_run()
            (call,) = resolution.run
            last.tool_args = dict(call.arguments)
            (result,) = await run_tool_calls(
                [call],
                self.roster,
                policy=self.tool_policy,
                authorize=run.authorize if run is not None else None,
                on_event=forward_tool_event,
                approved=(call.id,),
            )
        last.observation = result.result if result.ok and holds_media(result.result) else format_tool_result(result)
        return await self._loop(turn, max_iters)

    async def _loop(self, turn: _Turn, max_iters: int) -> tuple[str, str | None]:
        """Run steps until `finish` ends the loop or `max_iters` steps have run: (reason, cause)."""
        roster = dict(self.roster)
        run = current_run()
        for index in range(len(turn.steps), max_iters):
            emit(ModelRequest(step=index + 1, program="ReActTrajectory"))
            try:
                pred = await self._call(self.step, turn)
            except (AdapterParseError, LMError, _Overflow) as exc:  # DSPy: the agent failed to select a tool
                return "extracted", turn.failed(exc)
            thought, name, args = pred["next_thought"], pred["next_tool_name"], dict(pred["next_tool_args"] or {})
            emit(ModelResponse(tool_calls=(name,), step=index + 1))
            if thought:
                emit(Reasoning(index + 1, thought))
            step = TrajectoryStep(thought, name, args)
            turn.steps.append(step)
            call = ToolCall(f"call_{index + 1}", name, args)
            if name != FINISH and not waits(roster, name):  # `finish` is free; a waiting call is reserved on resume
                reserve_tool_calls(1)
            (result,) = await run_tool_calls(
                [call],
                roster,
                policy=self.tool_policy,
                authorize=run.authorize if run is not None else None,
                on_event=forward_tool_event,
            )
            if result.outcome == "deferred":  # the turn pauses; the step's observation waits for the decision
                turn.deferred = result
                return "awaiting_approval", None
            step.observation = result.result if result.ok and holds_media(result.result) else format_tool_result(result)
            if name == FINISH and result.ok:
                return "finish", None
        return "extracted", "max_iters"

    async def _extract(self, turn: _Turn, cause: str | None) -> tuple[Mapping[str, Any] | None, str | None, str | None]:
        """The extractor's outputs and reasoning (None when it failed), and the cause in force."""
        emit(ModelRequest(step=len(turn.steps) + 1, program="ReActTrajectory", extract=True))
        try:
            pred = await self._call(self.extract, turn)
        except (AdapterParseError, _Overflow) as exc:
            return None, None, turn.failed(exc)
        return {k: pred[k] for k in self.signature.outputs}, pred.get("reasoning"), cause

    async def _call(self, program: Predict, turn: _Turn) -> Prediction:
        """One Predict call, retried with the oldest shown step left out while the context window is full."""
        trimmed = 0
        while True:
            trajectory = self.render_trajectory(turn.steps[turn.cut :], turn.adapter, start=turn.cut)
            try:
                tap = any_tap()
                if tap is None or not tap.partial:
                    return await program.acall({**turn.values, "trajectory": trajectory, "config": turn.config})
                with submitting(None, self.signature):  # partial values are the task's outputs
                    return await program.acall({**turn.values, "trajectory": trajectory, "config": turn.config})
            except LMError as exc:
                if not exc.context_window_exceeded:
                    raise
                if turn.cut >= len(turn.steps) or trimmed >= MAX_TRIMS:
                    raise _Overflow(exc) from exc
                turn.cut += 1
                turn.trims += 1
                trimmed += 1
                emit(ContextProjected("context_window_exceeded", turn.trims, omitted_steps=turn.cut))


def _describe(t: Tool) -> str:
    properties = t.parameters.get("properties") if t.parameters else None
    args = json.dumps(properties or {}, ensure_ascii=False, default=str)
    desc = (t.description or "No description.").strip()
    return f"{t.name}: {desc if desc.endswith('.') else desc + '.'} Its arguments: {args}"


def react_trajectory(
    signature: SignatureLike | type[Signature], tools: Sequence[Tool | Callable[..., object]], **options: Any
) -> ReActTrajectory:
    """A trajectory ReAct program (experimental): `lm`, `adapter`, `demos`, `config`, `adapter_opts`,
    `max_iters`, `tool_policy`. Demos are the task's examples and go to the extraction."""
    check_options("imp.react_trajectory", options, _OPTIONS)
    if not isinstance(tools, list | tuple):
        raise TypeError("imp.react_trajectory takes a list of tools")
    return ReActTrajectory(as_signature(signature), tuple(tools), **options)
