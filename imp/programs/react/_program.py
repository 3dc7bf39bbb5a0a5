"""The ReAct loop of seed 001: native tool calls, `submit` or a text answer, one last request, and why it ended."""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal

import anyio

from imp._redact import redact
from imp.adapters.base import Adapter, FormatOptions
from imp.adapters.chat import ChatAdapter
from imp.errors import AdapterParseError, LMError, ReActStepError
from imp.history import History, ToolCall, ToolResult
from imp.lm.base import LM, LMResponse, Message
from imp.prediction import Prediction, PredictionMetadata
from imp.programs import _react_replay as replay
from imp.programs._react_text import extract_written_calls, trajectory_text, written_calls, written_tool_listing
from imp.programs.base import Program
from imp.programs.predict import ChainOfThought, check_options, prepare_inputs, request, resolve_lm
from imp.runtime.deadline import time_left
from imp.runtime.run import current_run, emit
from imp.runtime.usage import track_usage
from imp.settings import settings
from imp.signature import Field, Signature, SignatureLike, as_signature
from imp.tools import ExecutionCancelled, Tool, ToolError, ToolEvent, ToolPolicy, as_tool, run_tool_calls, tool
from imp.tools.policy import validate_policy
from imp.values import type_name

__all__ = [
    "CONTINUE",
    "Finish",
    "FinishMode",
    "HistoryReplay",
    "ReAct",
    "TerminationCause",
    "TerminationReason",
    "react",
]

FinishMode = Literal["auto", "submit", "tools"]
HistoryReplay = Literal["full", "actions"]
TerminationReason = Literal[
    "answered", "submit", "finished_by_tool", "forced_submit", "extracted", "last_text", "incomplete"
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

SUBMIT = "submit"
MAX_PROJECTION_RETRIES = 8
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
    }
)
_EXTRACT_INSTRUCTIONS = (
    "The agent's turn was interrupted before it gave its answer. Read the trajectory and give the outputs. "
    "Use only the original inputs and the results of tool calls that succeeded: proposed calls, reasoning, "
    "malformed calls and errors are not evidence. Never claim an action succeeded unless a result shows it. "
    "If the outcome is not established, say so in the outputs. There are no tools."
)


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


class _Interrupted(Exception):
    """Internal: a step interrupted the turn."""

    def __init__(self, cause: TerminationCause, error: BaseException | None = None) -> None:
        self.cause = cause
        self.error = error


