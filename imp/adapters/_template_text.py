"""The template language: `{name}`, `{% if x %}`, `{% for f in inputs|outputs %}`; data, never code.

A template is parsed once into nodes and rendered by walking them: a name is looked up in a
table the adapter fills (the instruction, the inputs, the loop's field), so a template cannot
reach an attribute, call a method or run anything. `{{` and `}}` write a literal brace; a brace
that does not open a `{name}` is kept as it is, so JSON examples need no escaping.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Literal

from imp.errors import ImpError

__all__ = [
    "FIELD_ATTRIBUTES",
    "For",
    "If",
    "Node",
    "TemplateError",
    "Text",
    "Value",
    "parse_template",
    "walk",
]

FieldList = Literal["inputs", "outputs"]
FIELD_ATTRIBUTES = frozenset({"name", "value", "desc", "type"})
"""What a loop's field offers: `{f.name}`, `{f.value}`, `{f.desc}`, `{f.type}`."""
MAX_DEPTH = 8
"""Blocks nest at most this deep (loops over fields multiply the output)."""

_TOKEN = re.compile(
    r"\{\{|\}\}"  # literal braces
    r"|\{%-?\s*(?P<tag>.*?)\s*-?%\}"  # a block tag
    r"|\{\s*(?P<name>[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?)\s*\}"  # a value
)
_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)?\Z")
_FOR = re.compile(r"for\s+([A-Za-z_]\w*)\s+in\s+(\w+)\Z")
_IF = re.compile(r"if\s+(.+)\Z")


class TemplateError(ImpError, ValueError):
    """A template that cannot be used: bad syntax, an unknown name, or a reply form that cannot be read back."""


@dataclass(frozen=True, slots=True)
class Text:
    """Literal text."""

    text: str


@dataclass(frozen=True, slots=True)
class Value:
    """`{name}` or `{f.attr}`: a value looked up when rendering."""

    name: str
    attribute: str | None = None


@dataclass(frozen=True, slots=True)
class If:
    """`{% if name %}...{% else %}...{% endif %}`: shown when the name has a value."""

    test: Value
    body: tuple[Node, ...]
    orelse: tuple[Node, ...] = ()


@dataclass(frozen=True, slots=True)
class For:
    """`{% for f in inputs %}...{% endfor %}` (or `outputs`): the body once per field."""

    var: str
    fields: FieldList
    body: tuple[Node, ...]


Node = Text | Value | If | For


def _value(spec: str, where: str) -> Value:
    if not _NAME.match(spec):
        raise TemplateError(f"{where}: `{spec}` is not a name (write a field name, or f.name inside a loop)")
    name, _, attribute = spec.partition(".")
    return Value(name, attribute or None)


@dataclass
class _Frame:
    kind: Literal["root", "if", "else", "for"]
    nodes: list[Node]
    head: str = ""
    test: Value | None = None
    body: tuple[Node, ...] = ()
    var: str = ""
    fields: FieldList = "inputs"


def parse_template(source: str, where: str) -> tuple[Node, ...]:
    """The nodes of one message's text; `TemplateError` naming `where` for bad syntax."""
    if not isinstance(source, str):
        raise TemplateError(f"{where}: a message's content is a string, got {type(source).__name__}")
    stack = [_Frame("root", [])]
    pos = 0
    for match in _TOKEN.finditer(source):
        if match.start() > pos:
            stack[-1].nodes.append(Text(source[pos : match.start()]))
        pos = match.end()
        token = match.group(0)
        if token in ("{{", "}}"):
            stack[-1].nodes.append(Text(token[0]))
        elif match.group("name") is not None:
            stack[-1].nodes.append(_value(match.group("name"), where))
        else:
            _tag(stack, match.group("tag"), where)
    if pos < len(source):
        stack[-1].nodes.append(Text(source[pos:]))
    if len(stack) > 1:
        raise TemplateError(f"{where}: `{{% {stack[-1].head} %}}` is never closed")
    return _merge(stack[0].nodes)


