"""Reading and running a Markdown page's code blocks: the one reader behind tests/test_docs.py and
the installed-package smoke suite (tests/smoke/), standard library only, so it also runs as a script
in a clean virtual environment that holds nothing but a page's own install line:

    python doc_blocks.py PAGE.md [--root DIR]   # runs the page's blocks in order; exit 1 on the first failure
    python doc_blocks.py A.md B.md --report r.json   # each page in turn, in its own folder; results as JSON

The page conventions:

- ```python blocks run in order in one namespace (a later block may use names an earlier one defined).
  ```python no-run is skipped; ```python needs-ray runs only where that optional package is installed.
- A ```text output block right after a python block is what that block prints (trailing spaces ignored).
- A ```python title="name.py" block is a file the page asks the reader to save: it is written into the
  working directory (which is on sys.path, as a script's folder is) and not run. Its body may be one
  include line, `--8<-- "docs/examples/name.py"` (the site's snippet syntax, a path from the root).
- The page's install line is its first ```sh block before the first python block that holds a single
  `pip install ...` line: the smoke suite runs the page in a fresh environment with only that installed.
"""

from __future__ import annotations

import contextlib
import importlib.util
import io
import linecache
import re
import shlex
import sys
import traceback
import types
import warnings
from dataclasses import dataclass, field
from pathlib import Path

_FENCE_OPEN = re.compile(r"^(?P<indent>[ \t]*)(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$")
_TITLE = re.compile(r'title="(?P<title>[^"]+)"')
_INCLUDE = re.compile(r'^--8<--\s+"(?P<path>[^"]+)"\s*$')


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
    title: str | None = None
    """A file to save (`title="app.py"`) rather than a block to run."""


def _closes(line: str, fence: str) -> bool:
    stripped = line.strip()
    return stripped.startswith(fence) and not stripped.strip(fence[0])


def _fences(text: str) -> list[tuple[int, str, str]]:
    """Every fenced block of a Markdown text: (first line of the body, info string, body)."""
    found = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        match = _FENCE_OPEN.match(lines[i])
        if match is None:
            i += 1
            continue
        fence, indent = match.group("fence"), match.group("indent")
        start = end = i + 1
        while end < len(lines) and not _closes(lines[end], fence):
            end += 1
        body = "\n".join(line[len(indent) :] if line.startswith(indent) else line for line in lines[start:end])
        found.append((start, match.group("info").strip(), body))
        i = end + 1
    return found


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
        info = match.group("info")
        words = info.split()
        start = end = i + 1
        while end < len(lines) and not _closes(lines[end], fence):
            end += 1
        body = "\n".join(line[len(indent) :] if line.startswith(indent) else line for line in lines[start:end])
        if words[:1] in (["python"], ["py"]):
            needs = tuple(word.removeprefix("needs-") for word in words[1:] if word.startswith("needs-"))
            title = _TITLE.search(info)
            blocks.append(
                Block(
                    len(blocks) + 1,
                    start + 1,
                    body + "\n",
                    run="no-run" not in words[1:],
                    needs=needs,
                    title=title.group("title") if title else None,
                )
            )
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


def install_line(text: str) -> list[str] | None:
    """The requirements of a page's install line (`pip install 'imp[otel]' x` -> ["imp[otel]", "x"]), or
    None when the page has none before its first python block."""
    for _, info, body in _fences(text):
        words = info.split()
        if words[:1] in (["python"], ["py"]):
            return None
        if words[:1] not in (["sh"], ["bash"], ["console"], ["shell"]):
            continue
        lines = [line.strip() for line in body.splitlines() if line.strip() and not line.strip().startswith("#")]
        if len(lines) == 1 and lines[0].startswith("pip install "):
            return shlex.split(lines[0].split("#", 1)[0])[2:]
    return None


def expand_includes(source: str, root: Path) -> str:
    """A block's source with each `--8<-- "path"` line replaced by that file (a path from `root`)."""
    out = []
    for line in source.splitlines(keepends=True):
        match = _INCLUDE.match(line.strip())
        if match is None:
            out.append(line)
            continue
        included = (root / match.group("path")).read_text(encoding="utf-8")
        out.append(included if included.endswith("\n") else included + "\n")
    return "".join(out)


def _normal(text: str) -> str:
    return "\n".join(line.rstrip() for line in text.strip("\n").splitlines())


def _listing(block: Block) -> str:
    numbered = "\n".join(f"{n:4} | {line}" for n, line in enumerate(block.source.splitlines(), start=1))
    return f"--- block {block.number} (line {block.line}) ---\n{numbered}"


