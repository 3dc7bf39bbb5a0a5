"""Every ```python block in docs/**/*.md and README.md runs, so the documentation cannot drift from imp.

Each file's blocks run in order in one namespace (a later block may use names an earlier one
defined), as one test per file. A block fenced as ```python no-run is skipped. A block fenced as
```python needs-ray (an optional extra) runs only where Ray is installed (`make test-ray`), and
is skipped elsewhere, with its output block. A ```python title="app.py" block is a file the page
asks the reader to save: it is written to the page's working folder, which is on sys.path.

A block fenced as ```text output right after a python block is that block's printed output:
what the python block prints must match it (trailing spaces on each line ignored), so the
output a page shows is the output imp gives.

Every page states its install line (a ```sh block holding one `pip install ...` before its first
python block), and what its blocks import is covered by it; the smoke suite (`make smoke`) runs each
page in a fresh virtual environment holding only that line. The reader is tests/doc_blocks.py.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from pathlib import Path

import pytest
from doc_blocks import Block, PageFailed, expand_includes, install_line, python_blocks, run_page

__all__ = ["Block", "doc_files", "python_blocks"]

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"


def doc_files() -> list[Path]:
    """Every Markdown file under docs/, sorted, then the README."""
    found = sorted(DOCS.rglob("*.md")) if DOCS.is_dir() else []
    return [*found, ROOT / "README.md"]


def _id(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def test_fence_reader() -> None:
    text = (
        "intro\n\n```python\nprint(1)\n```\n\n```text output\n1\n```\n\n```text\nnot code\n```\n\n"
        "````markdown\n```python\nnested = 1\n```\n````\n\n  ```python no-run\n  y = 2\n  ```\n"
        '\n```python needs-ray\nz = 3\n```\n\n```python title="app.py"\nA = 1\n```\n'
    )
    blocks = python_blocks(text)
    assert [(b.number, b.source, b.run, b.expected, b.needs, b.title) for b in blocks] == [
        (1, "print(1)\n", True, "1", (), None),
        (2, "y = 2\n", False, None, (), None),
        (3, "z = 3\n", True, None, ("ray",), None),
        (4, "A = 1\n", True, None, (), "app.py"),
    ]
    with pytest.raises(ValueError, match="must follow"):
        python_blocks("```python\nx = 1\n```\n\nprose\n\n```text output\n1\n```\n")


def test_install_line_reader() -> None:
    assert install_line("# t\n\n```sh\npip install 'imp[otel]' opentelemetry-sdk\n```\n\n```python\nx\n```\n") == [
        "imp[otel]",
        "opentelemetry-sdk",
    ]
    assert install_line("```sh\npip install imp\ncd x\n```\n") is None  # not a line of its own
    assert install_line("```python\nx\n```\n\n```sh\npip install imp\n```\n") is None  # after the code
    assert install_line("```sh\n# the extra\npip install 'imp[mcp]'\n```\n") == ["imp[mcp]"]


def test_includes_are_expanded(tmp_path: Path) -> None:
    (tmp_path / "lib.py").write_text("VALUE = 3\n")
    assert expand_includes('--8<-- "lib.py"\n', tmp_path) == "VALUE = 3\n"


@pytest.mark.parametrize("path", doc_files(), ids=_id)
def test_doc_examples_run(path: Path, tmp_path: Path) -> None:
    blocks = python_blocks(path.read_text(encoding="utf-8"))
    if not blocks:
        pytest.skip(f"{_id(path)} has no python blocks")
    try:
        run_page(path, name=_id(path), root=ROOT, workdir=tmp_path)
    except PageFailed as failed:
        pytest.fail(str(failed), pytrace=False)


# --- install lines --------------------------------------------------------------------------

PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
USER_EXTRAS = {
    k: v for k, v in PYPROJECT["project"]["optional-dependencies"].items() if k not in ("test", "dev", "bench")
}


def _imports(source: str) -> set[str]:
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


@pytest.mark.parametrize("path", doc_files(), ids=_id)
def test_every_page_states_its_install_line(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    requirements = install_line(text)
    assert requirements is not None, (
        f"{_id(path)} states no install line: put a ```sh block holding one `pip install imp` (with the "
        "page's extras and any other package its examples need) before its first python block"
    )
    assert requirements and requirements[0].split("[")[0] == "imp", f"{_id(path)}: the install line starts with imp"
    extras = requirements[0].partition("[")[2].rstrip("]")
    for extra in filter(None, (e.strip() for e in extras.split(","))):
        assert extra in USER_EXTRAS, f"{_id(path)}: the install line names an extra pyproject.toml lacks: {extra}"


def test_page_imports_are_covered_by_their_install_line() -> None:
    """A page importing a package beyond imp's dependencies names it (or the extra that brings it)."""
    from test_declared_imports import core_modules, extra_modules, extra_provides, import_names, requirement_name

    core, extras = set(core_modules()) | {"pydantic_core"}, extra_modules()
    wrong = []
    for path in doc_files():
        text = path.read_text(encoding="utf-8")
        requirements = install_line(text) or []
        named_extras = set(requirements[0].partition("[")[2].rstrip("]").split(",")) if requirements else set()
        named = {module for r in requirements[1:] for module in import_names(requirement_name(r))}
        blocks = python_blocks(text)
        named |= {Path(block.title).stem for block in blocks if block.title}  # the files the page saves
        named |= set(re.findall(r"(\w+)\.py\b", text))  # the modules the page writes itself
        for extra in named_extras:
            named |= extra_provides(extra)
        for block in blocks:
            if not block.run or block.title:
                continue
            for module in _imports(block.source):
                if module in sys.stdlib_module_names or module == "imp" or module in core or module in named:
                    continue
                if extras.get(module) in named_extras:
                    continue
                wrong.append(f"{_id(path)} block {block.number} imports {module!r}, which its install line lacks")
    assert not wrong, "\n".join(wrong)
