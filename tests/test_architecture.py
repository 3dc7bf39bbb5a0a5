"""The house's rules, checked: layers import only downward (no circles), no module over 600 lines,
and every public name is importable from `imp`.

An import that runs counts, at the top or inside a function (a function-local import that closes a
circle only hides it); one under `if TYPE_CHECKING:` names a type for annotations and runs never. `from imp.a.b import x` is an edge to
`imp.a.b` (not to the package `imp.a`); `from imp.a import b` is an edge to the module `imp.a.b`
when there is one.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import imp

ROOT = Path(imp.__file__).resolve().parent
MAX_LINES = 600


def _modules() -> dict[str, Path]:
    found: dict[str, Path] = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _resolve(module: str, package: str, level: int) -> str:
    if level == 0:
        return module
    base = package.split(".")
    base = base[: len(base) - level + 1]
    return ".".join([*base, module] if module else base)


def _imports(name: str, path: Path) -> Iterator[str]:
    is_package = path.name == "__init__.py"
    package = name if is_package else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    checking_only = {
        id(child)
        for node in ast.walk(tree)
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)
        for stmt in node.body
        for child in ast.walk(stmt)
    }
    for node in ast.walk(tree):
        if id(node) in checking_only:
            continue
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name in MODULES:
                    yield alias.name
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(node.module or "", package, node.level)
            if not target.startswith("imp"):
                continue
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in MODULES:
                    yield sub
                elif target in MODULES:
                    yield target


def _graph() -> dict[str, set[str]]:
    return {name: {t for t in _imports(name, path) if t != name} for name, path in MODULES.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
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


def test_the_checker_sees_a_circle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles_in_imp() -> None:
    cycles = _cycles(_graph())
    assert cycles == [], "import circles: " + "; ".join(" <-> ".join(c) for c in cycles)


def _room(module: str) -> str:
    """The room a module belongs to: its package under `imp` (`imp.models`), or the module itself."""
    parts = module.split(".")
    if len(parts) > 2 or (len(parts) == 2 and (ROOT / parts[1]).is_dir()):
        return ".".join(parts[:2])
    return module


def test_no_circles_between_rooms() -> None:
    """Packages import one another only downward too (the package root `imp` re-exports and is left out)."""
    rooms: dict[str, set[str]] = {}
    for module, targets in _graph().items():
        if module == "imp":
            continue
        mine = rooms.setdefault(_room(module), set())
        mine.update(_room(t) for t in targets if _room(t) not in (_room(module), "imp"))
    cycles = _cycles(rooms)
    assert cycles == [], "room circles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_no_module_over_600_lines() -> None:
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_every_public_name_is_importable_and_all_is_sorted() -> None:
    missing = [name for name in imp.__all__ if not hasattr(imp, name)]
    assert missing == []
    assert list(imp.__all__) == sorted(imp.__all__)
    assert len(set(imp.__all__)) == len(imp.__all__)