def _tag(stack: list[_Frame], tag: str, where: str) -> None:
    if (found := _FOR.match(tag)) is not None:
        fields = found.group(2)
        if fields not in ("inputs", "outputs"):
            raise TemplateError(f"{where}: `{{% {tag} %}}` loops over `inputs` or `outputs`, not `{fields}`")
        if len(stack) > MAX_DEPTH:
            raise TemplateError(f"{where}: blocks nest deeper than {MAX_DEPTH}")
        stack.append(
            _Frame("for", [], head=tag, var=found.group(1), fields="inputs" if fields == "inputs" else "outputs")
        )
    elif (found := _IF.match(tag)) is not None:
        if len(stack) > MAX_DEPTH:
            raise TemplateError(f"{where}: blocks nest deeper than {MAX_DEPTH}")
        stack.append(_Frame("if", [], head=tag, test=_value(found.group(1).strip(), where)))
    elif tag == "else":
        frame = stack[-1]
        if frame.kind != "if":
            raise TemplateError(f"{where}: `{{% else %}}` outside an `{{% if %}}`")
        frame.kind, frame.body, frame.nodes = "else", tuple(frame.nodes), []
    elif tag in ("endif", "endfor"):
        frame = stack[-1]
        wanted = "endfor" if frame.kind == "for" else "endif" if frame.kind in ("if", "else") else None
        if wanted != tag:
            raise TemplateError(f"{where}: `{{% {tag} %}}` does not close an open block")
        stack.pop()
        node: Node
        if frame.kind == "for":
            node = For(frame.var, frame.fields, _merge(frame.nodes))
        else:
            assert frame.test is not None
            body, orelse = (frame.body, frame.nodes) if frame.kind == "else" else (tuple(frame.nodes), [])
            node = If(frame.test, _merge(list(body)), _merge(list(orelse)))
        stack[-1].nodes.append(node)
    else:
        raise TemplateError(
            f"{where}: `{{% {tag} %}}` is not part of the template language "
            "(it has `{% if name %}`, `{% else %}`, `{% endif %}`, `{% for f in inputs %}`, `{% endfor %}`)"
        )


def _merge(nodes: Sequence[Node]) -> tuple[Node, ...]:
    """Adjacent text nodes as one (so a literal brace does not split the text around it)."""
    out: list[Node] = []
    for node in nodes:
        if isinstance(node, Text) and out and isinstance(out[-1], Text):
            out[-1] = Text(out[-1].text + node.text)
        elif not (isinstance(node, Text) and not node.text):
            out.append(node)
    return tuple(out)


def walk(nodes: Sequence[Node]) -> Iterator[tuple[Node, tuple[For, ...]]]:
    """Every node with the loops around it, outermost first."""

    def visit(items: Sequence[Node], loops: tuple[For, ...]) -> Iterator[tuple[Node, tuple[For, ...]]]:
        for node in items:
            yield node, loops
            if isinstance(node, If):
                yield from visit(node.body, loops)
                yield from visit(node.orelse, loops)
            elif isinstance(node, For):
                yield from visit(node.body, (*loops, node))

    return visit(nodes, ())


Lookup = Callable[[Value, dict[str, object]], str]
Truth = Callable[[Value, dict[str, object]], bool]
FieldsOf = Callable[[FieldList], Sequence[object]]


def render(nodes: Sequence[Node], lookup: Lookup, truth: Truth, fields_of: FieldsOf) -> str:
    """The text of nodes: values through `lookup`, tests through `truth`, loops over `fields_of`."""
    out: list[str] = []

    def emit(items: Sequence[Node], scope: dict[str, object]) -> None:
        for node in items:
            if isinstance(node, Text):
                out.append(node.text)
            elif isinstance(node, Value):
                out.append(lookup(node, scope))
            elif isinstance(node, If):
                emit(node.body if truth(node.test, scope) else node.orelse, scope)
            else:
                for item in fields_of(node.fields):
                    emit(node.body, {**scope, node.var: item})

    emit(nodes, {})
    return "".join(out)
