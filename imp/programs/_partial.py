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

import dataclasses
import functools
import re
import types
import typing
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, Literal, Union

import pydantic

from imp.adapters.base import Adapter
from imp.models.base import LMResponse
from imp.programs._stream_tap import StreamPart
from imp.signature import Field, Signature
from imp.values import CoercionError

__all__ = ["PartialReader", "submitting"]

_MISSING: Any = object()
"""No value yet (an unfinished number, an item that does not validate)."""

Put = Callable[[StreamPart], None]
_submit: ContextVar[tuple[str, Signature] | None] = ContextVar("imp_stream_submit", default=None)


class submitting:  # noqa: N801 - used as a context manager, like contextlib's
    """A tool loop's step: its partial values are the task's outputs, from the step's text answer
    and from the arguments of the tool `name` (`submit`) as they stream."""

    def __init__(self, name: str, task: Signature) -> None:
        self._value = (name, task)
        self._token: Any = None

    def __enter__(self) -> None:
        self._token = _submit.set(self._value)

    def __exit__(self, *exc: object) -> None:
        _submit.reset(self._token)


# --- the tree ---------------------------------------------------------------------------------


class _Node:
    """One JSON value being read: `text` (pieces), `atom` (its characters), `seq` or `obj` (children)."""

    __slots__ = ("cache", "done", "items", "keys", "kind")

    def __init__(self, kind: Literal["text", "atom", "seq", "obj"]) -> None:
        self.kind = kind
        self.items: list[Any] = []
        self.keys: list[str] = []
        self.done = False
        self.cache: tuple[object, Any] | None = None


_STRING_STOP = re.compile(r'["\\]')
_ATOM_END = re.compile(r"[\s,\]}]")
_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}


class _JSONTree:
    """A JSON value read incrementally into append-only nodes; `failed` once the text is not JSON."""

    __slots__ = ("buf", "failed", "key", "root", "stack", "state")

    def __init__(self) -> None:
        self.root: _Node | None = None
        self.stack: list[_Node] = []
        self.state = "value"  # value, key_or_end, key, colon, string, atom, after, end
        self.buf = ""
        self.key: list[str] = []
        self.failed = False

    def marks(self) -> dict[int, int]:
        """Where the tree stands: each open node's length (every other node is finished)."""
        return {id(node): len(node.items) for node in self.stack}

    def feed(self, text: str) -> bool:
        """Read more of the value; whether anything a reader sees changed."""
        if self.failed:
            return False
        buf = self.buf + text
        i, n, changed = 0, len(buf), False
        stack = self.stack
        while i < n:
            state = self.state
            c = buf[i]
            if state == "string":
                top = stack[-1]
                stop = _STRING_STOP.search(buf, i)
                end = stop.start() if stop is not None else n
                if end > i:
                    top.items.append(buf[i:end])
                    changed = True
                i = end
                if i >= n:
                    break
                if buf[i] == '"':
                    changed |= self._close()
                    i += 1
                    continue
                decoded = _escape(buf, i)
                if decoded is None:
                    break  # an escape cut by the chunk's end
                top.items.append(decoded[0])
                changed = True
                i += decoded[1]
                continue
            if state == "key":
                if c == "\\":
                    decoded = _escape(buf, i)
                    if decoded is None:
                        break
                    self.key.append(decoded[0])
                    i += decoded[1]
                    continue
                if c == '"':
                    self.state = "colon"
                else:
                    self.key.append(c)
                i += 1
                continue
            if state == "atom":
                stop = _ATOM_END.search(buf, i)
                end = stop.start() if stop is not None else n
                stack[-1].items.append(buf[i:end])
                i = end
                if stop is not None:
                    changed |= self._close()
                continue
            if c.isspace():
                i += 1
                continue
            if state == "value":
                changed |= self._open(c)
                if self.state == "atom":
                    continue  # the character is the atom's first
            elif state == "key_or_end" and c == '"':
                self.state, self.key = "key", []
            elif state in ("key_or_end", "after") and c == "}" and stack and stack[-1].kind == "obj":
                changed |= self._close()
            elif state in ("value_or_end", "after") and c == "]" and stack and stack[-1].kind == "seq":
                changed |= self._close()
            elif state == "value_or_end":
                self.state = "value"
                continue
            elif state == "colon" and c == ":":
                self.state = "value"
            elif state == "after" and c == "," and stack:
                self.state = "key" if stack[-1].kind == "obj" else "value"
                if self.state == "key":
                    self.state = "key_or_end"
            else:
                self.failed = True
                return changed
            i += 1
        self.buf = buf[i:]
        return changed

    def _open(self, c: str) -> bool:
        kind: Literal["text", "atom", "seq", "obj"]
        kind, self.state = {"{": ("obj", "key_or_end"), "[": ("seq", "value_or_end"), '"': ("text", "string")}.get(
            c, ("atom", "atom")
        )  # type: ignore[assignment]
        node = _Node(kind)
        if self.root is None:
            self.root = node
        elif not self.stack:
            self.failed = True  # a second value after the first
            return False
        else:
            parent = self.stack[-1]
            if parent.kind == "obj":
                parent.keys.append("".join(self.key))
            parent.items.append(node)
        self.stack.append(node)
        return kind != "atom"

    def _close(self) -> bool:
        node = self.stack.pop()
        node.done = True
        self.state = "after" if self.stack else "end"
        return True

    def finish(self) -> None:
        """The value's text ended: a last atom is whole."""
        if self.stack and self.stack[-1].kind == "atom" and len(self.stack) == 1:
            self._close()


