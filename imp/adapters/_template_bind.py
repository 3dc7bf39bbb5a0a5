"""What a template becomes for one signature: loops expanded, field attributes and placeholders as text."""

from __future__ import annotations

from imp.adapters._template_form import placeholder
from imp.adapters._template_text import For, If, Node, Text, Value, walk
from imp.signature import Field, Signature
from imp.values import type_name

__all__ = ["attribute", "has_value", "line_span", "specialize", "truth_of_field", "uses_value"]


def specialize(nodes: tuple[Node, ...], signature: Signature) -> tuple[Node, ...]:
    """The nodes for one signature: loops expanded, field attributes and output placeholders as text.

    What is left depends on the request only: `{instruction}`, inputs' values, and tests of them.
    """
    history = signature.history_field
    lists = {
        "inputs": [f for n, f in signature.inputs.items() if n != history],
        "outputs": list(signature.outputs.values()),
    }

    def visit(items: tuple[Node, ...], scope: dict[str, Field]) -> list[Node]:
        out: list[Node] = []
        for node in items:
            if isinstance(node, Text):
                out.append(node)
            elif isinstance(node, Value):
                field = scope.get(node.name)
                if field is not None and node.attribute != "value":
                    out.append(Text(attribute(field, node.attribute)))
                elif field is None and node.name == "instruction":
                    out.append(node)
                else:
                    target = field or signature.fields[node.name]
                    out.append(Text(placeholder(target)) if target.kind == "output" else Value(target.name))
            elif isinstance(node, If):
                field = scope.get(node.test.name)
                if field is not None and node.test.attribute != "value":
                    out.extend(visit(node.body if attribute(field, node.test.attribute) else node.orelse, scope))
                elif field is None and node.test.name == "instruction":
                    out.extend(visit(node.body, scope))
                elif (field or signature.fields[node.test.name]).kind == "output":
                    out.extend(visit(node.orelse, scope))
                else:
                    name = (field or signature.fields[node.test.name]).name
                    out.append(If(Value(name), tuple(visit(node.body, scope)), tuple(visit(node.orelse, scope))))
            else:
                for item in lists[node.fields]:
                    out.extend(visit(node.body, {**scope, node.var: item}))
        return out

    merged: list[Node] = []
    for node in visit(nodes, {}):
        if isinstance(node, Text) and merged and isinstance(merged[-1], Text):
            merged[-1] = Text(merged[-1].text + node.text)
        else:
            merged.append(node)
    return tuple(merged)


def uses_value(loop: For) -> bool:
    return any(isinstance(n, Value) and n.name == loop.var and n.attribute == "value" for n, _ in walk(loop.body))


def line_span(nodes: tuple[Node, ...], first: int, last: int) -> tuple[Node, ...]:
    """The nodes from the start of `first`'s line to the end of `last`'s: a form written inline."""
    before = nodes[first - 1] if first > 0 else None
    after = nodes[last + 1] if last + 1 < len(nodes) else None
    span: list[Node] = []
    if isinstance(before, Text):
        span.append(Text(before.text.rpartition("\n")[2]))
    span.extend(nodes[first : last + 1])
    if isinstance(after, Text):
        span.append(Text(after.text.partition("\n")[0]))
    return tuple(span)


def attribute(field: Field, attribute: str | None) -> str:
    if attribute == "name":
        return field.name
    if attribute == "desc":
        return field.desc
    if attribute == "type":
        return type_name(field.annotation)
    raise AssertionError(f"checked when bound: {attribute}")


def truth_of_field(value: Value, scope: dict[str, object]) -> bool:
    field = scope.get(value.name)
    return isinstance(field, Field) and value.attribute != "value" and bool(attribute(field, value.attribute))


def has_value(value: object) -> bool:
    """What `{% if name %}` tests: a value other than None, an empty string or an empty collection."""
    if value is None:
        return False
    if isinstance(value, str | list | tuple | dict | set):
        return bool(value)
    return True
