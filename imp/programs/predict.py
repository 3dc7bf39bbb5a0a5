"""Predict and ChainOfThought: one formatted request, one parsed reply, and the JSON fallback."""

from __future__ import annotations

import time
import typing
import warnings
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from imp.adapters._names import as_adapter
from imp.adapters.base import Adapter, FormatOptions
from imp.adapters.chat import ChatAdapter
from imp.errors import AdapterParseError, ImpError, InvalidInputError, LMError, MissingInputError
from imp.exchanges import record_exchange
from imp.models.base import LM, LMResponse, Message
from imp.prediction import Example, Prediction, PredictionMetadata
from imp.programs._journaled import journaled_request
from imp.programs._parameters import Changes, Parameters, Predictor, open_trace, trace_call
from imp.programs._stream_tap import any_tap, entered, part, streamed_request, streaming_program
from imp.programs.base import Program
from imp.runtime.events import ModelError, ModelRequest, ModelResponse
from imp.runtime.journal import current_journal_scope
from imp.runtime.run import Run, current_run
from imp.runtime.usage import (
    UsageAccumulator,
    innermost_accumulator,
    record_unrecorded_since,
    records_in,
    track_usage,
)
from imp.settings import settings
from imp.signature import Signature, SignatureLike, as_signature
from imp.values import check_input

__all__ = ["ChainOfThought", "Predict", "chain_of_thought", "predict", "resolve_lm"]

_DEFAULT_ADAPTER = ChatAdapter()
"""No extra event fields (read only, shared)."""
PREDICTOR = "predict"
"""The name of a Predict's (and a ChainOfThought's) one predictor in `parameters()`."""
_OPTIONS = frozenset({"lm", "adapter", "demos", "config", "adapter_opts", "json_fallback", "validate", "max_retries"})
_REQUEST_OPTIONS = frozenset(
    {"temperature", "max_tokens", "top_p", "stop", "seed", "n", "reasoning_effort", "response_format", "timeout"}
)
_METADATA_INPUTS = frozenset({"user_name"})

Validator = Callable[[Prediction], Awaitable[None] | None]
"""`check(prediction)`, sync or async: returns to accept, raises `imp.Retry("why")` to re-ask."""
CheckedCall = Callable[["Predict", dict[str, Any]], Awaitable[Prediction]]
_checked_call: list[CheckedCall] = []
"""The call of a Predict whose answers are checked and re-asked: `imp.programs._validate` puts it
here when it loads (it reads this module's request functions, so this module cannot import it)."""


def use_checked_call(call: CheckedCall) -> None:
    """Install the checked call (`imp.programs._validate.validated_call`)."""
    _checked_call[:] = [call]


def check_retry_options(validate: object, max_retries: object) -> None:
    """Refuse a `validate` that is not a function and a `max_retries` that is not a whole number >= 0."""
    if validate is not None and not callable(validate):
        raise TypeError(f"validate= takes a function check(prediction), got {type(validate).__name__}")
    if max_retries is not None and (
        isinstance(max_retries, bool) or not isinstance(max_retries, int) or max_retries < 0
    ):
        raise ValueError(f"max_retries is a whole number >= 0, got {max_retries!r}")


def check_options(kind: str, options: Mapping[str, object], known: frozenset[str]) -> None:
    """Refuse options a program does not know, naming them (request options belong in `config`)."""
    unknown = sorted(set(options) - known)
    if not unknown:
        return
    hint = ""
    if set(unknown) & _REQUEST_OPTIONS:
        hint = "; request options such as temperature or max_tokens go in config={...}"
    raise TypeError(f"{kind} got unknown option(s) {unknown}{hint}; known: {sorted(known)}")


_NUMBER_OPTIONS = frozenset({"timeout", "temperature", "top_p"})
_COUNT_OPTIONS = frozenset({"max_tokens", "n", "seed"})


