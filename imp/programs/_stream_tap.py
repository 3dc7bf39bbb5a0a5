"""Where a streamed run's pieces go: while `imp.stream` runs a program, its LM requests stream.

The tap is a context variable, so every request the streamed program makes reaches it: a
predictor it awaits with `imp.call` or `.acall`, the items of an `imp.parallel` it runs, a
function program, a tool loop's steps. A tool's body is the one place it does not reach
(`imp.runtime.run.unstreamed`): a program a tool calls answers as the tool's result.
Each part says which predictor wrote it (`path`), by the names `program.parameters()` gives.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import TYPE_CHECKING, Any

from imp.adapters.base import Adapter
from imp.exchanges import current_program_label
from imp.models.base import LM, LMResponse, Message
from imp.programs._partial import PartialReader
from imp.programs._stream_part import StreamPart, StreamPartKind
from imp.runtime.run import stream_tap
from imp.signature import Signature

if TYPE_CHECKING:
    from imp.programs.base import Program

__all__ = [
    "StreamPart",
    "StreamPartKind",
    "Tap",
    "any_tap",
    "current_path",
    "current_tap",
    "set_tap",
    "streamed_request",
    "streaming_item",
    "streaming_program",
]


@dataclass(slots=True)
class Tap:
    """The receiver of one streamed run's pieces (called inline, on the run's tasks)."""

    put: Callable[[StreamPart], None]
    root: Program | None = None
    """The streamed program: its predictors' names are the parts' paths."""
    partial: bool = False
    """Whether `partial` parts are made (`imp.stream(..., partial=True)`)."""
    _names: dict[int, str] | None = None
    _held: list[Any] = dataclass_field(default_factory=list)

    def path_of(self, program: Program) -> str:
        """The path of a predictor program's parts: its name in the streamed program's
        `parameters()`; for one the streamed program does not hold, the enclosing predictor's path
        (a tool loop's inner steps), else its own name under the calling function program's
        (`"draft.predict"` for `@imp.fn def draft`'s); then the `imp.parallel` items it is in."""
        names = self._names
        if names is None:
            names = {}
            if self.root is not None:
                for name, held in self.root.predictor_programs():
                    names.setdefault(id(held), name)
                    self._held.append(held)  # alive while the stream is, so an id names one program
            self._names = names
        known = names.get(id(program))
        if known is None:
            enclosing = _path.get()
            if enclosing is not None:
                return enclosing[1]
            own = next((name for name, held in program.predictor_programs() if held is program), None)
            own = own or type(program).__name__.lower()
            label = current_program_label()
            known = f"{label}.{own}" if label else own
        return known + _items.get()


any_tap = stream_tap.get
"""The stream this context's pieces go to, or None: the hot path asks this bound method."""
current_tap = stream_tap.get


def set_tap(tap: Tap | None) -> Any:
    """Send this context's pieces to `tap`; returns the token to reset."""
    return stream_tap.set(tap)


_path: ContextVar[tuple[Program, str] | None] = ContextVar("imp_stream_path", default=None)
_items: ContextVar[str] = ContextVar("imp_stream_items", default="")


def current_path() -> str | None:
    """The path of the predictor streaming in this context, or None."""
    entered = _path.get()
    return entered[1] if entered is not None else None


def entered(program: Program) -> bool:
    """Whether `program` is the predictor this context streams for (its `acall` already named it)."""
    current = _path.get()
    return current is not None and current[0] is program


@contextmanager
def streaming_program(tap: Tap, program: Program, sibling: str | None = None) -> Iterator[None]:
    """Name the parts made inside the block after `program` (a predictor: predict, react); with
    `sibling`, after that predictor of the enclosing program instead (a loop's `extract`)."""
    if sibling is None:
        path = tap.path_of(program)
    else:
        enclosing = current_path() or ""
        bare = enclosing.removesuffix(_items.get())
        path = (f"{bare.rpartition('.')[0]}.{sibling}" if "." in bare else sibling) + _items.get()
    token = _path.set((program, path))
    try:
        yield
    finally:
        _path.reset(token)


@contextmanager
def streaming_item(index: int) -> Iterator[None]:
    """Mark the parts made inside the block as the `index`-th item of an `imp.parallel`."""
    token = _items.set(f"{_items.get()}[{index}]")
    try:
        yield
    finally:
        _items.reset(token)


def part(kind: StreamPartKind, **fields: Any) -> StreamPart:
    """A part of the predictor streaming here."""
    return StreamPart(kind, path=current_path(), **fields)


async def streamed_request(
    tap: Tap,
    lm: LM,
    messages: Sequence[Message],
    options: Mapping[str, Any],
    reader: tuple[Adapter, Signature] | None,
) -> LMResponse:
    """One LM request sent streamed: its reasoning and field deltas go to `tap`, the fields read as
    `reader`'s adapter splits its replies (its `field_splitter`); returns the whole response.
    With `tap.partial`, the outputs so far go to it too, typed, as `partial` parts."""
    path = current_path()
    splitter = None
    partial: PartialReader | None = None
    if reader is not None:
        adapter, signature = reader
        if signature.outputs:
            splitter = adapter.field_splitter(signature)
            if tap.partial:
                partial = PartialReader(adapter, signature, path)
    put = tap.put
    final: LMResponse | None = None
    async for event in lm.stream(messages, **options):
        kind = event.kind
        if kind == "text":
            if splitter is not None and event.delta:
                for name, delta in splitter.feed(event.delta):
                    put(StreamPart("field", field=name, delta=delta, path=path))
                    if partial is not None:
                        partial.feed(name, delta, put)
        elif kind == "reasoning":
            if event.delta:
                put(StreamPart("reasoning", delta=event.delta, path=path))
        elif kind == "tool_call":
            if partial is not None:
                partial.feed_call(event.index, event.tool_name, event.delta, put)
        elif kind == "final":
            final = event.response
    if splitter is not None:
        for name, delta in splitter.close():
            put(StreamPart("field", field=name, delta=delta, path=path))
            if partial is not None:
                partial.feed(name, delta, put)
    if final is None:
        from imp.errors import StreamBroken

        raise StreamBroken("the stream ended without its final response", provider=lm.provider, code="stream_broken")
    if partial is not None:
        partial.close(final, put)
    return final
