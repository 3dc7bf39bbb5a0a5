"""docs/errors.md cannot drift from the code: its tree is every `ImpError` subclass defined anywhere in imp
(extras included, read from the source so Ray and the MCP SDK need not be installed), each under its
parent, and the page documents each one from its docstring (a `::: path` entry the site renders).

On a mismatch the test prints the tree the page should hold, ready to paste.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "errors.md"
PUBLIC_MODULES = ("imp", "imp.mcp", "imp.ray", "imp.tools", "imp.saving", "imp.evaluation", "imp.adapters")
"""Where a user imports an error from, in order of preference: the first whose `__all__` names it."""


@dataclass(frozen=True)
class ErrorClass:
    name: str
    module: str
    parent: str
    """The base the class inherits from within the tree."""
    others: tuple[str, ...]
    """Its other bases (ValueError, TimeoutError, ...)."""


def _module_of(path: Path) -> str:
    return ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")


def error_classes() -> dict[str, ErrorClass]:
    """Every class in imp/ whose bases lead to ImpError, by name."""
    defined: dict[str, tuple[str, list[str]]] = {}
    for path in sorted((ROOT / "imp").rglob("*.py")):
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef):
                bases = [ast.unparse(base).split(".")[-1] for base in node.bases]
                assert node.name not in defined or node.name not in ("ImpError",), node.name
                defined.setdefault(node.name, (_module_of(path), bases))

    def in_tree(name: str) -> bool:
        return name == "ImpError" or any(in_tree(b) for b in defined.get(name, ("", []))[1] if b in defined)

    found = {}
    for name, (module, bases) in defined.items():
        if name != "ImpError" and in_tree(name):
            parent = next(b for b in bases if in_tree(b))
            found[name] = ErrorClass(name, module, parent, tuple(b for b in bases if b != parent))
    found["ImpError"] = ErrorClass("ImpError", "imp.errors", "", ())
    return found


def _public_names(module: str) -> set[str]:
    init = ROOT / Path(*module.split(".")) / "__init__.py"
    for node in ast.parse(init.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
            return {ast.literal_eval(e) for e in node.value.elts}  # type: ignore[attr-defined]
    return set()


def public_path(error: ErrorClass) -> str:
    for module in PUBLIC_MODULES:
        if error.name in _public_names(module):
            return f"{module}.{error.name}"
    return f"{error.module}.{error.name}"


def expected_tree() -> str:
    errors = error_classes()
    children: dict[str, list[str]] = {}
    for error in errors.values():
        children.setdefault(error.parent, []).append(error.name)
    lines: list[tuple[str, str]] = []

    def label(name: str) -> str:
        others = errors[name].others
        return f"{name} ({', '.join(others)})" if others else name

    def walk(name: str, prefix: str, last: bool, root: bool) -> None:
        lines.append(
            (label(name) if root else f"{prefix}{'└── ' if last else '├── '}{label(name)}", public_path(errors[name]))
        )
        below = sorted(children.get(name, []))
        for i, child in enumerate(below):
            walk(child, "" if root else prefix + ("    " if last else "│   "), i == len(below) - 1, False)

    walk("ImpError", "", True, True)
    width = max(len(text) for text, _ in lines) + 2
    return "\n".join(f"{text.ljust(width)}{path}" for text, path in lines)


def _page_tree() -> str:
    match = re.search(r"## The tree\n.*?```text\n(.*?)\n```", PAGE.read_text(encoding="utf-8"), re.S)
    assert match, "docs/errors.md has no ```text block under '## The tree'"
    return match.group(1)


def test_the_page_draws_every_error_class_under_its_parent() -> None:
    tree = expected_tree()
    assert _page_tree() == tree, f"docs/errors.md's tree is not the code's; it should read:\n\n```text\n{tree}\n```"


def test_the_page_documents_each_error_from_its_docstring() -> None:
    text = PAGE.read_text(encoding="utf-8")
    entries = set(re.findall(r"^::: (\S+)", text, re.M))
    missing = sorted(p for p in map(public_path, error_classes().values()) if p not in entries)
    assert not missing, f"docs/errors.md lacks a `::: path` entry for {missing}"
    unknown = sorted(entries - set(map(public_path, error_classes().values())))
    assert not unknown, f"docs/errors.md documents what is not an ImpError subclass: {unknown}"


def test_the_tree_reader_sees_the_known_shape() -> None:
    errors = error_classes()
    assert errors["ContextWindowExceeded"].parent == "BadRequest"
    assert errors["ChecksumError"].parent == "LoadError"
    assert errors["SignatureError"].others == ("ValueError",)
    assert public_path(errors["MCPError"]) == "imp.mcp.MCPError"
    assert public_path(errors["RateLimited"]) == "imp.RateLimited"
