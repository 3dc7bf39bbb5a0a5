"""Partial typed values: a streamed reply's outputs as far as they have arrived (`imp.stream(..., partial=True)`).

Each output's text (as the adapter's splitter hands it on) is read once, incrementally, into a
small tree of append-only nodes: strings as their pieces, numbers and other atoms as text until
they end, lists and objects as their children. A `partial` part records only where the tree
stood (the open nodes and their lengths: the reply's nesting depth, not its size), and its value
is made from that record when it is first read, each finished node typed once and kept:

- a `str` output is its text so far;
- a number, bool, enum or literal appears once it is whole, and only when it validates;
- a list grows item by item (a string item as it is written, other items once they are);
- a pydantic model, dataclass or TypedDict has the fields that have arrived, each validated
  (missing required fields are absent, as `model_construct` leaves them);
- when an output ends, its value is the adapter's own reading of its text.

Never a value that fails validation: what does not validate is left out until it does.
"""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from typing import Any

from imp.adapters._partial_tree import MISSING, JSONTree, TagTree, members, typed
from imp.adapters.base import Adapter
from imp.models.base import LMResponse
from imp.programs._stream_part import StreamPart
from imp.signature import Field, Signature
from imp.values import CoercionError

__all__ = ["PartialReader", "submitting"]

Put = Callable[[StreamPart], None]
_submit: ContextVar[tuple[str | None, Signature] | None] = ContextVar("imp_stream_submit", default=None)


class submitting:
    """A tool loop's request: its partial values are the task's outputs (not a step's thought or
    its extractor's reasoning), from the request's fields and from the arguments of the tool
    `name` (`submit`), when there is one, as they stream."""

    def __init__(self, name: str | None, task: Signature) -> None:
        self._value = (name, task)
        self._token: Any = None

    def __enter__(self) -> None:
        self._token = _submit.set(self._value)

    def __exit__(self, *exc: object) -> None:
        _submit.reset(self._token)


# --- one request's outputs ---------------------------------------------------------------------


class _Output:
    """One output being read: its text, and (for a structured value) its tree."""

    __slots__ = ("done", "field", "pieces", "tree", "value")

    def __init__(self, field: Field, structured: bool, tags: bool) -> None:
        self.field = field
        self.pieces: list[str] = []
        self.tree: JSONTree | TagTree | None = None
        if structured:
            self.tree = TagTree(field.annotation) if tags else JSONTree()
        self.done = False
        self.value: Any = MISSING


def _is_text(field: Field) -> bool:
    found, _ = members(field.base_annotation)
    return found == [str]


class PartialReader:
    """Turns one streamed request's field deltas (and its `submit` call's arguments) into `partial` parts."""

    def __init__(self, adapter: Adapter, signature: Signature, path: str | None) -> None:
        self._adapter = adapter
        self._path = path
        submit = _submit.get()
        self._submit_name = submit[0] if submit is not None else None
        outputs = submit[1].outputs if submit is not None else signature.outputs
        self._fields = {name: f for name, f in outputs.items() if name in signature.outputs or submit is not None}
        self._outputs: dict[str, _Output] = {}
        self._current: str | None = None
        self._calls: dict[int, str | None] = {}
        self._submitted: JSONTree | None = None

    # the field deltas

    def feed(self, name: str, delta: str, put: Put) -> None:
        """One field delta."""
        field = self._fields.get(name)
        if field is None:
            return
        if self._current != name:
            self._end_current(put)
            self._current = name
        output = self._outputs.get(name)
        if output is None:
            structured = not _is_text(field)
            tags = structured and self._adapter.value_form(field) == "tags"
            output = self._outputs[name] = _Output(field, structured, tags)
        output.pieces.append(delta)
        if output.tree is None or output.tree.feed(delta):
            put(self._part(name))

    def _end_current(self, put: Put) -> None:
        name = self._current
        if name is None:
            return
        self._current = None
        output = self._outputs[name]
        output.done = True
        text = "".join(output.pieces)
        tree = output.tree
        if tree is not None:
            tree.finish()
        try:
            output.value = self._adapter.field_value(output.field, text)
        except (CoercionError, ValueError, TypeError):
            # What the tree holds, validated whole (XML's entities are decoded in the deltas).
            root = tree.root if tree is not None and not tree.failed else None
            output.value = typed(root, output.field.annotation, {}) if root is not None else MISSING
        put(self._part(name))

    # the submit call's arguments

    def feed_call(self, index: int | None, tool_name: str | None, delta: str, put: Put) -> None:
        """More of a tool call's arguments: the `submit` call's are the outputs."""
        key = index or 0
        if tool_name is not None:
            self._calls[key] = tool_name
        if not delta or self._submit_name is None or self._calls.get(key) != self._submit_name:
            return
        if self._submitted is None:
            self._submitted = JSONTree()
        if self._submitted.feed(delta):
            put(self._part(None))

    def close(self, response: LMResponse, put: Put) -> None:
        """The reply ended: the open output's value is whole."""
        self._end_current(put)

    # the parts

    def _part(self, name: str | None) -> StreamPart:
        # Where each output stood: finished (its value is kept), or its pieces so far and its tree's marks.
        states = [
            (n, o, o.done, len(o.pieces), _marks(o.tree) if o.tree is not None and not o.done else None)
            for n, o in self._outputs.items()
        ]
        submitted = self._submitted
        submit_marks = _marks(submitted) if submitted is not None else None
        fields = self._fields

        def snapshot() -> dict[str, Any]:
            values: dict[str, Any] = {}
            if submitted is not None and submit_marks is not None and submitted.root is not None:
                root = submitted.root
                count = submit_marks.get(id(root), len(root.items))
                for key, child in zip(root.keys, root.items[:count], strict=False):
                    field = fields.get(key)
                    if field is not None:
                        value = typed(child, field.annotation, submit_marks)
                        if value is not MISSING:
                            values[key] = value
            for output_name, output, done, count, marks in states:
                value = output.value if done else _value_of(output, count, marks)
                if value is not MISSING:
                    values[output_name] = value
            return values

        return StreamPart("partial", field=name, path=self._path, snapshot=snapshot)


def _marks(tree: JSONTree | TagTree) -> dict[int, int] | None:
    """Where a tree stands, or None when it holds no value yet (or its text is not its form)."""
    if tree.failed or tree.root is None:
        return None
    return tree.marks()


def _value_of(output: _Output, count: int, marks: dict[int, int] | None) -> Any:
    """An unfinished output's value as it stood: `count` pieces, its tree at `marks`."""
    if output.tree is None:
        return "".join(output.pieces[:count])
    root = output.tree.root
    if root is None or marks is None:
        return MISSING
    return typed(root, output.field.annotation, marks)
