"""Every module imp imports at run time is declared: the standard library, a dependency in
pyproject.toml, or behind the extra that declares it, refusing to load without it with an error that
names `pip install 'imp[extra]'`.

The lock file installs far more than pyproject.toml declares (the test extras pull in sniffio, trio,
starlette, ...), so `make test` alone cannot see an undeclared import: a user's `pip install imp` can.
These tests read the imports out of the source and check each against pyproject.toml, then import
each extra's modules with that extra's packages hidden. (The smoke suite, `make smoke`, does the same
for real: each extra installed alone into a clean virtual environment.)
"""

from __future__ import annotations

import ast
import functools
import importlib.metadata
import re
import subprocess
import sys
import textwrap
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "imp"
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))

PROVIDED_BY = {"pydantic_core": "pydantic"}
"""Modules a declared dependency installs and pins as part of itself (pydantic requires one exact
pydantic-core, and documents `pydantic_core.to_json`, `from_json` and `PydanticUndefined` as its API)."""

ONLY_WHEN_RUNNING = {
    "trio": "imported only once the running event loop is trio's, so whoever runs imp on trio has it",
}
"""Packages imported inside a function only where the caller's own situation proves they are there."""

IMPORT_NAMES = {
    "agent-client-protocol": ("acp",),
    "ag-ui-protocol": ("ag_ui",),
    "opentelemetry-api": ("opentelemetry",),
    "opentelemetry-sdk": ("opentelemetry",),
    "pysqlite3-binary": ("pysqlite3",),
}
"""The import names of distributions whose import name is not their project name, for when the
distribution is not installed here (installed ones are read from their metadata)."""


def requirement_name(requirement: str) -> str:
    """`ray[data]==2.60.0` -> `ray`: a requirement's project name, normalized."""
    match = re.match(r"[A-Za-z0-9][A-Za-z0-9._-]*", requirement.strip())
    assert match is not None, f"cannot read the requirement {requirement!r}"
    return re.sub(r"[-_.]+", "-", match.group()).lower()


@functools.cache
def _installed_modules() -> dict[str, list[str]]:
    """Top-level module -> the distributions installing it (read once: it reads every distribution's files)."""
    return importlib.metadata.packages_distributions()


def import_names(distribution: str) -> tuple[str, ...]:
    """The top-level modules a distribution installs."""
    installed = sorted(
        module
        for module, dists in _installed_modules().items()
        if any(requirement_name(d) == distribution for d in dists) and not module.startswith("_")
    )
    if installed:
        return tuple(installed)
    return IMPORT_NAMES.get(distribution, (distribution.replace("-", "_"),))


def core_modules() -> dict[str, str]:
    """Import name -> the dependency that provides it, for `[project] dependencies`."""
    found = {}
    for requirement in PYPROJECT["project"]["dependencies"]:
        dist = requirement_name(requirement)
        for module in import_names(dist):
            found[module] = dist
    return found


def extra_modules() -> dict[str, str]:
    """Import name -> the user-facing extra that provides it (test, dev and bench are the project's own)."""
    found: dict[str, str] = {}
    for extra, requirements in PYPROJECT["project"]["optional-dependencies"].items():
        if extra in ("test", "dev", "bench"):
            continue
        for requirement in requirements:
            for module in import_names(requirement_name(requirement)):
                found.setdefault(module, extra)
    return found


@functools.cache
def extra_provides(extra: str) -> frozenset[str]:
    """Import names an extra's packages bring with them (their own requirements, where installed): a
    module behind the `mcp` extra may import starlette, which the MCP SDK requires."""
    found: set[str] = set()
    for requirement in PYPROJECT["project"]["optional-dependencies"].get(extra, []):
        try:
            needs = importlib.metadata.requires(requirement_name(requirement)) or []
        except importlib.metadata.PackageNotFoundError:
            continue
        for need in needs:
            if "extra ==" not in need:
                found.update(import_names(requirement_name(need)))
    return frozenset(found)


@dataclass(frozen=True)
class Import:
    """One import statement's top-level module, where it is, and how it runs."""

    module: str
    """The importing module, dotted (`imp.programs.stream`)."""
    line: int
    name: str
    """The imported top-level name (`anyio`)."""
    in_function: bool
    guarded: bool
    """Inside a `try` that catches ImportError: the module copes without it."""


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _copes_without(node: ast.Try) -> bool:
    """A `try` whose ImportError handler goes on without the module (one that raises refuses instead)."""
    for handler in node.handlers:
        names = [handler.type] if not isinstance(handler.type, ast.Tuple) else list(handler.type.elts)
        if any(isinstance(n, ast.Name) and n.id in ("ImportError", "ModuleNotFoundError") for n in names):
            return not any(isinstance(inner, ast.Raise) for inner in ast.walk(handler))
    return False


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def run_time_imports(module: str, source: str) -> Iterator[Import]:
    """Every import in a module's source that runs (not under `if TYPE_CHECKING:`), with
    `importlib.import_module` and `find_spec` calls given a literal name."""

    def visit(node: ast.AST, in_function: bool, guarded: bool) -> Iterator[Import]:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                yield from visit(child, in_function, guarded)
            return
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        elif (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr in ("import_module", "find_spec")
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            names = [node.args[0].value]
        for name in names:
            yield Import(module, getattr(node, "lineno", 0), name.split(".")[0], in_function, guarded)
        function = in_function or isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda)
        if isinstance(node, ast.Try) and _copes_without(node):
            for child in node.body:
                yield from visit(child, function, True)
            for part in (node.handlers, node.orelse, node.finalbody):
                for child in part:
                    yield from visit(child, function, guarded)
            return
        for child in ast.iter_child_nodes(node):
            yield from visit(child, function, guarded)

    yield from visit(ast.parse(source, module), False, False)