def check_config(config: object, *, option: str = "config") -> Mapping[str, Any]:
    """Refuse request options of the wrong kind when the program is built (`timeout="10"`)."""
    if not isinstance(config, Mapping):
        raise TypeError(f"{option} must be a mapping of request options, got {type(config).__name__}")
    for key, value in config.items():
        if value is None:
            continue
        is_number = isinstance(value, int | float) and not isinstance(value, bool)
        if key in _NUMBER_OPTIONS and (not is_number or (key == "timeout" and value <= 0)):
            need = "a positive number of seconds" if key == "timeout" else "a number"
            raise TypeError(f"{option}[{key!r}] must be {need}, got {value!r}")
        if key in _COUNT_OPTIONS and (not isinstance(value, int) or isinstance(value, bool)):
            raise TypeError(f"{option}[{key!r}] must be an integer, got {value!r}")
    return config


def check_lm(lm: object) -> LM | None:
    """Refuse an `lm=` that is not an LM client (a model string names one through `imp.lm`)."""
    if lm is None or isinstance(lm, LM):
        return lm
    if isinstance(lm, str):
        raise TypeError(f"lm= takes an LM client, not a model name: write lm=imp.lm({lm!r})")
    if not callable(getattr(lm, "request", None)):
        raise TypeError(f"lm= takes an LM client such as imp.lm('openai:gpt-4o'), got {type(lm).__name__}")
    return typing.cast(LM, lm)


def check_demos(demos: object) -> tuple[Mapping[str, Any], ...]:
    """Demos as a tuple, each a mapping of fields (or an `imp.Example`); a string is refused."""
    if isinstance(demos, str | bytes | Mapping) or not isinstance(demos, Iterable):
        raise TypeError(f"demos is a list of mappings of fields, got {type(demos).__name__}")
    out = tuple(demos)
    for i, demo in enumerate(out):
        if not isinstance(demo, Mapping | Example | Prediction):
            raise TypeError(f"demos[{i}] is a mapping of fields (or an imp.Example), got {type(demo).__name__}")
    return out


def resolve_lm(lm: LM | None) -> LM:
    """The program's LM, else the one in `imp.context` / `imp.configure`."""
    chosen = lm if lm is not None else settings().lm
    if chosen is None:
        raise ImpError("no LM configured: pass lm=... to the program, or call imp.configure(lm=...)")
    return chosen


_RUN_SETTINGS = {
    "deadline": "a deadline is `with imp.deadline(seconds):` around the call",
    "timeout": "a deadline is `with imp.deadline(seconds):` around the call",
    "lm": "the LM is `program.using(lm=...)` or `with imp.context(lm=...):`",
    "adapter": "the adapter is `program.using(adapter=...)` or `with imp.context(adapter=...):`",
}
"""Run settings sometimes passed as inputs, and where they go instead."""


def _unknown_inputs_message(unknown: list[str]) -> str:
    message = f"inputs not in the signature are ignored: {', '.join(sorted(unknown))}"
    hints = [_RUN_SETTINGS[name] for name in sorted(unknown) if name in _RUN_SETTINGS]
    return message + "".join(f"; {hint}" for hint in dict.fromkeys(hints))


def prepare_inputs(signature: Signature, inputs: Mapping[str, object]) -> dict[str, Any]:
    """Fill input defaults, warn about unknown inputs, refuse missing or ill-fitting ones (before any LM call).

    A required input (no default, None not allowed) given None is refused: a JSON body's `null`
    is not an answer to it. An input with a default given None takes its default.
    The given dict itself comes back when nothing needed filling (the usual call: no copy that
    lives while the request waits); a copy when a default was filled in.
    """
    values = inputs if type(inputs) is dict else dict(inputs)
    copied = values is not inputs
    if values.keys() != signature.inputs.keys():  # the usual call has every input and nothing else
        if not copied:
            values, copied = dict(inputs), True
        unknown = [k for k in values if k not in signature.inputs and k not in _METADATA_INPUTS]
        if unknown and settings().warn_on_unknown_inputs:
            warnings.warn(_unknown_inputs_message(unknown), UserWarning, stacklevel=4)
        missing: list[str] = []
        for name, f in signature.inputs.items():
            if name not in values:
                if f.has_default:
                    values[name] = f.default
                elif not f.optional:
                    missing.append(name)
        if missing:
            raise MissingInputError(missing, given=unknown)
    for name, f in signature.inputs.items():
        value = values.get(name)
        if value.__class__ is str and f.is_plain_text:
            continue  # the common case costs one check
        if value is None:
            if name not in values or f.optional:
                continue
            if not f.has_default:
                raise InvalidInputError(
                    name, "is required and was given None; give it a value, or declare it optional or with a default"
                )
            if not copied:
                values, copied = dict(inputs), True
            values[name] = f.default
        else:
            check_input(f, value)
    return values