def _escape(buf: str, i: int) -> tuple[str, int] | None:
    if i + 1 >= len(buf):
        return None
    kind = buf[i + 1]
    if kind != "u":
        return _ESCAPES.get(kind, kind), 2
    if i + 6 > len(buf):
        return None
    digits = buf[i + 2 : i + 6]
    code = int(digits, 16) if re.fullmatch(r"[0-9a-fA-F]{4}", digits) else 0xFFFD
    if 0xD800 <= code < 0xDC00:
        if i + 12 > len(buf):
            return None
        low = buf[i + 8 : i + 12]
        if buf[i + 6 : i + 8] == "\\u" and re.fullmatch(r"[0-9a-fA-F]{4}", low):
            return chr(0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00)), 12
    return chr(code), 6


# --- typed values ------------------------------------------------------------------------------


@functools.lru_cache(maxsize=512)
def _adapter(annotation: Any) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(annotation)


def _validate(annotation: Any, plain: Any) -> Any:
    try:
        return _adapter(annotation).validate_python(plain)
    except (pydantic.ValidationError, TypeError, ValueError):
        return _MISSING


def _plain(node: _Node, marks: Mapping[int, int]) -> Any:
    """The node as plain JSON data as far as the marks say (an unfinished atom: missing)."""
    count = marks.get(id(node))
    if node.kind == "text":
        return "".join(node.items if count is None else node.items[:count])
    if node.kind == "atom":
        if count is not None:
            return _MISSING
        text = "".join(node.items)
        return {"true": True, "false": False, "null": None}.get(text, _number(text))
    items = node.items if count is None else node.items[:count]
    if node.kind == "seq":
        return [v for v in (_plain(child, marks) for child in items) if v is not _MISSING]
    pairs = zip(node.keys, items, strict=False)
    return {k: v for k, v in ((k, _plain(child, marks)) for k, child in pairs) if v is not _MISSING}


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return _MISSING


def _members(annotation: Any) -> tuple[list[Any], bool]:
    """A union's members without None, and whether None is one."""
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = typing.get_args(annotation)
        return [a for a in args if a is not type(None)], type(None) in args
    return [annotation], False


def _typed(node: _Node, annotation: Any, marks: Mapping[int, int]) -> Any:
    """The node's value as `annotation` as far as the marks say, or missing."""
    if id(node) not in marks:  # finished: typed once, kept
        cached = node.cache
        if cached is not None and cached[0] is annotation:
            return cached[1]
        value = _validate(annotation, _plain(node, marks))
        node.cache = (annotation, value)
        return value
    members, _ = _members(annotation)
    for member in members:
        value = _open(node, member, marks)
        if value is not _MISSING:
            return value
    return _MISSING


