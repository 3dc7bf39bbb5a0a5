"""imp's import graph, read from the source: which module imports which, and whether the import
runs or only names a type (`if TYPE_CHECKING:`).

An import that runs counts wherever it sits, at the top of a module or inside a function (a
function-local import that closes a circle only hides it). `from imp.a.b import x` is an edge to
`imp.a.b`; `from imp.a import b` is an edge to the module `imp.a.b` when there is one, else to the
package `imp.a`. The tests of the house's rules (tests/test_architecture.py, tests/test_layers.py)
and `make measure` read the graph from here.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

__all__ = [
    "Edge",
    "Kind",
    "cycles",
    "edges",
    "graph",
    "imports",
    "is_type_checking",
    "modules",
    "room",
    "room_edges",
]

Kind = Literal["run", "type"]
"""`run`: the import runs when its module is imported or its function called; `type`: it sits under
`if TYPE_CHECKING:` and names types for annotations only."""

PACKAGE = Path(__file__).resolve().parent.parent / "imp"


@dataclass(frozen=True, slots=True)
class Edge:
    """One module importing another: where, and whether the import runs."""

    source: str
    target: str
    kind: Kind
    line: int


def modules(package: Path = PACKAGE) -> dict[str, Path]:
    """Every module of the package by dotted name (`imp.models.base`; a package by its own name)."""
    found: dict[str, Path] = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def is_type_checking(test: ast.expr) -> bool:
    """Whether an `if` test is `TYPE_CHECKING` (or `typing.TYPE_CHECKING`)."""
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _resolve(module: str, package: str, level: int) -> str:
    if level == 0:
        return module
    base = package.split(".")
    base = base[: len(base) - level + 1]
    return ".".join([*base, module] if module else base)


def imports(name: str, source: str, known: Mapping[str, object], *, is_package: bool = False) -> Iterator[Edge]:
    """The edges from module `name` (its `source` given) to the modules in `known`."""
    package = name if is_package else name.rpartition(".")[0]
    tree = ast.parse(source)

    def visit(node: ast.AST, kind: Kind) -> Iterator[Edge]:
        if isinstance(node, ast.If) and is_type_checking(node.test):
            for statement in node.body:
                yield from visit(statement, "type")
            for statement in node.orelse:
                yield from visit(statement, kind)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in known:
                    yield Edge(name, alias.name, kind, node.lineno)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(node.module or "", package, node.level)
            if target == "imp" or target.startswith("imp."):
                for alias in node.names:
                    sub = f"{target}.{alias.name}"
                    if sub in known:
                        yield Edge(name, sub, kind, node.lineno)
                    elif target in known:
                        yield Edge(name, target, kind, node.lineno)
        for child in ast.iter_child_nodes(node):
            yield from visit(child, kind)

    yield from visit(tree, "run")


def edges(package: Path = PACKAGE) -> list[Edge]:
    """Every edge between the package's modules (a module importing itself is left out)."""
    known = modules(package)
    found: list[Edge] = []
    for name, path in known.items():
        text = path.read_text(encoding="utf-8")
        found.extend(e for e in imports(name, text, known, is_package=path.name == "__init__.py") if e.target != name)
    return found


def room(module: str, package: Path = PACKAGE) -> str:
    """The room a module belongs to: its sub-package (`imp.models`), or a top-level module itself."""
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and (package / parts[1]).is_dir()):
        return ".".join(parts[:2])
    return module


def room_edges(found: list[Edge], package: Path = PACKAGE) -> list[Edge]:
    """The edges between rooms (the root `imp`, which re-exports, left out)."""
    return [
        Edge(room(e.source, package), room(e.target, package), e.kind, e.line)
        for e in found
        if e.source != "imp" and room(e.target, package) not in ("imp", room(e.source, package))
    ]


def graph(found: list[Edge], *, kinds: tuple[Kind, ...] = ("run",)) -> dict[str, set[str]]:
    """Source -> targets, counting the edges of these kinds."""
    out: dict[str, set[str]] = {}
    for e in found:
        out.setdefault(e.source, set())
        out.setdefault(e.target, set())
        if e.kind in kinds:
            out[e.source].add(e.target)
    return out


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component: list[str] = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                component.append(top)
                if top == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found