@dataclass(frozen=True, slots=True)
class LoopStep:
    """Which step of a tool loop sends a request: its events say so."""

    step: int
    forced: bool = False
    """The last request of an interrupted turn."""


async def request(
    lm: LM,
    messages: list[Message],
    options: Mapping[str, Any],
    *,
    program: str | None = None,
    reads: tuple[Adapter, Signature] | None = None,
    loop: LoopStep | None = None,
) -> LMResponse:
    """One LM request, recorded for `inspect_history` (under `program`, the sender's label) and counted once in the open usage
    accumulators (`record_unrecorded_since`), and reported as `model_request` then `model_response`
    (model, usage, duration) or `model_error` events (with the `loop` step that sent it), unless the
    program announced the request itself. Under `imp.stream` the request is streamed and the
    reply's fields, read as `reads` (an adapter and signature), go to the stream as they come."""
    run = request_started(lm, messages, loop)
    started = time.perf_counter()
    accumulator = innermost_accumulator()
    seen = records_in(accumulator)
    tap = any_tap()
    try:
        if current_journal_scope.get() is not None:
            response = await journaled_request(lm, messages, options, tap, reads)
        elif tap is None:
            response = await lm.request(messages, **options)
        else:
            response = await streamed_request(tap, lm, messages, options, reads)
    except LMError as exc:
        request_failed(lm, messages, options, exc, run, started, loop, program)
        raise
    request_finished(lm, messages, options, response, run, started, accumulator, seen, loop, program)
    return response


# `request` in synchronous parts around the one await, so that `Predict.acall` awaits the LM
# itself: one coroutine frame fewer per call in flight, and nothing made before the request that
# lives across it (the usage mark is two locals, not a tuple; what was sent is merged afterwards).


def request_started(lm: LM, messages: list[Message], loop: LoopStep | None) -> Run | None:
    """The run to report this request's events to (None when it has no listener or the program
    announced the request itself), its `model_request` already delivered."""
    run = current_run()
    if run is None or run.on_event is None or run.model_request_announced:
        return None
    model = f"{lm.provider}:{lm.model}"
    if loop is None:
        run.deliver(ModelRequest(model, len(messages)))
    else:
        run.deliver(ModelRequest(model, len(messages), loop.step, loop.forced))
    return run


def sent_options(lm: LM, options: Mapping[str, object]) -> Mapping[str, Any]:
    """What was sent: the client's own default options (`imp.lm(..., temperature=0.2)`) under the request's."""
    defaults = lm.defaults
    return {**defaults, **options} if defaults else options


def request_failed(
    lm: LM,
    messages: list[Message],
    options: Mapping[str, object],
    error: LMError,
    run: Run | None,
    started: float,
    loop: LoopStep | None,
    program: str | None,
) -> None:
    """Record a failed request for `inspect_history` and report its `model_error` event."""
    record_exchange(lm.model, messages, sent_options(lm, options), None, str(error), program=program)
    if run is not None:
        run.deliver(model_error(lm, error, time.perf_counter() - started, loop))


