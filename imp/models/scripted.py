"""Scripted LMs for tests and demos: `ScriptedLM` replays steps, `StaticLM` asks a handler."""

from __future__ import annotations

import dataclasses
import inspect
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from imp.errors import LMError
from imp.models._guard import reserve_for, settle_failure
from imp.models._prices import Prices, as_prices, priced
from imp.models.base import LM, LMCapabilities, LMResponse, Message, ResponseFormatSupport, Usage
from imp.records import ToolCall
from imp.runtime.budget import Reservation, open_budgets, settle
from imp.runtime.usage import record_usage

__all__ = ["ScriptedLM", "ScriptedRequest", "StaticLM", "Step", "to_response"]

Step = str | Mapping[str, Any] | LMResponse | BaseException
"""What a scripted LM returns for one request: text (parsed by the adapter for real), a mapping of
output fields, a mapping with `tool_calls` (native calls) and optional `next_thought` or text
field, a ready `LMResponse`, or an exception to raise."""

_NO_USAGE = Usage(requests=1)


@dataclass(frozen=True, slots=True)
class ScriptedRequest:
    """One request a scripted LM received: the messages and the options."""

    messages: list[Message]
    options: dict[str, Any]


def to_response(step: Step, *, request_number: int = 1, model: str = "scripted") -> LMResponse:
    """Turn one scripted step into an `LMResponse` (raising it if it is an exception)."""
    if isinstance(step, LMResponse):
        return step
    if isinstance(step, BaseException):
        raise step
    if isinstance(step, str):
        return LMResponse(text=step, model=model, usage=_NO_USAGE)
    if not isinstance(step, Mapping):
        raise TypeError(f"a scripted step is text, a mapping or an LMResponse, got {type(step).__name__}")
    if "tool_calls" not in step:
        return LMResponse(fields=dict(step), model=model, usage=_NO_USAGE)
    calls: list[ToolCall] = []
    for index, raw in enumerate(step["tool_calls"] or ()):
        call = raw if isinstance(raw, ToolCall) else ToolCall.load(raw)
        if not call.id:
            call = ToolCall(id=f"call_{request_number}_{index}", name=call.name, arguments=call.arguments)
        calls.append(call)
    others = {k: v for k, v in step.items() if k not in ("tool_calls", "next_thought", "reasoning")}
    text = step.get("next_thought")
    if text is None and len(others) == 1:
        (only,) = others.values()
        text = only if isinstance(only, str) else None
    return LMResponse(
        text=str(text or ""),
        tool_calls=tuple(calls),
        fields=others or None,
        reasoning=step.get("reasoning"),
        finish_reason="tool_calls" if calls else "stop",
        model=model,
        usage=_NO_USAGE,
    )


class _RecordingLM(LM):
    provider = "scripted"

    def __init__(
        self,
        *,
        model: str,
        response_format: ResponseFormatSupport,
        tool_calling: bool,
        prices: Prices | Mapping[str, float] | None = None,
    ) -> None:
        self.model = model
        self.capabilities = LMCapabilities(tool_calling=tool_calling, response_format=response_format)
        self.requests: list[ScriptedRequest] = []
        self.prices = as_prices(prices)
        """Dollars per million tokens, to price the usage a scripted step reports (a budget's `usd`)."""

    def _reserve(self, messages: Sequence[Message], options: Mapping[str, Any]) -> Reservation | None:
        """Hold the request's worst case in the open budgets, as imp's HTTP clients do."""
        return reserve_for(self, messages, options, default_output=None)[0] if open_budgets.get() else None

    def _counted(self, response: LMResponse, reservation: Reservation | None = None) -> LMResponse:
        if self.prices is not None and response.usage.cost is None:
            response = dataclasses.replace(response, usage=priced(response.usage, self.prices))
        record_usage(f"{self.provider}:{self.model}", response.usage)
        settle(reservation, response.usage, reported=True)  # a scripted step's usage is what it says
        return response

    def _record(self, messages: Sequence[Message], options: Mapping[str, Any]) -> int:
        self.requests.append(ScriptedRequest([Message(**m) for m in messages], dict(options)))
        return len(self.requests)


class ScriptedLM(_RecordingLM):
    """Replays a list of steps, one per request, and records every request it gets.

    When the steps run out, the next request fails with an `LMError`, unless `exhausted`
    gives a step to repeat (the seed's scripts answer `{"tool_calls": []}`).
    """

    def __init__(
        self,
        steps: Iterable[Step],
        *,
        model: str = "scripted",
        response_format: ResponseFormatSupport = "none",
        tool_calling: bool = True,
        exhausted: Step | None = None,
        prices: Prices | Mapping[str, float] | None = None,
    ) -> None:
        super().__init__(model=model, response_format=response_format, tool_calling=tool_calling, prices=prices)
        self._steps = list(steps)
        self._next = 0
        self._exhausted = exhausted

    @property
    def remaining(self) -> int:
        """How many scripted steps have not been used."""
        return len(self._steps) - self._next

    async def request(self, messages: Sequence[Message], **options: Any) -> LMResponse:
        reservation = self._reserve(messages, options)
        number = self._record(messages, options)
        if self._next < len(self._steps):
            step = self._steps[self._next]
            self._next += 1
        elif self._exhausted is not None:
            step = self._exhausted
        else:
            settle_failure(reservation, LMError("out of steps", provider="scripted"))
            raise LMError(f"ScriptedLM ran out of steps after {len(self._steps)}", provider="scripted")
        try:
            response = to_response(step, request_number=number, model=self.model)
        except BaseException as error:
            settle_failure(reservation, error)
            raise
        return self._counted(response, reservation)


Handler = Callable[[list[Message], dict[str, Any]], Step | Awaitable[Step]]


class StaticLM(_RecordingLM):
    """Asks a handler `fn(messages, options)` (sync or async) for each step."""

    def __init__(
        self,
        handler: Handler,
        *,
        model: str = "static",
        response_format: ResponseFormatSupport = "none",
        tool_calling: bool = True,
        prices: Prices | Mapping[str, float] | None = None,
    ) -> None:
        super().__init__(model=model, response_format=response_format, tool_calling=tool_calling, prices=prices)
        self._handler = handler

    async def request(self, messages: Sequence[Message], **options: Any) -> LMResponse:
        reservation = self._reserve(messages, options)
        number = self._record(messages, options)
        try:
            step = self._handler(list(messages), dict(options))
            if inspect.isawaitable(step):
                step = await step
            response = to_response(step, request_number=number, model=self.model)
        except BaseException as error:
            settle_failure(reservation, error)
            raise
        return self._counted(response, reservation)
