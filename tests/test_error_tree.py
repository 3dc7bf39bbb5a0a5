"""The tree drawn in imp/errors.py's docstring is the ImpError family, class for class.

Every exception class defined anywhere in `imp` is read from the source (so the classes of the
optional extras count without their packages), and each must either be drawn in the tree, under
its parent, with its other bases and the module it is importable from, or be a private signal that
never leaves imp (listed below, with the reason).
"""

from __future__ import annotations

import ast
import builtins
import importlib
import re
from dataclasses import dataclass
from pathlib import Path

import pytest

import imp

ROOT = Path(imp.__file__).resolve().parent

INTERNAL = {
    "HTTPFailure": "imp.models._transport: the transport's failure, classified into an LMError before it leaves imp.models",
    "BudgetSpent": "imp.optimize._scoring: an optimization's budget is spent; caught by the optimizer, which stops",
    "_Overflow": "imp.programs.react_trajectory: the trajectory is too long for the window; caught by the loop",
    "BodyTooLarge": "imp.models._transport: a reply over max_response_bytes; the client raises ResponseTooLarge",
    "SSELimitExceeded": "imp.models._sse: a stream event over its limit, a ValueError; raised as ResponseTooLarge",
    "EmptyStream": "imp.models._stream: a stream that ended before its first content; caught and retried by the client",
    "_Captured": "imp.programs.rendered: stops a render before anything is sent; caught by render()",
    "Refused": "imp.saving._trust: what a saved file may not ask for; imp.load raises it as a LoadError",
    "OverLimit": "imp._json: text past a parse limit, a ValueError like any other 'not JSON'; the adapters and "
    "the tools turn it into their own error naming the setting",
}
"""Exception classes that are control flow inside imp, never raised to a caller."""

RUNTIME_ERRORS = {
    "imp/runtime/deadline.py": "one imp.deadline(...) block entered twice at once (misuse, as contextlib says it)",
    "imp/runtime/usage.py": "a usage accumulator opened twice (misuse)",
    "imp/tools/_threads.py": "an event loop imp cannot wake from a worker thread (neither asyncio nor trio)",
}
"""Where imp raises a bare RuntimeError, and why it is not an ImpError: both are misuse or an
unsupported environment, which Python's own errors name. Any other failure of the work is an ImpError."""

_BUILTIN_EXCEPTIONS = {
    name for name, value in vars(builtins).items() if isinstance(value, type) and issubclass(value, BaseException)
}
_LINE = re.compile(r"^(?P<lead>[ │├└─]*?)(?P<name>[A-Z]\w*)(?: \((?P<bases>[\w, ]+)\))?\s*(?:·+\s*)?(?P<text>.*)$")
_WHERE = re.compile(r"\(`(imp(?:\.\w+)*)`[^)]*\)\s*$")


@dataclass(frozen=True)
class Drawn:
    name: str
    parent: str | None
    bases: tuple[str, ...]
    module: str


@dataclass(frozen=True)
class Defined:
    name: str
    module: str
    bases: tuple[str, ...]


def drawn_tree(doc: str) -> dict[str, Drawn]:
    """The classes of the drawing: name, parent (by indentation), other bases, where importable."""
    lines = doc.splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == "ImpError")
    indent = len(lines[start]) - len(lines[start].lstrip())
    found: dict[str, Drawn] = {"ImpError": Drawn("ImpError", None, ("Exception",), "imp")}
    stack: list[tuple[int, str]] = [(0, "ImpError")]
    for line in lines[start + 1 :]:
        if not line.strip():
            break
        match = _LINE.match(line[indent:])
        assert match is not None, f"a tree line imp cannot read: {line!r}"
        depth = len(match.group("lead")) // 4
        assert depth >= 1 and len(match.group("lead")) % 4 == 0, f"misaligned: {line!r}"
        while stack and stack[-1][0] >= depth:
            stack.pop()
        assert stack and stack[-1][0] == depth - 1, f"no parent for: {line!r}"
        name = match.group("name")
        bases = tuple(b.strip() for b in (match.group("bases") or "").split(",") if b.strip())
        where = _WHERE.search(match.group("text"))
        inherited = found[stack[-1][1]].module
        module = where.group(1) if where else (inherited if inherited != "imp" else "imp")
        assert name not in found, f"{name} is drawn twice"
        found[name] = Drawn(name, stack[-1][1], bases, module)
        stack.append((depth, name))
    return found


def defined_exceptions() -> dict[str, Defined]:
    """Every class in imp's source whose bases reach a built-in exception, by name."""
    classes: dict[str, list[Defined]] = {}
    for path in sorted(ROOT.rglob("*.py")):
        module = ".".join(path.relative_to(ROOT.parent).with_suffix("").parts).removesuffix(".__init__")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                bases = tuple(ast.unparse(b).rpartition(".")[2] for b in node.bases)
                classes.setdefault(node.name, []).append(Defined(node.name, module, bases))
    exceptions: dict[str, Defined] = {}
    changed = True
    while changed:
        changed = False
        for name, versions in classes.items():
            for cls in versions:
                if name not in exceptions and any(b in _BUILTIN_EXCEPTIONS or b in exceptions for b in cls.bases):
                    assert len(versions) == 1, f"two exception classes are named {name}: {versions}"
                    exceptions[name] = cls
                    changed = True
    return exceptions