def request_finished(
    lm: LM,
    messages: list[Message],
    options: Mapping[str, object],
    response: LMResponse,
    run: Run | None,
    started: float,
    accumulator: UsageAccumulator | None,
    seen: int,
    loop: LoopStep | None,
    program: str | None,
) -> None:
    """Record a request for `inspect_history`, count its usage once (unless the LM recorded it since
    the mark `accumulator`, `seen`), and report its `model_response` event."""
    record_exchange(lm.model, messages, sent_options(lm, options), response, program=program)
    record_unrecorded_since(accumulator, seen, f"{lm.provider}:{lm.model}", response.usage)
    if run is not None:
        run.deliver(model_response(lm, response, time.perf_counter() - started, loop))


def model_response(lm: LM, response: LMResponse, duration: float, loop: LoopStep | None) -> ModelResponse:
    """What a `model_response` event says: model, finish reason, tool calls, usage, duration."""
    return ModelResponse(
        f"{lm.provider}:{lm.model}",
        response.finish_reason,
        tuple([c.name for c in response.tool_calls]) if response.tool_calls else (),
        response.usage,
        response.cache_hit,
        round(duration, 6),
        loop.step if loop is not None else None,
        loop.forced if loop is not None else None,
    )


def model_error(lm: LM, error: LMError, duration: float, loop: LoopStep | None) -> ModelError:
    """What a `model_error` event says: model, status, whether retryable, the error and its type, duration."""
    return ModelError(
        f"{lm.provider}:{lm.model}",
        error.status,
        type(error).__name__,
        error.retryable,
        str(error),
        round(duration, 6),
        loop.step if loop is not None else None,
        loop.forced if loop is not None else None,
    )


def request_options(adapter: Adapter, signature: Signature, lm: LM, config: Mapping[str, object]) -> Mapping[str, Any]:
    """The options of a request: the adapter's for this LM (structured output) under the program's
    `config`; `config` itself when the adapter adds none (no new dict kept while the request waits)."""
    extra = adapter.request_options(signature, lm)
    return {**extra, **config} if extra else config


def read_response(adapter: Adapter, signature: Signature, response: LMResponse) -> dict[str, Any]:
    """The output fields of a response: its mapping of fields if it has one, else its text (a parse
    error says when the reply was cut by `max_tokens`)."""
    try:
        if response.fields is not None and not response.text:
            return adapter.parse_mapping(signature, response.fields)
        return adapter.parse_text(signature, response.text)
    except AdapterParseError as exc:
        exc.with_finish_reason(response.finish_reason)
        raise


_FORMAT_RANK = {"none": 0, "text": 0, "json_object": 1, "json_schema": 2}


def fallback_request(options: Mapping[str, Any], lm: LM) -> str:
    """How the JSON fallback's request was sent, for its parse error: the `response_format` it
    asked for, and whether the server refused it and the LM stepped down (its capabilities say so
    once it has: `response_format` json_schema -> json_object -> none)."""
    asked_format = options.get("response_format")
    asked = asked_format.get("type") if isinstance(asked_format, Mapping) else None
    if not isinstance(asked, str):
        return "no response_format"
    now = getattr(lm.capabilities, "response_format", asked)
    if _FORMAT_RANK.get(now, 0) < _FORMAT_RANK.get(asked, 0):
        sent = "no response_format" if now == "none" else f"response_format {now}"
        return f"response_format {asked}, which the server refused; sent again with {sent}"
    return f"response_format {asked}"


