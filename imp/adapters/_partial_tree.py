"""Values read as their text streams: a JSON value or nested XML tags read once, incrementally, into
append-only nodes, and typed as far as they have arrived (`imp.stream(..., partial=True)`).

A reader records where a tree stands with `marks()` (each open node's length: the nesting depth,
not the size) and types it later with `typed(root, annotation, marks)`; every finished node is
typed once and kept. An unfinished number or literal, and anything that does not validate, is
`MISSING`.
"""

from __future__ import annotations

import dataclasses
import functools
import re
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any, Literal, Union

import pydantic

from imp.adapters._split import json_escape

__all__ = ["MISSING", "JSONTree", "Node", "TagTree", "members", "typed"]

MISSING: Any = object()
"""No value yet (an unfinished number, an item that does not validate)."""


# --- reading ---------------------------------------------------------------------------------


class Node:
    """One value being read: `text` (a JSON string's pieces), `leaf` (an XML element's text: its
    pieces, stripped), `atom` (a JSON number's or literal's characters), `seq` or `obj` (children)."""

    __slots__ = ("cache", "done", "items", "keys", "kind")

    def __init__(self, kind: Literal["text", "leaf", "atom", "seq", "obj"]) -> None:
        self.kind = kind
        self.items: list[Any] = []
        self.keys: list[str] = []
        self.done = False
        self.cache: tuple[object, Any] | None = None


_STRING_STOP = re.compile(r'["\\]')
_ATOM_END = re.compile(r"[\s,\]}]")
_OPENS: dict[str, tuple[Literal["text", "atom", "seq", "obj"], str]] = {
    "{": ("obj", "key_or_end"),
    "[": ("seq", "value_or_end"),
    '"': ("text", "string"),
}
_MAY_CLOSE = frozenset({"key_or_end", "value_or_end", "after"})
_CLOSES = {"]": "seq", "}": "obj"}


class JSONTree:
    """A JSON value read incrementally into append-only nodes; `failed` once the text is not JSON."""

    __slots__ = ("buf", "failed", "key", "root", "stack", "state")

    def __init__(self) -> None:
        self.root: Node | None = None
        self.stack: list[Node] = []
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
                decoded = json_escape(buf, i)
                if decoded is None:
                    break  # an escape cut by the chunk's end
                top.items.append(decoded[0])
                changed = True
                i += decoded[1]
                continue
            if state == "key":
                if c == "\\":
                    decoded = json_escape(buf, i)
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
            elif c in "]}" and state in _MAY_CLOSE and stack and stack[-1].kind == _CLOSES[c]:
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
        kind, self.state = _OPENS.get(c, ("atom", "atom"))
        node = Node(kind)
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


_TAG = re.compile(r"<(/?)([A-Za-z_][\w.\-]*)(?:\s[^<>]*)?(/?)>")
_LONGEST_TAG = 256
"""Text from a `<` this long without a `>` is not a tag."""


def _shape(annotation: Any) -> tuple[Literal["seq", "obj", "leaf"], Callable[[str], Any]]:
    """How an XML element of this type holds its value, and the type of a child by its tag."""
    found, _ = members(annotation)
    annotation = found[0] if len(found) == 1 else annotation
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    origin = typing.get_origin(annotation) or annotation
    args = typing.get_args(annotation)
    if origin in (list, set, frozenset, tuple) or getattr(origin, "__name__", "") in ("Sequence", "MutableSequence"):
        item = args[0] if args else Any
        return "seq", lambda tag: item
    if isinstance(annotation, type) and issubclass(annotation, pydantic.BaseModel):
        by_tag = {name: info.annotation for name, info in annotation.model_fields.items()}
        return "obj", lambda tag: by_tag.get(tag, Any)
    if isinstance(annotation, type) and (dataclasses.is_dataclass(annotation) or typing.is_typeddict(annotation)):
        hints = typing.get_type_hints(annotation)
        return "obj", lambda tag: hints.get(tag, Any)
    if origin is dict or getattr(origin, "__name__", "") in ("Mapping", "MutableMapping"):
        value = args[1] if len(args) == 2 else Any
        return "obj", lambda tag: value
    return "leaf", lambda tag: Any


class TagTree:
    """An XML value (nested tags: `<item>` per list item, a tag per key) read incrementally into the
    same nodes as a JSON value; the field's type says which element is a list, an object or text."""

    __slots__ = ("buf", "failed", "root", "stack")

    def __init__(self, annotation: Any) -> None:
        kind, child = _shape(annotation)
        self.root: Node | None = Node(kind)
        self.stack: list[tuple[Node, Callable[[str], Any], str]] = [(self.root, child, "")]
        self.buf = ""
        self.failed = False

    def marks(self) -> dict[int, int]:
        """Where the tree stands: each open node's length (every other node is finished)."""
        return {id(node): len(node.items) for node, _, _ in self.stack}

    def feed(self, text: str) -> bool:
        """Read more of the value; whether anything a reader sees changed."""
        buf = self.buf + text
        i, n, changed = 0, len(buf), False
        while i < n:
            lt = buf.find("<", i)
            if lt < 0:
                changed |= self._text(buf[i:])
                i = n
                break
            if lt > i:
                changed |= self._text(buf[i:lt])
            match = _TAG.match(buf, lt)
            if match is None:
                if ">" not in buf[lt:] and n - lt < _LONGEST_TAG:
                    i = lt  # a tag cut by the chunk's end
                    break
                changed |= self._text("<")
                i = lt + 1
                continue
            closing, tag, empty = match.group(1), match.group(2), match.group(3)
            if closing:
                if len(self.stack) > 1 and self.stack[-1][2] == tag:
                    self._close()
                    changed = True
            else:
                changed |= self._open(tag, empty == "/")
            i = match.end()
        self.buf = buf[i:]
        return changed

    def _text(self, text: str) -> bool:
        node = self.stack[-1][0]
        if node.kind != "leaf" or not (node.items or text.strip()):
            return False
        node.items.append(text)
        return bool(text.strip())

    def _open(self, tag: str, empty: bool) -> bool:
        parent, child_type, _ = self.stack[-1]
        if parent.kind == "leaf":
            parent.items.append(f"<{tag}>")  # a tag where text is due: text, as the adapter reads it
            return True
        annotation = child_type(tag)
        kind, grandchild = _shape(annotation)
        node = Node(kind)
        if parent.kind == "obj":
            parent.keys.append(tag)
        parent.items.append(node)
        self.stack.append((node, grandchild, tag))
        if empty:
            self._close()
        return True

    def _close(self) -> None:
        node, _, _ = self.stack.pop()
        node.done = True

    def finish(self) -> None:
        """The value's text ended."""
        while self.stack:
            self._close()


