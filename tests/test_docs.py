"""Every ```python block in docs/**/*.md and README.md runs, so the documentation cannot drift from imp.

Each file's blocks run in order in one namespace (a later block may use names an earlier one
defined), as one test per file. A block fenced as ```python no-run is skipped. A block fenced as
```python needs-ray (an optional extra) runs only where Ray is installed (`make test-ray`), and
is skipped elsewhere, with its output block.

A block fenced as ```text output right after a python block is that block's printed output:
what the python block prints must match it (trailing spaces on each line ignored), so the
output a page shows is the output imp gives.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import linecache
import re
import sys
import traceback
import types
import warnings
from dataclasses import dataclass, field
from pathlib import Path

import pytest

DOCS = Path(__file__).resolve().parent.parent / "docs"
_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$")


@dataclass
class Block:
    """One ```python block: its number among the file's python blocks, first line, source, expected output."""

    number: int
    line: int
    source: str
    run: bool = True
    expected: str | None = field(default=None)
    needs: tuple[str, ...] = ()
    """Optional packages the block needs (`needs-ray`): without them it is skipped."""


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(fence) and not stripped.strip(fence[0])


def python_blocks(text: str) -> list[Block]:
    """The ```python blocks of a Markdown text in order, each with its ```text output block if any."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    last_fence_was_python = False
    while i < len(lines):
        match = _FENCE_OPEN.match(lines[i])
        if match is None:
            if lines[i].strip():
                last_fence_was_python = False
            i += 1
            continue
        fence, indent = match.group("fence"), match.group("indent")
        words = match.group("info").split()
        start = end = i + 1
        while end < len(lines) and not _closes(lines[end], fence):
            end += 1
        body = "\n".join(line[len(indent) :] if line.startswith(indent) else line for line in lines[start:end])
        if words[:1] in (["python"], ["py"]):
            needs = tuple(word.removeprefix("needs-") for word in words[1:] if word.startswith("needs-"))
            blocks.append(Block(len(blocks) + 1, start + 1, body + "\n", run="no-run" not in words[1:], needs=needs))
            last_fence_was_python = True
        elif words[:2] == ["text", "output"]:
            if not last_fence_was_python:
                raise ValueError(f"line {i + 1}: a ```text output block must follow a ```python block")
            blocks[-1].expected = body
            last_fence_was_python = False
        else:
            last_fence_was_python = False
        i = end + 1
    return blocks


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def doc_files() -> list[Path]:
    """Every Markdown file under docs/, sorted, then the README."""
    found = sorted(DOCS.rglob("*.md")) if DOCS.is_dir() else []
    return [*found, DOCS.parent / "README.md"]


def _id(path: Path) -> str:
    return path.relative_to(DOCS.parent).as_posix()


def test_fence_reader() -> None:
    text = (
        "intro\n\n```python\nprint(1)\n```\n\n```text output\n1\n```\n\n```text\nnot code\n```\n\n"
        "````markdown\n```python\nnested = 1\n```\n````\n\n  ```python no-run\n  y = 2\n  ```\n"
        "\n```python needs-ray\nz = 3\n```\n"
    )
    blocks = python_blocks(text)
    assert [(b.number, b.source, b.run, b.expected, b.needs) for b in blocks] == [
        (1, "print(1)\n", True, "1", ()),
        (2, "y = 2\n", False, None, ()),
        (3, "z = 3\n", True, None, ("ray",)),
    ]
    with pytest.raises(ValueError, match="must follow"):
        python_blocks("```python\nx = 1\n```\n\nprose\n\n```text output\n1\n```\n")


@pytest.mark.parametrize("path", doc_files(), ids=_id)
def test_doc_examples_run(path: Path) -> None:
    blocks = python_blocks(path.read_text(encoding="utf-8"))
    if not blocks:
        pytest.skip(f"{_id(path)} has no python blocks")
    # A real module, so classes defined in a block (pydantic models, signatures) resolve their
    # annotations against the block's names the way they would in a script.
    module = types.ModuleType("docs_" + re.sub(r"\W", "_", _id(path)))
    sys.modules[module.__name__] = module
    try:
        _run_blocks(path, blocks, module.__dict__)
    finally:
        sys.modules.pop(module.__name__, None)


def _listing(block: Block) -> str:
    numbered = "\n".join(f"{n:4} | {line}" for n, line in enumerate(block.source.splitlines(), start=1))
    return f"--- block {block.number} (line {block.line}) ---\n{numbered}"


def _installed(package: str) -> bool:
    # not find_spec alone: a checkout in a folder named like the package is a namespace package of it
    spec = importlib.util.find_spec(package)
    return spec is not None and spec.origin is not None


def _run_blocks(path: Path, blocks: list[Block], namespace: dict[str, object]) -> None:
    for block in blocks:
        if not block.run or not all(_installed(package) for package in block.needs):
            continue
        if "ray" in block.needs:  # Ray workers get the page's functions by value, as a script's __main__
            from ray import cloudpickle

            cloudpickle.register_pickle_by_value(sys.modules[str(namespace["__name__"])])
        filename = f"{path}:block{block.number}"
        code = compile(block.source, filename, "exec")
        # The block's source is findable as a script's is (inspect.getsource; `@imp.fn` reads the body).
        linecache.cache[filename] = (len(block.source), None, block.source.splitlines(True), filename)
        out = io.StringIO()
        try:
            with warnings.catch_warnings(), contextlib.redirect_stdout(out):
                warnings.simplefilter("default")
                exec(code, namespace)
        except Exception:
            pytest.fail(
                f"{_id(path)}: python block {block.number} (line {block.line}) raised:\n"
                f"{traceback.format_exc()}\nprinted before that:\n{out.getvalue()}\n{_listing(block)}",
                pytrace=False,
            )
        if block.expected is not None and _normal(out.getvalue()) != _normal(block.expected):
            pytest.fail(
                f"{_id(path)}: python block {block.number} (line {block.line}) printed something other "
                f"than the ```text output block after it.\n--- printed ---\n{out.getvalue()}\n"
                f"--- the page shows ---\n{block.expected}\n{_listing(block)}",
                pytrace=False,
            )