@dataclass(frozen=True, eq=False)
class Predict(Program):
    """Ask the LM for the signature's outputs in one request (with one JSON fallback on a parse error)."""

    signature: Signature
    lm: LM | None = None
    adapter: Adapter | None = None
    demos: tuple[Mapping[str, Any], ...] = ()
    config: Mapping[str, Any] = field(default_factory=dict)
    adapter_opts: Mapping[str, Any] = field(default_factory=dict)
    json_fallback: bool = True
    validate: Validator | None = None
    """`check(prediction)`: returns to accept the answer, raises `imp.Retry("why")` to ask again."""
    max_retries: int | None = None
    """Re-asks after a refused or unreadable answer (default 2 with `validate`, else none: a parse
    error then goes straight to the JSON fallback)."""

    _format_options: FormatOptions = field(init=False, repr=False, compare=False)
    """The adapter options and demos, read once when the program is built."""

    def __post_init__(self) -> None:
        given: Any = self.signature
        if not isinstance(given, Signature):
            object.__setattr__(self, "signature", as_signature(given))
        if not isinstance(self.adapter_opts, Mapping):
            raise TypeError(f"adapter_opts must be a mapping, got {type(self.adapter_opts).__name__}")
        check_config(self.config)
        if not isinstance(self.json_fallback, bool):
            raise TypeError(f"json_fallback is True or False, got {type(self.json_fallback).__name__}")
        check_retry_options(self.validate, self.max_retries)
        object.__setattr__(self, "lm", check_lm(self.lm))
        object.__setattr__(self, "adapter", as_adapter(self.adapter))
        object.__setattr__(self, "demos", check_demos(self.demos))
        object.__setattr__(self, "_format_options", FormatOptions.read({**self.adapter_opts, "demos": self.demos}))
        if self.adapter is not None:
            self.adapter.check(self.signature, self.demos)

    def with_lm(self, lm: LM) -> Predict:
        """The same program pinned to another LM."""
        return replace(self, lm=lm)

    def with_demos(self, demos: Sequence[Mapping[str, object]]) -> Predict:
        """The same program with other demos."""
        return replace(self, demos=tuple(demos))

    def parameters(self) -> Parameters:
        """One predictor, `predict`: the signature's instructions and the demos."""
        return Parameters((Predictor(PREDICTOR, self.signature.instructions, self.demos, self.signature),))

    def predictor_programs(self) -> list[tuple[str, Program]]:
        """Itself, as `predict`."""
        return [(PREDICTOR, self)]

    def apply_parameters(self, changes: Changes) -> Predict:
        """The same program with the optimizer's instructions and demos."""
        made = self
        if PREDICTOR in changes.instructions:
            made = replace(made, signature=made.signature.with_instructions(changes.instructions[PREDICTOR]))
        if PREDICTOR in changes.demos:
            made = replace(made, demos=changes.demos[PREDICTOR])
        return made

    def with_config(self, **config: object) -> Predict:
        """The same program with request options merged over its own."""
        return replace(self, config={**self.config, **config})

    async def acall(self, inputs: dict[str, Any], **call_options: object) -> Prediction:
        # Few frames from the inputs to the Prediction (this one, `request`, the LM's): at 10,000
        # calls in flight every extra frame is 10,000 more objects for the garbage collector to
        # walk (benchmarks/concurrency.py).
        tap = any_tap()
        if tap is not None and not entered(self):  # streamed: its parts are named after this predictor
            with streaming_program(tap, self):
                return await self.acall(inputs, **call_options)
        if self.validate is not None or self.max_retries:
            return await _checked_call[0](self, inputs)
        # `prepare_call`, inlined: no tuple made on the way in (benchmarks/concurrency.py counts per call).
        signature = self.signature
        config = self.config
        if "config" in inputs and "config" not in signature.inputs:
            per_call = check_config(inputs.pop("config"), option="the per-call config")
            config = {**config, **per_call}
        values = prepare_inputs(signature, inputs)
        lm = resolve_lm(self.lm)
        adapter = self.adapter or settings().adapter or _DEFAULT_ADAPTER
        opts = self._format_options
        # Entered and left by hand, not `with`: a `with` keeps the bound `__exit__` alive across the
        # await, one more object per call in flight for the garbage collector to walk.
        usage = track_usage().__enter__()
        try:
            messages = adapter.format_with(signature, values, opts)
            options = request_options(adapter, signature, lm, config)
            # `request`, inlined: this frame awaits the LM (or the stream) itself. Without a listener
            # no clock is read (no float lives across the wait): the duration is only for events.
            run = request_started(lm, messages, None)
            started = time.perf_counter() if run is not None else 0.0
            try:
                if current_journal_scope.get() is not None:
                    response = await journaled_request(lm, messages, options, tap, (adapter, signature))
                elif tap is None:
                    response = await lm.request(messages, **options)
                else:
                    response = await streamed_request(tap, lm, messages, options, (adapter, signature))
            except LMError as exc:
                request_failed(lm, messages, options, exc, run, started, None, type(self).__name__)
                raise
            # The mark is (usage, 0): the accumulator opened above is the innermost and has no records yet.
            request_finished(lm, messages, options, response, run, started, usage, 0, None, type(self).__name__)
            used, fell_back = adapter, False
            try:
                fields = read_response(adapter, signature, response)
            except AdapterParseError as first_error:
                fallback = adapter.fallback if self.json_fallback else None
                if fallback is None:
                    raise
                retry_messages = fallback.format_with(signature, values, opts)
                retry_options = {**fallback.request_options(signature, lm), **config}
                if tap is not None:
                    tap.put(part("retry", reason=f"{first_error}; asking again with {fallback.name}"))
                try:
                    response = await request(
                        lm, retry_messages, retry_options, program=type(self).__name__, reads=(fallback, signature)
                    )
                except LMError as exc:  # the provider's error, as itself; the note says why it was sent
                    exc.add_note(f"(the JSON fallback's request, sent because {first_error})")
                    raise
                try:
                    fields = read_response(fallback, signature, response)
                except AdapterParseError as second_error:
                    raise first_error.with_fallback(second_error, fallback_request(retry_options, lm)) from None
                used, fell_back = fallback, True
        finally:
            usage.__exit__()
        total, by_model = usage.snapshot()
        metadata = PredictionMetadata(
            finish_reason=response.finish_reason,
            usage=total,
            usage_by_model=by_model,
            adapter=used.name,
            json_fallback=fell_back,
            lm_calls=2 if fell_back else 1,
            model=response.answered_by,
        )
        if open_trace() is not None:  # an optimizer is tracing this run
            trace_call(self, values, fields)
        return Prediction(fields, metadata)


