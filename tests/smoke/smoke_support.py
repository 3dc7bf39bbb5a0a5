"""The installed-package smoke suite's helpers: the sdist and wheel built once, and clean virtual
environments made on demand, one per (Python, install line, lowest bounds or not), shared by the tests
of one session, and each environment's docs pages run in one process.

Environments are made by uv (`uv venv`, then `uv pip install` of the wheel and the install line, no lock
file, as a user would; uv's cache makes a second one of the same packages take a second or two); the
lowest-bounds ones with `--resolution lowest-direct` and pyproject.toml's requirements given as direct
ones. Every command runs from a folder outside the checkout, with PYTHONPATH cleared, so the source tree
cannot stand in for the wheel.

`IMP_SMOKE_PYTHONS` (comma-separated interpreters) overrides the Pythons found: each supported minor
version (pyproject's requires-python) on PATH or under ~/.pyenv.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from doc_blocks import expand_includes

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
USER_EXTRAS = {k: v for k, v in PROJECT["optional-dependencies"].items() if k not in ("test", "dev", "bench")}
EXTRAS = Path(__file__).resolve().parent / "extras"
"""One snippet per user extra, use_<extra>.py: it imports the extra's module, uses it once, prints ok."""
SUPPORTED = ("3.12", "3.13")
"""The minor versions the classifiers name (a test checks they agree with pyproject.toml)."""