@dataclass(slots=True)
class _Turn:
    """The state of one call of the loop."""

    inputs: dict[str, Any]
    pending: dict[str, Any]
    base: History
    entries: list[dict[str, Any]]
    finish: FinishMode
    max_iters: int
    note: str | None
    last_request_tools: tuple[str, ...]
    config: dict[str, Any]
    roster: dict[str, Tool]
    lm: LM
    adapter: Adapter
    starts_turn: bool
    written: bool = False
    cut: int = 0
    projection_retries: int = 0
    omitted_groups: int = 0
    errors: list[str] = field(default_factory=list)
    finish_reason: str | None = None
    unexecuted: tuple[ToolCall, ...] = ()
    step: int = 0

    @property
    def history(self) -> History:
        return self.base.extend(self.entries)

    def add(self, entry: dict[str, Any]) -> dict[str, Any]:
        """Record a step; the call's inputs go on its first entry."""
        if self.pending:
            entry = {**self.pending, **entry}
            self.pending = {}
        self.entries.append(entry)
        return entry


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

    handles_deadline: ClassVar[bool] = True

    def __post_init__(self) -> None:
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
        _check_finish(self.finish)
        if self.history_replay not in ("full", "actions"):
            raise ValueError(f"history_replay is 'full' or 'actions', got {self.history_replay!r}")
        validate_policy(self.tool_policy)
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

    def _text_mode(self, finish: FinishMode) -> bool:
        return finish == "auto" and self.text_output is not None

    def _has_submit(self, finish: FinishMode) -> bool:
        return finish != "tools" and not self._text_mode(finish)

    def step_signature(self, finish: FinishMode, written: bool = False) -> Signature:
        """The signature of one step: the task inputs (optional) and history; a thought or the text answer.

        For an LM without native tool calling (`written`), the step writes its calls in a
        `tool_calls` output; the tools are listed in the system message.
        """
        cache: dict[tuple[str, bool], Signature] = self.__dict__.setdefault("_step_signatures", {})
        cached = cache.get((finish, written))
        if cached is not None:
            return cached
        inputs = [f.replace(default=None) if f.required else f for f in self.signature.inputs.values()]
        inputs.append(Field("history", "input", History))
        if self._text_mode(finish):
            text = self.signature.outputs[self.text_output or ""]
            outputs = [text.replace(annotation=str | None, default=None)]
            text_field = text.name
        else:
            outputs = [Field("next_thought", "output", str | None, default=None)]
            text_field = "next_thought"
        if written:
            outputs.append(
                Field(
                    "tool_calls",
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
            return _check_outputs(self.signature, arguments, SUBMIT)

        return tool(
            run_submit,
            name=SUBMIT,
            description="Submit the final outputs and end the turn.",
            schema=schema,
            internal=True,
            call_with="mapping",
        )

    def guidance(self, finish: FinishMode, written: bool = False) -> dict[str, Any]:
        """The loop's guidance for the adapter (seed 001)."""
        tool_names = [t.name for t in self.tools]
        if self._has_submit(finish):
            tool_names.append(SUBMIT)
        return {
            "written_tools": written,
            "text_field": self.text_output if self._text_mode(finish) else "next_thought",
            "text_answer": self._text_mode(finish) and not written,
            "submit_tool": SUBMIT if self._has_submit(finish) else None,
            "finish_tools": list(self.finish_on) if finish == "tools" else [],
            "tool_names": tool_names,
            "input_names": list(self.signature.inputs),
            "output_names": list(self.signature.outputs),
            "answer_desc": self.signature.outputs[self.text_output].desc
            if self._text_mode(finish) and self.text_output
            else "",
            "output_lines": [
                f"- `{f.name}` ({type_name(f.annotation)}){': ' + f.desc if f.desc else ''}"
                for f in self.signature.outputs.values()
            ],
        }

    def unsent_line(self, finish: FinishMode) -> str:
        """The line after a thought-only step (seed 001, section 2)."""
        if finish == "tools":
            if self.unsent_note:
                return self.unsent_note
            names = " or ".join(f"`{n}`" for n in self.finish_on)
            return f"Your message above was not sent. To end the turn, call {names}; to keep working, call a tool."
        if self._has_submit(finish):
            outputs = ", ".join(f"`{n}`" for n in self.signature.outputs)
            return f"Your message above was not sent. To reply, call `{SUBMIT}` with {outputs}; to keep working, call a tool."
        return "Your message above was not sent."

    # --- values --------------------------------------------------------------------------

    def with_lm(self, lm: LM) -> ReAct:
        """The same program pinned to another LM."""
        return replace(self, lm=lm)

    def with_tools(self, tools: Sequence[Tool]) -> ReAct:
        """The same program with another roster."""
        return replace(self, tools=tuple(tools))

    # --- one call ------------------------------------------------------------------------

    async def acall(self, inputs: dict[str, Any], **call_options: Any) -> Prediction:
        turn = self._start(inputs)
        with track_usage() as usage:
            try:
                outputs, reason, cause, finished_by = await self._loop(turn)
            except ExecutionCancelled as exc:
                exc.history = turn.history
                raise
            finally:
                if turn.pending:  # the call's inputs are kept even when no step recorded them
                    turn.add({"tool_calls": (), "tool_call_results": ()})
        complete = reason != "incomplete"
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
            termination_reason=reason,
            termination_cause=cause,
            termination_error=list(turn.errors) if not complete and turn.errors else None,
            finished_by_tool=finished_by,
            unexecuted_tool_calls=turn.unexecuted,
            context_projection=projection,
            finish_reason=turn.finish_reason,
            usage=usage.total,
            usage_by_model=usage.by_model,
            adapter=turn.adapter.name,
            lm_calls=usage.total.requests,
        )
        return Prediction(fields, metadata, complete=complete)

    def _start(self, inputs: dict[str, Any]) -> _Turn:
        values = dict(inputs)
        control = {k: values.pop(k) for k in _CONTROL_INPUTS if k in values and k not in self.signature.inputs}
        history = control.get("history")
        if history is None:
            history = History()
        elif isinstance(history, History):
            pass
        elif isinstance(history, Mapping) and "messages" in history:
            history = History.load(history) if history.get("type") == "history" else History(history["messages"])
        elif isinstance(history, list | tuple):
            history = History(history)
        else:
            raise TypeError(f"history is an imp.History (or a list of turns), got {type(history).__name__}")
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
        return _Turn(
            inputs=prepared,
            pending=pending,
            base=history,
            entries=[],
            finish=finish,
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

    # --- the loop ------------------------------------------------------------------------

    async def _loop(
        self, turn: _Turn
    ) -> tuple[Mapping[str, Any] | None, TerminationReason, TerminationCause | None, str | None]:
        thought_streak = 0
        failed_once = False
        extra = 0  # finish="tools": a failed request gets one more ordinary step, once per turn
        cause: TerminationCause | None = None
        while turn.step < turn.max_iters + extra:
            turn.step += 1
            if _deadline_passed():
                return None, "incomplete", "deadline_exceeded", None
            try:
                response = await self._request(turn, forced=False)
            except _Interrupted as stop:
                if stop.cause in ("context_window_exceeded", "deadline_exceeded"):
                    return None, "incomplete", stop.cause, None
                if turn.finish == "tools" and stop.cause == "prediction_error" and not failed_once:
                    failed_once = True
                    extra = 1
                    continue
                cause = stop.cause
                break
            calls, text, parse_error = self._read_step(turn, response)
            if parse_error is not None:
                turn.errors.append(_error_text(parse_error))
                cause = "parse_error"
                break
            if calls:
                thought_streak = 0
                try:
                    outcome = await self._run_calls(turn, calls, text, response=response)
                except _DeadlineDuringTools:
                    return None, "incomplete", "deadline_exceeded", None
                if outcome is not None:
                    return outcome
                continue
            if text is None:  # said nothing, called nothing
                if self._text_mode(turn.finish):
                    turn.add({self.text_output or "": None, "tool_calls": ()})
                    return {self.text_output or "": None}, "answered", None, None
                cause = "empty_tool_calls"
                break
            if self._text_mode(turn.finish):
                turn.finish_reason = response.finish_reason
                turn.add({self.text_output or "": text, "tool_calls": ()})
                return {self.text_output or "": text}, "answered", None, None
            turn.add({"next_thought": text, "tool_calls": (), "tool_call_results": ()})
            emit("reasoning", step=turn.step, text=text, forced=False)
            thought_streak += 1
            if turn.finish == "auto" or thought_streak >= 2:
                cause = "empty_tool_calls"
                break
        else:
            cause = "max_iters"
        return await self._last_request(turn, cause)

    async def _request(
        self,
        turn: _Turn,
        *,
        forced: bool,
        options: Mapping[str, Any] | None = None,
        roster: Sequence[Tool] | None = None,
        thought_as_user: bool = False,
    ) -> LMResponse:
        """One step request, retried with older episodes left out while the context window is full."""
        from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt, wait_none

        boundaries = replay.episode_boundaries(turn.base, list(self.signature.outputs))

        def remaining() -> list[int]:
            return [b for b in boundaries if b > turn.cut]

        def reducible(exc: BaseException) -> bool:
            return (
                isinstance(exc, LMError)
                and exc.context_window_exceeded
                and bool(remaining())
                and turn.projection_retries < MAX_PROJECTION_RETRIES
            )

        def project(state: RetryCallState) -> None:
            if state.outcome is not None and (failed := state.outcome.exception()) is not None:
                turn.errors.append(_error_text(failed))
            left = remaining()
            turn.projection_retries += 1
            take = len(left) if turn.projection_retries >= MAX_PROJECTION_RETRIES else max(1, math.ceil(len(left) / 2))
            turn.cut = left[take - 1]
            turn.omitted_groups += take
            emit(
                "context_projected",
                reason="context_window_exceeded",
                omitted_prior_entries=turn.cut,
                omitted_prior_groups=turn.omitted_groups,
                recovery_requests=turn.projection_retries,
            )

        tools = list(roster) if roster is not None else list(turn.roster.values())
        request_options: dict[str, Any] = dict(turn.config)
        if not turn.written:
            request_options.update({"tools": [t.spec() for t in tools], "tool_choice": "auto"})
            if options:
                request_options.update(options)
        left = time_left()
        try:
            with anyio.fail_after(left) if left is not None else nullcontext():
                async for attempt in AsyncRetrying(
                    retry=retry_if_exception(reducible),
                    stop=stop_after_attempt(MAX_PROJECTION_RETRIES + 1),
                    wait=wait_none(),
                    before_sleep=project,
                    reraise=True,
                ):
                    with attempt:
                        messages = self._messages(turn, thought_as_user=thought_as_user)
                        # request() emits model_request and model_response (with model, usage and duration)
                        return await request(turn.lm, messages, request_options, step=turn.step, forced=forced)
        except TimeoutError:
            raise _Interrupted("deadline_exceeded") from None
        except LMError as exc:
            turn.errors.append(_error_text(exc))
            if exc.context_window_exceeded:
                raise _Interrupted("context_window_exceeded", exc) from None
            raise _Interrupted("prediction_error", exc) from exc
        raise AssertionError("the retry loop always returns or raises")

    def _messages(self, turn: _Turn, *, thought_as_user: bool) -> list[Message]:
        step_sig = self.step_signature(turn.finish, turn.written)
        entries = list(turn.base[turn.cut :]) + turn.entries
        current_start = replay.current_turn_start(
            turn.base, len(turn.base) - turn.cut, turn.starts_turn, self.signature
        )
        moved: str | None = None
        if thought_as_user and entries and replay.kind_of(entries[-1], self.signature) == "thought":
            last = dict(entries[-1])
            moved = str(last.pop("next_thought"))
            entries[-1] = last
        turns = replay.replay_turns(
            entries,
            task=self.signature,
            text_output=self.text_output if self._text_mode(turn.finish) else None,
            actions_before=current_start if self.history_replay == "actions" else 0,
            unsent_line=self.unsent_line(turn.finish),
            written=turn.written,
            text_field=str(step_sig.metadata["text_field"]),
        )
        host = FormatOptions.read(self.adapter_opts)
        opts = replace(
            host,
            demos=self.demos,
            guidance={
                **self.guidance(turn.finish, turn.written),
                "tool_listing": written_tool_listing(list(turn.roster.values())) if turn.written else "",
            },
            response_instruction=False,
            omit_empty_request=True,
            history_note_renderer=replay.note_renderer(host.history_note_renderer),
            output_renderer=host.output_renderer or replay.plain_text_renderer(self.text_output)
            if self._text_mode(turn.finish)
            else host.output_renderer,
        )
        values: dict[str, Any] = dict(turn.pending)
        values["history"] = History(turns)

        messages = turn.adapter.format_with(step_sig, values, opts)
        if moved is not None:
            section = f"[[ ## next_thought ## ]]\n{moved}"
            if messages[-1]["role"] == "user" and not messages[-1].get("tool_call_id"):
                messages[-1] = {**messages[-1], "content": f"{messages[-1]['content']}\n\n{section}".strip()}
            else:
                messages.append({"role": "user", "content": section})
        return messages

    def _read_step(
        self, turn: _Turn, response: LMResponse
    ) -> tuple[list[ToolCall], str | None, AdapterParseError | None]:
        """The step's tool calls and its text (thought or answer), or the parse error."""
        calls = [
            c if c.id else ToolCall(f"call_{turn.step}_{i}", c.name, c.arguments)
            for i, c in enumerate(response.tool_calls)
        ]
        text = response.text or ""
        if not text.strip() and response.fields and not calls:
            text_field = self.text_output if self._text_mode(turn.finish) else "next_thought"
            value = response.fields.get(text_field or "")
            text = value if isinstance(value, str) else ""
        if not text.strip():
            return calls, None, None
        if not calls:
            written = extract_written_calls(text, turn.step)
            if written:
                return written, None, None
        step_sig = self.step_signature(turn.finish, turn.written)
        try:
            parsed = turn.adapter.parse_text(step_sig, text)
        except AdapterParseError as exc:
            if calls:
                return calls, text.strip(), None
            return [], None, exc
        if turn.written and not calls:
            calls = [
                call if call.id else ToolCall(f"call_{turn.step}_{i}", call.name, call.arguments)
                for i, call in enumerate(written_calls(parsed.get("tool_calls") or [], turn.step))
            ]
        value = parsed.get(step_sig.metadata["text_field"])
        return calls, (value if isinstance(value, str) and value.strip() else None), None

    async def _run_calls(
        self,
        turn: _Turn,
        calls: list[ToolCall],
        thought: str | None,
        *,
        only: Sequence[str] | None = None,
        response: LMResponse | None = None,
    ) -> tuple[Mapping[str, Any], TerminationReason, TerminationCause | None, str | None] | None:
        """Run one step's calls and record the step; the outcome when the turn ends here."""
        if thought:
            emit("reasoning", step=turn.step, text=thought, forced=only is not None)
        run = current_run()
        results: list[ToolResult] = []
        entry: dict[str, Any] = {"tool_calls": tuple(calls), "tool_call_results": ()}
        if thought:
            entry = {"next_thought": thought, **entry}
        if response is not None and response.reasoning:
            entry["reasoning"] = response.reasoning
        if response is not None and response.reasoning_data is not None:
            entry["reasoning_data"] = response.reasoning_data
        left = time_left()
        try:
            with anyio.fail_after(left) if left is not None else nullcontext():
                results = await run_tool_calls(
                    calls,
                    turn.roster,
                    policy=self.tool_policy,
                    authorize=run.authorize if run is not None else None,
                    on_event=_forward_tool_event,
                    into=results,
                )
        except TimeoutError:
            turn.add({**entry, "tool_call_results": tuple(results)})
            raise _DeadlineDuringTools() from None
        except BaseException:
            turn.add({**entry, "tool_call_results": tuple(results)})
            raise
        entry["tool_call_results"] = tuple(results)
        outputs: Mapping[str, Any] | None = None
        finished_by: str | None = None
        for call, result in zip(calls, results, strict=True):
            if call.name == SUBMIT and result.ok and outputs is None:
                outputs = result.result
        if outputs is None and self.finish_on:
            for index, (call, result) in enumerate(zip(calls, results, strict=True)):
                hook = self.finish_on.get(call.name)
                if hook is None or not result.ok:
                    continue
                decision = hook(dict(call.arguments), result.result, turn.inputs)
                if isinstance(decision, Finish):
                    try:
                        checked = _check_outputs(self.signature, decision.outputs, call.name)
                    except ToolError as exc:
                        results[index] = ToolResult(call.id, call.name, None, "result", exc.message)
                        continue
                    outputs, finished_by = checked, call.name
                    break
            entry["tool_call_results"] = tuple(results)
        if outputs is not None:
            turn.add({**entry, **outputs})
            if finished_by is not None:
                return outputs, "finished_by_tool", None, finished_by
            return outputs, "submit", None, None
        turn.add(entry)
        return None

    # --- the last request ----------------------------------------------------------------

    async def _last_request(
        self, turn: _Turn, cause: TerminationCause
    ) -> tuple[Mapping[str, Any] | None, TerminationReason, TerminationCause | None, str | None]:
        if turn.finish == "tools":
            return None, "incomplete", "deadline_exceeded" if _deadline_passed() else cause, None
        if _deadline_passed():
            return None, "incomplete", "deadline_exceeded", None
        if turn.note:
            turn.add({"last_request_note": turn.note, "tool_calls": (), "tool_call_results": ()})
        turn.step += 1
        if self._has_submit(turn.finish):
            return await self._forced_submit(turn, cause)
        return await self._last_text(turn, cause)

    async def _last_text(
        self, turn: _Turn, cause: TerminationCause
    ) -> tuple[Mapping[str, Any] | None, TerminationReason, TerminationCause | None, str | None]:
        name = self.text_output or ""
        try:
            response = await self._request(turn, forced=True)
        except _Interrupted as stop:
            return self._failed_last_request(turn, stop)
        turn.finish_reason = response.finish_reason
        calls, text, parse_error = self._read_step(turn, response)
        if parse_error is not None:
            turn.errors.append(_error_text(parse_error))
            return None, "incomplete", cause, None
        run_now = [c for c in calls if c.name in turn.last_request_tools]
        turn.unexecuted = tuple(
            ToolCall(c.id, c.name, redact(dict(c.arguments))) for c in calls if c.name not in turn.last_request_tools
        )
        if run_now:
            try:
                await self._run_calls(turn, run_now, None, only=turn.last_request_tools)
            except _DeadlineDuringTools:
                return None, "incomplete", "deadline_exceeded", None
            turn.entries[-1] = {**turn.entries[-1], name: text}
        else:
            turn.add({name: text, "tool_calls": ()})
        return {name: text}, "last_text", cause, None

    async def _forced_submit(
        self, turn: _Turn, cause: TerminationCause
    ) -> tuple[Mapping[str, Any] | None, TerminationReason, TerminationCause | None, str | None]:
        newest = turn.entries[-1] if turn.entries else (turn.base[-1] if len(turn.base) else None)
        thought_last = newest is not None and replay.kind_of(newest, self.signature) == "thought"
        options: dict[str, Any] = {"tool_choice": {"type": "function", "function": {"name": SUBMIT}}}
        if "reasoning_effort" in turn.config:
            options["reasoning_effort"] = None
        try:
            response = await self._request(turn, forced=True, options=options, thought_as_user=thought_last)
        except _Interrupted as stop:
            if not (isinstance(stop.error, LMError) and _refuses_named_choice(stop.error)):
                return self._failed_last_request(turn, stop)
            try:
                response = await self._request(
                    turn,
                    forced=True,
                    options={**options, "tool_choice": "required"},
                    roster=[turn.roster[SUBMIT]],
                    thought_as_user=thought_last,
                )
            except _Interrupted as again:
                if again.cause in ("context_window_exceeded", "deadline_exceeded"):
                    return None, "incomplete", again.cause, None
                return await self._extract(turn, cause)
        calls, text, _ = self._read_step(turn, response)
        submits = [c for c in calls if c.name == SUBMIT]
        if not submits:
            turn.add({"next_thought": text, "tool_calls": (), "tool_call_results": ()} if text else {"tool_calls": ()})
            return await self._extract(turn, cause)
        outcome = await self._run_calls(turn, submits, text, only=(SUBMIT,))
        if outcome is None:
            failed = [r.error for r in turn.entries[-1]["tool_call_results"] if r.error]
            turn.errors.extend(str(e) for e in failed)
            return None, "incomplete", cause, None
        return outcome[0], "forced_submit", cause, None

    async def _extract(
        self, turn: _Turn, cause: TerminationCause
    ) -> tuple[Mapping[str, Any] | None, TerminationReason, TerminationCause | None, str | None]:
        """A typed extractor with no tools reads the history and fills the outputs."""
        extractor_sig = Signature(
            [*self.signature.inputs.values(), Field("trajectory", "input", str)],
            list(self.signature.outputs.values()),
            f"{self.signature.instructions}\n\n{_EXTRACT_INSTRUCTIONS}",
            name="ReActExtract",
        )
        extractor = ChainOfThought.build(extractor_sig, lm=turn.lm, adapter=turn.adapter)
        config = {k: v for k, v in turn.config.items() if k not in ("tools", "tool_choice")}
        values = {k: v for k, v in turn.inputs.items() if k in self.signature.inputs}
        values["trajectory"] = trajectory_text(list(turn.history[turn.cut :]), self.signature)
        values["config"] = config
        try:
            prediction = await extractor.acall(values)
        except AdapterParseError as exc:
            turn.errors.append(_error_text(exc))
            return None, "incomplete", cause, None
        except LMError as exc:
            if exc.context_window_exceeded:
                turn.errors.append(_error_text(exc))
                return None, "incomplete", "context_window_exceeded", None
            raise ReActStepError(f"the extractor's request failed: {exc}", history=turn.history, cause=exc) from exc
        outputs = {k: prediction.fields[k] for k in self.signature.outputs}
        turn.add({**outputs, "tool_calls": ()})
        return outputs, "extracted", cause, None

    def _failed_last_request(
        self, turn: _Turn, stop: _Interrupted
    ) -> tuple[Mapping[str, Any] | None, TerminationReason, TerminationCause | None, str | None]:
        if stop.cause in ("context_window_exceeded", "deadline_exceeded"):
            return None, "incomplete", stop.cause, None
        error = stop.error
        raise ReActStepError(
            f"the last request of the turn failed: {error}", history=turn.history, cause=error
        ) from error


class _DeadlineDuringTools(Exception):
    """Internal: the deadline passed while a step's tools ran."""


def _forward_tool_event(event: ToolEvent) -> None:
    emit(event.kind, **{k: v for k, v in event.dump().items() if k != "kind"})


def _deadline_passed() -> bool:
    left = time_left()
    return left is not None and left <= 0


def _error_text(exc: BaseException) -> str:
    from imp._redact import redact_text

    return redact_text(f"{type(exc).__name__}: {exc}")


def _refuses_named_choice(error: LMError) -> bool:
    if error.tool_choice_unsupported:
        return True
    text = f"{error.message} {error.body}".lower()
    return (
        "tool_choice" in text
        and ("invalid" in text or "unsupported" in text or "only" in text)
        and ("required" in text or "supported string" in text or "auto" in text)
    )


def _check_outputs(signature: Signature, values: Mapping[str, Any], tool_name: str) -> dict[str, Any]:
    missing = [n for n in signature.outputs if n not in values]
    if missing:
        raise ToolError(f"{tool_name} is missing: {', '.join(missing)}", outcome="refused")
    try:
        return ChatAdapter().parse_mapping(signature, values)
    except AdapterParseError as exc:
        detail = str(exc).split(": ", 1)[-1]
        raise ToolError(f"{tool_name} got outputs that do not fit: {detail}", outcome="refused") from None


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
    """A ReAct program (seed 001) over `tools`: `imp.tool`s, or plain functions (made tools with
    `imp.tool`). Options: `lm`, `adapter`, `demos`, `config`, `adapter_opts`, `max_iters`, `finish`,
    `finish_on`, `last_request_note`, `last_request_tools`, `unsent_note`, `history_replay`, `tool_policy`."""
    check_options("imp.react", options, _OPTIONS)
    if not isinstance(tools, list | tuple):
        raise TypeError("imp.react takes a list of tools")
    return ReAct(as_signature(signature), tuple(tools), **options)