def prepare_call(
    program: Predict, inputs: dict[str, Any]
) -> tuple[Signature, dict[str, Any], LM, Adapter, Mapping[str, Any]]:
    """What one call of a Predict reads: its signature, the checked inputs, the LM, the adapter and the request options."""
    signature = program.signature
    config = program.config
    if "config" in inputs and "config" not in signature.inputs:
        per_call = check_config(inputs.pop("config"), option="the per-call config")
        config = {**config, **per_call}
    values = prepare_inputs(signature, inputs)
    adapter = program.adapter or settings().adapter or _DEFAULT_ADAPTER
    return signature, values, resolve_lm(program.lm), adapter, config


def predict(signature: SignatureLike | type[Signature], **options: Any) -> Predict:
    """A Predict program: `lm`, `adapter`, `demos`, `config`, `adapter_opts`, `json_fallback`,
    `validate` (a check that may raise `imp.Retry`) and `max_retries`."""
    check_options("imp.predict", options, _OPTIONS)
    return Predict(as_signature(signature), **options)


REASONING_FIELD = "reasoning"


@dataclass(frozen=True, eq=False)
class ChainOfThought(Predict):
    """Predict with a `reasoning` output written before the others (added when the signature lacks it)."""

    def __post_init__(self) -> None:
        super().__post_init__()
        if REASONING_FIELD not in self.signature.outputs:
            object.__setattr__(self, "signature", self.signature.prepend_output(REASONING_FIELD, str, ""))

    @classmethod
    def build(cls, signature: Signature, **options: Any) -> ChainOfThought:
        """Prepend the `reasoning` output to a signature and build the program."""
        return cls(signature.prepend_output(REASONING_FIELD, str, ""), **options)


def chain_of_thought(signature: SignatureLike | type[Signature], **options: object) -> ChainOfThought:
    """A ChainOfThought program: the options of `imp.predict`; prepends a `reasoning` output."""
    check_options("imp.chain_of_thought", options, _OPTIONS)
    return ChainOfThought.build(as_signature(signature), **options)