def _family(exceptions: dict[str, Defined]) -> dict[str, Defined]:
    family = {"ImpError": exceptions["ImpError"]}
    changed = True
    while changed:
        changed = False
        for name, cls in exceptions.items():
            if name not in family and any(b in family for b in cls.bases):
                family[name] = cls
                changed = True
    return family


TREE = drawn_tree(imp.errors.__doc__ or "")
DEFINED = defined_exceptions()
FAMILY = _family(DEFINED)


def test_the_reader_of_the_drawing_sees_nesting_bases_and_modules() -> None:
    doc = (
        "    ImpError\n"
        "    ├── A (ValueError) ··· text\n"
        "    │   └── B ············ more (`imp.x`)\n"
        "    │       └── C ········ most\n"
        "    └── D (TypeError, KeyError)  last\n"
    )
    tree = drawn_tree(doc)
    assert tree["A"] == Drawn("A", "ImpError", ("ValueError",), "imp")
    assert tree["B"] == Drawn("B", "A", (), "imp.x")
    assert tree["C"] == Drawn("C", "B", (), "imp.x")  # a child is importable where its parent is
    assert tree["D"] == Drawn("D", "ImpError", ("TypeError", "KeyError"), "imp")


def test_every_imp_error_is_drawn_and_every_drawn_class_exists() -> None:
    assert sorted(set(FAMILY) - set(TREE)) == [], "ImpError subclasses missing from the tree in imp/errors.py"
    assert sorted(set(TREE) - set(FAMILY)) == [], "classes drawn in imp/errors.py that imp does not define"


@pytest.mark.parametrize("name", sorted(set(FAMILY) - {"ImpError"}))
def test_each_class_sits_under_its_parent_with_its_other_bases(name: str) -> None:
    drawn, cls = TREE[name], FAMILY[name]
    parents = [b for b in cls.bases if b in FAMILY]
    assert parents == [drawn.parent], f"{name} derives from {cls.bases}; the tree puts it under {drawn.parent}"
    others = tuple(b for b in cls.bases if b not in FAMILY)
    assert others == drawn.bases, f"{name}'s other bases are {others}; the tree says {drawn.bases}"


@pytest.mark.parametrize("name", sorted(set(FAMILY) - {"ImpError"}))
def test_each_class_is_importable_where_the_tree_says(name: str) -> None:
    drawn = TREE[name]
    try:
        module = importlib.import_module(drawn.module)
    except ImportError as exc:  # an optional extra that is not installed here (Ray): the source was read above
        pytest.skip(f"{drawn.module} needs an extra: {exc}")
    value = getattr(module, name, None)
    assert isinstance(value, type) and issubclass(value, imp.ImpError), f"{drawn.module}.{name}"
    assert name in getattr(module, "__all__", ()), f"{drawn.module}.__all__ lists {name}"
    assert value.__module__ == FAMILY[name].module
    assert value.__doc__, f"{name} says what it is for"
    for base in drawn.bases:
        assert issubclass(value, getattr(builtins, base))


def test_every_other_exception_class_is_a_private_signal() -> None:
    others = {name: cls.module for name, cls in DEFINED.items() if name not in FAMILY}
    assert sorted(others) == sorted(INTERNAL), "an exception class outside the ImpError tree"
    for name, module in others.items():
        private = any(part.startswith("_") for part in module.split("."))
        exported = name in getattr(importlib.import_module(module), "__all__", ())
        assert private or not exported, f"{module}.{name} is exported publicly but not an ImpError"
        assert name not in imp.__all__


def test_a_bare_runtime_error_is_raised_only_for_misuse() -> None:
    raising: set[str] = set()
    for path in sorted(ROOT.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Raise) and node.exc is not None:
                called = node.exc.func if isinstance(node.exc, ast.Call) else node.exc
                if isinstance(called, ast.Name) and called.id == "RuntimeError":
                    raising.add(path.relative_to(ROOT.parent).as_posix())
    assert raising <= set(RUNTIME_ERRORS), f"RuntimeError raised in {sorted(raising - set(RUNTIME_ERRORS))}"


def test_mcp_environment_error_is_an_mcp_error_and_still_a_runtime_error(monkeypatch: pytest.MonkeyPatch) -> None:
    from imp.mcp import MCPEnvironmentError, MCPError
    from imp.mcp._servers import parse_servers

    monkeypatch.delenv("IMP_TEST_NOWHERE", raising=False)
    (spec,) = parse_servers([{"name": "s", "url": "http://127.0.0.1:9/mcp", "bearer_token_env": "IMP_TEST_NOWHERE"}])
    with pytest.raises(MCPError, match="IMP_TEST_NOWHERE") as caught:
        spec.http_headers()
    assert isinstance(caught.value, MCPEnvironmentError) and isinstance(caught.value, RuntimeError)
    assert caught.value.variable == "IMP_TEST_NOWHERE"