# --- typed values ------------------------------------------------------------------------------


@functools.lru_cache(maxsize=512)
def _adapter(annotation: Any) -> pydantic.TypeAdapter[Any]:
    return pydantic.TypeAdapter(annotation)


def _validate(annotation: Any, plain: Any) -> Any:
    try:
        adapter = _adapter(annotation)
    except TypeError:  # an annotation that cannot be a cache key (unhashable metadata)
        adapter = pydantic.TypeAdapter(annotation)
    try:
        return adapter.validate_python(plain)
    except (pydantic.ValidationError, TypeError, ValueError):
        return MISSING


def _plain(node: Node, marks: Mapping[int, int]) -> Any:
    """The node as plain JSON data as far as the marks say (an unfinished atom: missing)."""
    count = marks.get(id(node))
    if node.kind == "text":
        return "".join(node.items if count is None else node.items[:count])
    if node.kind == "leaf":
        return "".join(node.items if count is None else node.items[:count]).strip()
    if node.kind == "atom":
        if count is not None:
            return MISSING
        text = "".join(node.items)
        return {"true": True, "false": False, "null": None}.get(text, _number(text))
    items = node.items if count is None else node.items[:count]
    if node.kind == "seq":
        return [v for v in (_plain(child, marks) for child in items) if v is not MISSING]
    pairs = zip(node.keys, items, strict=False)
    return {k: v for k, v in ((k, _plain(child, marks)) for k, child in pairs) if v is not MISSING}


def _number(text: str) -> Any:
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return MISSING


def members(annotation: Any) -> tuple[list[Any], bool]:
    """A union's members without None, and whether None is one."""
    origin = typing.get_origin(annotation)
    if origin in (Union, types.UnionType):
        args = typing.get_args(annotation)
        return [a for a in args if a is not type(None)], type(None) in args
    return [annotation], False


def typed(node: Node, annotation: Any, marks: Mapping[int, int]) -> Any:
    """The node's value as `annotation` as far as the marks say, or missing."""
    if id(node) not in marks:  # finished: typed once, kept
        cached = node.cache
        if cached is not None and cached[0] is annotation:
            return cached[1]
        value = _validate(annotation, _plain(node, marks))
        node.cache = (annotation, value)
        return value
    found, _ = members(annotation)
    for member in found:
        value = _open(node, member, marks)
        if value is not MISSING:
            return value
    return MISSING


def _open(node: Node, annotation: Any, marks: Mapping[int, int]) -> Any:
    if typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if annotation is Any or annotation is object:
        return _plain(node, marks)
    count = marks[id(node)]
    if node.kind in ("text", "leaf"):
        return _plain(node, marks) if annotation is str else MISSING
    if node.kind == "atom":
        return MISSING
    origin = typing.get_origin(annotation) or annotation
    args = typing.get_args(annotation)
    children = node.items[:count]
    if node.kind == "seq":
        if origin not in (list, typing.Sequence, typing.MutableSequence) and not (
            isinstance(origin, type) and origin.__module__ == "collections.abc" and origin.__name__ == "Sequence"
        ):
            return MISSING
        item = args[0] if args else Any
        return [v for v in (typed(child, item, marks) for child in children) if v is not MISSING]
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
                value = typed(child, found[1], marks)
                if value is not MISSING:
                    values[found[0]] = value
        return annotation.model_construct(**values)
    if dataclasses.is_dataclass(annotation) and isinstance(annotation, type):
        hints = typing.get_type_hints(annotation)
        fields = {f.name: f for f in dataclasses.fields(annotation)}
        values = {}
        for key, child in pairs:
            if key in fields:
                value = typed(child, hints.get(key, Any), marks)
                if value is not MISSING:
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
                value = typed(child, hints[key], marks)
                if value is not MISSING:
                    out[key] = value
        return out
    if origin in (dict, typing.Mapping, typing.MutableMapping) or (
        isinstance(origin, type) and origin.__module__ == "collections.abc" and origin.__name__ == "Mapping"
    ):
        value_type = args[1] if len(args) == 2 else Any
        return {k: v for k, v in ((k, typed(child, value_type, marks)) for k, child in pairs) if v is not MISSING}
    return MISSING