def _version_of(python: str) -> tuple[str, str] | None:
    """(minor version, the interpreter's real path: not a pyenv shim, which depends on the folder)."""
    try:
        out = subprocess.run(
            [python, "-c", "import sys; print('%d.%d' % sys.version_info[:2], sys.executable)"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except OSError:
        return None
    words = out.stdout.split()
    return (words[0], words[1]) if out.returncode == 0 and len(words) == 2 else None


def find_pythons() -> dict[str, str]:
    """Minor version -> interpreter, for each supported version this machine has."""
    given = os.environ.get("IMP_SMOKE_PYTHONS")
    candidates: list[str] = given.split(",") if given else []
    if not given:
        for minor in SUPPORTED:
            candidates += sorted(str(p) for p in Path.home().glob(f".pyenv/versions/{minor}.*/bin/python{minor}"))
            candidates.append(shutil.which(f"python{minor}") or "")
    found: dict[str, str] = {}
    for python in filter(None, candidates):
        version = _version_of(python)
        if version is not None and version[0] in SUPPORTED and version[0] not in found:
            found[version[0]] = version[1]
    return found


PYTHONS = find_pythons()


def clean_env() -> dict[str, str]:
    """The environment a user's shell would give: no PYTHONPATH, no virtual environment of ours."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "PYTHONHOME")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["UV_PYTHON_DOWNLOADS"] = "never"  # uv uses the interpreters given, never one it fetches
    return env


def run(args: list[str], *, cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess[str]:
    """Run a command; on failure, fail the test with its output."""
    result = subprocess.run(args, cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        pytest.fail(
            f"$ {' '.join(args)}\n(exit {result.returncode}, in {cwd})\n--- stdout ---\n{result.stdout[-6000:]}\n"
            f"--- stderr ---\n{result.stderr[-6000:]}",
            pytrace=False,
        )
    return result


@dataclass(frozen=True)
class Dist:
    sdist: Path
    wheel: Path


@pytest.fixture(scope="session")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Dist:
    """The sdist, and the wheel built from it (uv build builds the wheel out of the sdist)."""
    out = tmp_path_factory.mktemp("dist")
    run([uv(), "build", "--python", sys.executable, "--out-dir", str(out), str(ROOT)], cwd=out)
    (sdist,) = out.glob("imp-*.tar.gz")
    (wheel,) = out.glob("imp-*.whl")
    return Dist(sdist, wheel)


def requirement_with_wheel(requirement: str, wheel: Path) -> str:
    """`imp[otel]` -> `imp[otel] @ file:///.../imp-0.1.0-py3-none-any.whl`; other requirements as they are."""
    if re.fullmatch(r"imp(\[[^\]]*\])?", requirement):
        return f"{requirement} @ {wheel.as_uri()}"
    return requirement


def lowest_requirements(requirements: list[str]) -> list[str]:
    """pyproject.toml's own requirements for imp and the extras named, given to uv as direct ones, so
    `--resolution lowest-direct` takes their lower bounds (the wheel's are transitive to uv).

    The extras' requirements come first: uv settles direct requirements in the order given, and where two
    floors cannot meet (mcp 1.30 needs httpx 0.27.1, above imp's floor of 0.27), the extra's environment
    is there to try the extra's floor; imp's own floors are tried alone, in the `imp` environment. (The
    other order moves mcp up to 2.0 instead, so mcp's floor would never be installed.)"""
    found: list[str] = []
    for requirement in requirements:
        match = re.fullmatch(r"imp\[([^\]]*)\]", requirement)
        if match:
            for extra in filter(None, (e.strip() for e in match.group(1).split(","))):
                found += USER_EXTRAS[extra]
    return [*found, *PROJECT["dependencies"]]


class MissingSnippet(AssertionError):
    """An extra of pyproject.toml that has no tests/smoke/extras/use_<extra>.py."""


def snippet_for(extra: str, folder: Path = EXTRAS) -> Path:
    """The snippet that uses `extra` once; MissingSnippet, naming the file to add, when there is none."""
    snippet = folder / f"use_{extra}.py"
    if not snippet.is_file():
        raise MissingSnippet(
            f"pyproject.toml declares the extra {extra!r} but the smoke suite has no snippet for it: add "
            f"tests/smoke/extras/use_{extra}.py, which imports the extra's module, uses it once and prints ok"
        )
    return snippet


def uv() -> str:
    """uv (the dev extra installs it into .venv beside this interpreter)."""
    found = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert found, "the smoke suite needs uv (in the dev extra: make .venv/.installed)"
    return found


class Environments:
    """Clean virtual environments, one per (Python, requirements, lowest), made when first asked for."""

    def __init__(self, root: Path, wheel: Path) -> None:
        self.root = root
        self.wheel = wheel
        self.made: dict[tuple[str, tuple[str, ...], bool], Path] = {}

    def get(self, python: str, requirements: list[str], *, lowest: bool = False) -> Path:
        """The environment's interpreter, with imp's wheel and `requirements` installed."""
        key = (python, tuple(requirements), lowest)
        if key in self.made:
            return self.made[key]
        folder = self.root / f"venv{len(self.made)}"
        run([uv(), "venv", "--quiet", "--python", python, str(folder)], cwd=self.root)
        interpreter = folder / "bin" / "python"
        wanted = [requirement_with_wheel(r, self.wheel) for r in requirements]
        install = [uv(), "pip", "install", "--quiet", "--python", str(interpreter)]
        if lowest:
            install += ["--resolution", "lowest-direct", *lowest_requirements(requirements)]
        run([*install, *wanted], cwd=self.root)
        self.made[key] = interpreter
        return interpreter


@pytest.fixture(scope="session")
def environments(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environments]:
    yield Environments(tmp_path_factory.mktemp("venvs"), dist.wheel)


@dataclass(frozen=True)
class PageResult:
    """How a page's blocks went in its environment: `error` is None when they all ran."""

    ran: int = 0
    saved: int = 0
    error: str | None = None


class PageRuns:
    """Each environment's docs pages, run in one process (tests/doc_blocks.py): every page in a folder of
    its own and a fresh namespace, as tests/test_docs.py runs them in one pytest process. A page that
    fails there is run again alone in a fresh process, and the result says which way it went, so a page
    that breaks only after another one is told from a page that is broken."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.done: dict[Path, dict[Path, PageResult]] = {}

    def result(self, python: Path, pages: list[Path], page: Path) -> PageResult:
        """`page`'s result, running `pages` (all of the environment's) in `python` on the first call."""
        if python not in self.done:
            self.done[python] = self._run(python, pages)
        result = self.done[python][page]
        if result.error is not None:
            alone = self._run(python, [page])[page]
            verdict = (
                "It passes when run alone in a fresh process: a page run before it in the same process "
                "changed something it depends on (the pages are not independent)."
                if alone.error is None
                else "It fails when run alone in a fresh process too."
            )
            result = PageResult(error=f"{result.error}\n\n{verdict}")
        return result

    def _run(self, python: Path, pages: list[Path]) -> dict[Path, PageResult]:
        folder = Path(tempfile.mkdtemp(prefix="pages", dir=self.root))
        shutil.copy(ROOT / "tests" / "doc_blocks.py", folder / "doc_blocks.py")
        copies: dict[Path, Path] = {}
        for page in pages:
            own = folder / page.relative_to(ROOT).with_suffix("").as_posix().replace("/", "_")
            own.mkdir()
            copies[page] = own / page.name  # the site shows the included files inline; so does the copy
            copies[page].write_text(expand_includes(page.read_text(encoding="utf-8"), ROOT), encoding="utf-8")
        report = folder / "report.json"
        args = [str(python), "doc_blocks.py", *map(str, copies.values()), "--report", str(report)]
        try:
            done = subprocess.run(args, cwd=folder, env=clean_env(), capture_output=True, text=True, timeout=1800)
        except subprocess.TimeoutExpired as expired:
            return dict.fromkeys(pages, PageResult(error=f"the pages' process timed out after {expired.timeout} s"))
        if not report.is_file():
            crash = f"the pages' process ended (exit {done.returncode}) without a report:\n{done.stderr[-6000:]}"
            return dict.fromkeys(pages, PageResult(error=crash))
        found = json.loads(report.read_text(encoding="utf-8"))
        results = {}
        for page, copy in copies.items():
            got = found[str(copy.resolve())]
            results[page] = (
                PageResult(ran=got["ran"], saved=got["saved"]) if got["ok"] else PageResult(error=got["error"])
            )
        return results


@pytest.fixture(scope="session")
def page_runs(tmp_path_factory: pytest.TempPathFactory) -> PageRuns:
    return PageRuns(tmp_path_factory.mktemp("pages"))


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A working folder outside the checkout."""
    assert ROOT not in tmp_path.parents
    return tmp_path
