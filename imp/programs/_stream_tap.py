"""Where a streamed run's pieces go: while `imp.stream` runs a program, its LM requests stream."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from imp.adapters.base import Adapter
from imp.models.base import LM, LMResponse, Message
from imp.prediction import Prediction
from imp.records import ToolOutcome
from imp.signature import Signature

__all__ = ["StreamPart", "StreamPartKind", "Tap", "current_tap", "streamed_request"]

StreamPartKind = Literal["field", "reasoning", "tool_call", "tool_result", "retry", "final"]


@dataclass(frozen=True, slots=True)
class StreamPart:
    """One piece of a streamed run, in order.

    - `field`: `delta` is more of output `field`'s text, as the LM writes it.
    - `reasoning`: `delta` is more of the provider's own reasoning text.
    - `tool_call` / `tool_result`: a `react` step's decided call (`arguments`) and its result
      (`output` or `error`, and `outcome`), with `tool_name` and `tool_call_id`.
    - `retry`: the reply could not be read and is asked again (`reason`; the JSON fallback):
      the fields' deltas start over.
    - `final`: `prediction` is the run's Prediction, what `imp.call` returns.
    """

    kind: StreamPartKind
    field: str | None = None
    delta: str = ""
    tool_name: str | None = None
    tool_call_id: str | None = None
    arguments: Any = None
    output: Any = None
    error: str | None = None
    outcome: ToolOutcome | None = None
    reason: str | None = None
    prediction: Prediction | None = None


@dataclass(slots=True)
class Tap:
    """The receiver of one streamed run's pieces (called inline, on the run's task)."""

    put: Callable[[StreamPart], None]
    call_id: str | None = None
    """The streamed call's run: a call nested inside it (a program a tool calls) is not streamed."""

    def streams(self, call_id: str | None) -> bool:
        """Whether a request made in the run `call_id` is the streamed call's own."""
        return self.call_id is None or call_id is None or call_id == self.call_id


_tap: ContextVar[Tap | None] = ContextVar("imp_stream_tap", default=None)
any_tap = _tap.get
"""The innermost stream's tap, or None: the hot path asks this bound method before `current_tap`."""


def current_tap() -> Tap | None:
    """The stream this run's pieces go to, or None when nobody streams it (or the run is nested in it)."""
    tap = _tap.get()
    if tap is None or tap.call_id is None:
        return tap
    from imp.runtime.run import current_run

    run = current_run()
    return tap if tap.streams(run.call_id if run is not None else None) else None


def set_tap(tap: Tap | None) -> Any:
    """Send this context's pieces to `tap`; returns the token to reset."""
    return _tap.set(tap)


async def streamed_request(
    tap: Tap,
    lm: LM,
    messages: Sequence[Message],
    options: Mapping[str, Any],
    reader: tuple[Adapter, Signature] | None,
) -> LMResponse:
    """One LM request sent streamed: its reasoning and field deltas go to `tap`, the fields read as
    `reader`'s adapter splits its replies (its `field_splitter`); returns the whole response."""
    splitter = None
    if reader is not None:
        adapter, signature = reader
        if signature.outputs:
            splitter = adapter.field_splitter(signature)
    final: LMResponse | None = None
    async for event in lm.stream(messages, **options):
        if event.kind == "text":
            if splitter is not None and event.delta:
                for name, delta in splitter.feed(event.delta):
                    tap.put(StreamPart("field", field=name, delta=delta))
        elif event.kind == "reasoning":
            if event.delta:
                tap.put(StreamPart("reasoning", delta=event.delta))
        elif event.kind == "final":
            final = event.response
    if splitter is not None:
        for name, delta in splitter.close():
            tap.put(StreamPart("field", field=name, delta=delta))
    if final is None:
        from imp.errors import StreamBroken

        raise StreamBroken("the stream ended without its final response", provider=lm.provider, code="stream_broken")
    return final
