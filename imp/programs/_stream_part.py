"""`StreamPart`: one piece of a streamed run, as `imp.stream` yields it."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Any, Literal

from imp.prediction import Prediction
from imp.records import ToolOutcome

__all__ = ["StreamPart", "StreamPartKind"]

StreamPartKind = Literal["field", "reasoning", "partial", "tool_call", "tool_result", "retry", "pending", "final"]


@dataclass(frozen=True, slots=True)
class StreamPart:
    """One piece of a streamed run, in order.

    - `field`: `delta` is more of output `field`'s text, as the LM writes it.
    - `reasoning`: `delta` is more of the provider's own reasoning text.
    - `partial` (with `imp.stream(..., partial=True)`): `value` is the outputs so far, typed (a
      dict of the output fields that have a value; `field` is the one that grew).
    - `tool_call` / `tool_result`: a `react` step's decided call (`arguments`) and its result
      (`output` or `error`, and `outcome`), with `tool_name` and `tool_call_id`.
    - `retry`: the answer is asked again (`reason`): the reply could not be read, or the
      program's validator refused it; the fields' deltas start over.
    - `pending`: the turn paused awaiting decisions: `pending` is the `imp.Pending` (and
      `prediction` the incomplete Prediction); it is the stream's last part.
    - `final`: `prediction` is the run's Prediction, what `imp.call` returns.

    `path` names the predictor a part came from, as `program.parameters()` names it
    (`"predict"`, `"draft.predict"`, `"react"`), with `[i]` for the i-th item of an
    `imp.parallel` (`"summarize.predict[3]"`); None on `pending` and `final`.
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
    pending: Any = None
    """The `imp.Pending` of a `pending` part."""
    path: str | None = None
    snapshot: Callable[[], dict[str, Any]] | None = dataclass_field(default=None, repr=False, compare=False)
    """How a `partial` part's value is made (once, when `value` is first read)."""
    _value: tuple[dict[str, Any]] | None = dataclass_field(default=None, repr=False, compare=False)

    @property
    def value(self) -> dict[str, Any] | None:
        """A `partial` part's outputs so far, typed (None on other parts).

        Made when first read and kept: a part costs the stream nothing more than its place in
        the reply, and a reader that skips a part never pays for its value.
        """
        if self.snapshot is None:
            return None
        if self._value is None:
            object.__setattr__(self, "_value", (self.snapshot(),))  # made once, on a frozen part
        assert self._value is not None
        return self._value[0]