def installed(package: str) -> bool:
    """Whether an optional package is importable (not a folder of that name in the working directory)."""
    # not find_spec alone: a checkout in a folder named like the package is a namespace package of it
    spec = importlib.util.find_spec(package)
    return spec is not None and spec.origin is not None


class PageFailed(Exception):
    """A block of the page raised, or printed something other than its ```text output block."""


def run_page(path: Path, *, name: str, root: Path, workdir: Path) -> None:
    """Run a page's blocks in order in one fresh module namespace, with `workdir` as the folder its
    saved files go to (put on sys.path while it runs). Raises PageFailed with the block's listing."""
    blocks = python_blocks(path.read_text(encoding="utf-8"))
    module = types.ModuleType("docs_" + re.sub(r"\W", "_", name))
    sys.modules[module.__name__] = module
    sys.path.insert(0, str(workdir))
    try:
        _run_blocks(blocks, name=name, path=path, root=root, workdir=workdir, namespace=module.__dict__)
    finally:
        sys.path.remove(str(workdir))
        sys.modules.pop(module.__name__, None)
        for saved in [b.title for b in blocks if b.title]:  # the page's own modules, not another page's
            sys.modules.pop(Path(saved).stem, None)


def _run_blocks(
    blocks: list[Block], *, name: str, path: Path, root: Path, workdir: Path, namespace: dict[str, object]
) -> None:
    for block in blocks:
        if block.title is not None:
            (workdir / block.title).write_text(expand_includes(block.source, root), encoding="utf-8")
            continue
        if not block.run or not all(installed(package) for package in block.needs):
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
            raise PageFailed(
                f"{name}: python block {block.number} (line {block.line}) raised:\n"
                f"{traceback.format_exc()}\nprinted before that:\n{out.getvalue()}\n{_listing(block)}"
            ) from None
        if block.expected is not None and _normal(out.getvalue()) != _normal(block.expected):
            raise PageFailed(
                f"{name}: python block {block.number} (line {block.line}) printed something other "
                f"than the ```text output block after it.\n--- printed ---\n{out.getvalue()}\n"
                f"--- the page shows ---\n{block.expected}\n{_listing(block)}"
            )


def run_one(page: Path, *, root: Path) -> dict[str, object]:
    """Run one page with the working directory as its folder: {"ok", "ran", "saved"} or {"ok", "error"}."""
    blocks = python_blocks(page.read_text(encoding="utf-8"))
    try:
        run_page(page, name=page.name, root=root, workdir=Path.cwd())
    except PageFailed as failed:
        return {"ok": False, "error": str(failed)}
    except SystemExit:  # a block calling sys.exit is the page's failure, not the end of the other pages
        return {"ok": False, "error": f"{page.name}: a block called sys.exit:\n{traceback.format_exc()}"}
    ran = [b for b in blocks if b.title is None and b.run and all(installed(p) for p in b.needs)]
    saved = [b for b in blocks if b.title is not None]
    return {"ok": True, "ran": len(ran), "saved": len(saved)}


def main(argv: list[str]) -> int:
    """`python doc_blocks.py PAGE.md... [--root DIR] [--report FILE]`: run each page in turn, from the
    folder it is in (its saved files go there), each in a fresh namespace; print one line per page, and
    with --report write every page's result as JSON (the smoke suite runs an environment's pages in one
    process this way). Exit 1 if a page failed."""
    import argparse
    import json
    import os

    parser = argparse.ArgumentParser(prog="doc_blocks.py", description="Run Markdown pages' python blocks.")
    parser.add_argument("pages", type=Path, nargs="+")
    parser.add_argument("--root", type=Path, default=Path.cwd(), help="where include paths start (default: .)")
    parser.add_argument("--report", type=Path, help="write each page's result here, as JSON")
    args = parser.parse_args(argv)
    root, report = args.root.resolve(), args.report.resolve() if args.report else None
    here = Path.cwd()
    results: dict[str, dict[str, object]] = {}
    for page in args.pages:
        page = page.resolve()
        os.chdir(page.parent)
        try:
            result = run_one(page, root=root)
        finally:
            os.chdir(here)
        results[str(page)] = result
        if result["ok"]:
            print(f"{page.name}: {result['ran']} blocks ran, {result['saved']} files saved", flush=True)
        else:
            print(result["error"], file=sys.stderr, flush=True)
    if report is not None:
        report.write_text(json.dumps(results, indent=1), encoding="utf-8")
    return 0 if all(r["ok"] for r in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