def _open(node: _Node, annotation: Any, marks: Mapping[int, int]) -> Any:
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if annotation is Any or annotation is object:
        return _plain(node, marks)
    count = marks[id(node)]
    if node.kind == "text":
        return "".join(node.items[:count]) if annotation is str else _MISSING
    if node.kind == "atom":
        return _MISSING
    origin = typing.get_origin(annotation) or annotation
    args = typing.get_args(annotation)
    children = node.items[:count]
    if node.kind == "seq":
        if origin not in (list, typing.Sequence, typing.MutableSequence) and not (
            isinstance(origin, type) and origin.__module__ == "collections.abc" and origin.__name__ == "Sequence"
        ):
            return _MISSING
        item = args[0] if args else Any
        return [v for v in (_typed(child, item, marks) for child in children) if v is not _MISSING]
    pairs = list(zip(node.keys, children, strict=False))
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        by_key = {}
        for name, info in annotation.model_fields.items():
            by_key[info.alias or name] = (name, info.annotation)
            by_key.setdefault(name, (name, info.annotation))
        values = {}
        for key, child in pairs:
            found = by_key.get(key)
            if found is not None:
                value = _typed(child, found[1], marks)
                if value is not _MISSING:
                    values[found[0]] = value
        return annotation.model_construct(**values)
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        hints = typing.get_type_hints(annotation)
        fields = {f.name: f for f in dataclasses.fields(annotation)}
        values = {}
        for key, child in pairs:
            if key in fields:
                value = _typed(child, hints.get(key, Any), marks)
                if value is not _MISSING:
                    values[key] = value
        made = object.__new__(annotation)
        for name, f in fields.items():
            if name in values:
                object.__setattr__(made, name, values[name])
            elif f.default is not dataclasses.MISSING:
                object.__setattr__(made, name, f.default)
            elif f.default_factory is not dataclasses.MISSING:
                object.__setattr__(made, name, f.default_factory())
        return made
    if typing.is_typeddict(annotation):
        hints = typing.get_type_hints(annotation)
        out = {}
        for key, child in pairs:
            if key in hints:
                value = _typed(child, hints[key], marks)
                if value is not _MISSING:
                    out[key] = value
        return out
    if origin in (dict, typing.Mapping, typing.MutableMapping) or (
        isinstance(origin, type) and origin.__module__ == "collections.abc" and origin.__name__ == "Mapping"
    ):
        value_type = args[1] if len(args) == 2 else Any
        return {k: v for k, v in ((k, _typed(child, value_type, marks)) for k, child in pairs) if v is not _MISSING}
    return _MISSING


# --- one request's outputs ---------------------------------------------------------------------


class _Output:
    """One output being read: its text, and (for a structured value) its tree."""

    __slots__ = ("done", "field", "pieces", "tree", "value")

    def __init__(self, field: Field, structured: bool) -> None:
        self.field = field
        self.pieces: list[str] = []
        self.tree = _JSONTree() if structured else None
        self.done = False
        self.value: Any = _MISSING


def _is_text(field: Field) -> bool:
    members, _ = _members(field.base_annotation)
    return members == [str]


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
        self._submitted: _JSONTree | None = None

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
            output = self._outputs[name] = _Output(field, not _is_text(field))
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
        try:
            output.value = self._adapter.field_value(output.field, text)
        except (CoercionError, ValueError, TypeError):
            output.value = _MISSING
        if output.tree is not None:
            output.tree.finish()
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
            self._submitted = _JSONTree()
        if self._submitted.feed(delta):
            put(self._part(None))

    def close(self, response: LMResponse, put: Put) -> None:
        """The reply ended: the open output's value is whole."""
        self._end_current(put)

    # the parts

    def _part(self, name: str | None) -> StreamPart:
        states = [(n, o, o.tree.marks() if o.tree is not None and not o.done else None) for n, o in self._outputs.items()]
        counts = {n: len(o.pieces) for n, o in self._outputs.items()}
        submitted = self._submitted
        submit_marks = submitted.marks() if submitted is not None else None
        fields = self._fields

        def snapshot() -> dict[str, Any]:
            values: dict[str, Any] = {}
            if submitted is not None and submitted.root is not None and submitted.root.kind == "obj":
                assert submit_marks is not None
                root, marks = submitted.root, submit_marks
                count = marks.get(id(root), len(root.items))
                for key, child in zip(root.keys, root.items[:count], strict=False):
                    field = fields.get(key)
                    if field is not None:
                        value = _typed(child, field.annotation, marks)
                        if value is not _MISSING:
                            values[key] = value
            for output_name, output, marks in states:
                value = _value_of(output, counts[output_name], marks)
                if value is not _MISSING:
                    values[output_name] = value
            return values

        return StreamPart("partial", field=name, path=self._path, snapshot=snapshot)


def _value_of(output: _Output, count: int, marks: dict[int, int] | None) -> Any:
    if output.done and marks is None:
        return output.value
    if output.tree is None:
        return "".join(output.pieces[:count]).strip()
    root = output.tree.root
    if root is None or output.tree.failed or marks is None:
        return _MISSING
    return _typed(root, output.field.annotation, marks)