def all_imports() -> list[Import]:
    return [
        found
        for path in sorted(PACKAGE.rglob("*.py"))
        for found in run_time_imports(_module_name(path), path.read_text(encoding="utf-8"))
    ]


def test_import_reader_sees_every_kind_of_import() -> None:
    source = textwrap.dedent(
        """
        import os, httpx.client
        from typing import TYPE_CHECKING
        from . import sibling
        if TYPE_CHECKING:
            import hidden
        else:
            import shown
        try:
            import optional
        except ImportError:
            optional = None
        try:
            import required
        except ImportError as exc:
            raise ImportError("pip install 'imp[x]'") from exc
        def f():
            import inner
            return importlib.import_module("dynamic")
        """
    )
    found = [(i.name, i.in_function, i.guarded) for i in run_time_imports("imp.probe", source)]
    assert found == [
        ("os", False, False),
        ("httpx", False, False),
        ("typing", False, False),
        ("shown", False, False),
        ("optional", False, True),
        ("required", False, False),
        ("inner", True, False),
        ("dynamic", True, False),
    ]


def test_every_import_is_declared() -> None:
    core, extras = core_modules(), extra_modules()
    behind: dict[str, set[str]] = {}
    for found in all_imports():
        if found.name in extras:
            behind.setdefault(found.module, set()).add(extras[found.name])
    wrong = []
    for found in all_imports():
        name = found.name
        if any(name in extra_provides(extra) for extra in behind.get(found.module, ())):
            continue  # brought by the extra the module stands behind
        if name in sys.stdlib_module_names or name == "imp" or name in core or found.guarded:
            continue
        if name in PROVIDED_BY and requirement_name(PROVIDED_BY[name]) in core.values():
            continue
        if name in extras:
            continue  # checked below: the module must refuse to load without the extra
        if found.in_function and name in ONLY_WHEN_RUNNING:
            continue
        wrong.append(
            f"{found.module} (line {found.line}) imports {name!r}, which pyproject.toml does not declare: "
            "add it to [project] dependencies, or to an extra the module refuses to load without"
        )
    assert not wrong, "\n".join(wrong)


def extra_importers() -> list[tuple[str, str]]:
    """(module, extra) for every imp module that imports an extra's package at run time."""
    extras = extra_modules()
    names: dict[tuple[str, str], set[str]] = {}
    for i in all_imports():
        if i.name in extras and not i.guarded:
            names.setdefault((i.module, extras[i.name]), set()).add(i.name)
    pairs = {
        (module, extra)
        for (module, extra), imported in names.items()
        # uvicorn in a module behind `mcp` is the MCP SDK's own requirement, not the fastapi extra
        if not any(other != extra and imported <= extra_provides(other) for (m, other) in names if m == module)
    }
    return sorted(pairs)


_HIDE = """
import importlib.abc, sys
HIDDEN = set(sys.argv[1].split(","))
class Hide(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in HIDDEN:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, Hide())
"""


def _run_hidden(hidden: set[str], code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _HIDE + textwrap.dedent(code), ",".join(sorted(hidden))],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )


def test_every_extra_has_an_importer_check() -> None:
    """The check below is not vacuous: the extras with modules of their own are found."""
    assert {extra for _, extra in extra_importers()} >= {"mcp", "acp", "otel", "ray"}


@pytest.mark.parametrize(("module", "extra"), extra_importers(), ids=[f"{m}[{e}]" for m, e in extra_importers()])
def test_a_module_behind_an_extra_names_it_when_missing(module: str, extra: str) -> None:
    hidden = {name for name, owner in extra_modules().items() if owner == extra}
    result = _run_hidden(
        hidden,
        f"""
        try:
            import {module}
        except ImportError as exc:
            print("REFUSED:", exc)
        else:
            print("LOADED")
        """,
    )
    assert result.returncode == 0, result.stderr
    assert f"pip install 'imp[{extra}]'" in result.stdout, (
        f"import {module} without the {extra!r} extra's packages ({', '.join(sorted(hidden))}) should raise "
        f"ImportError naming pip install 'imp[{extra}]'; it gave: {result.stdout.strip() or result.stderr}"
    )


def test_import_imp_needs_no_extra_nor_test_package() -> None:
    """With every extra hidden, and the test tools that happen to be in the lock (trio; sniffio too where
    anyio does not need it), `import imp`, its lazily loaded rooms and a streamed call work."""
    hidden = set(extra_modules()) | {"trio", "hypothesis", "pytest"}
    anyio_needs = [r for r in importlib.metadata.requires("anyio") or [] if "extra ==" not in r]
    if not any(requirement_name(r) == "sniffio" for r in anyio_needs):
        hidden.add("sniffio")  # older anyio releases (4.11, the lowest allowed) still import it themselves
    result = _run_hidden(
        hidden,
        """
        import anyio
        import imp
        from imp import evaluation, optimize, saving, observe
        from imp.observe import trace_html

        lm = imp.ScriptedLM([{"answer": "4"}])

        async def main():
            parts = [part async for part in imp.stream(imp.predict("question -> answer", lm=lm), {"question": "2+2?"})]
            print("streamed", parts[-1].prediction.answer)

        anyio.run(main)
        for name in ("mcp", "ray"):
            try:
                getattr(imp, name)
            except ImportError as exc:
                print(exc)
        """,
    )
    assert result.returncode == 0, result.stderr
    assert "streamed 4" in result.stdout
    assert "pip install 'imp[mcp]'" in result.stdout
    assert "pip install 'imp[ray]'" in result.stdout
