"""The installed-package smoke suite's helpers: the sdist and wheel built once, clean virtual environments,
one per (Python, install line, lowest bounds or not), each environment's docs pages run in one process,
and a plan that does all of that for the selected tests two at a time, from the session's start.

Environments are made by uv (`uv venv`, then `uv pip install` of the wheel and the install line, no lock
file, as a user would; uv's cache makes a second one of the same packages take a second or two); the
lowest-bounds ones with `--resolution lowest-direct` and pyproject.toml's requirements given as direct
ones. Every command runs from a folder outside the checkout, with PYTHONPATH cleared, so the source tree
cannot stand in for the wheel.

`IMP_SMOKE_PYTHONS` (comma-separated interpreters) overrides the Pythons found: each supported minor
version (pyproject's requires-python) on PATH or under ~/.pyenv.
"""

from __future__ import annotations

import itertools
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
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


def run(
    args: list[str], *, cwd: Path, timeout: float = 900, attempts: int = 1, again_if: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run a command; on failure, fail the test with its output. A failure whose output holds
    `again_if` runs the command again, up to `attempts` runs in all."""
    for _ in range(attempts):
        result = subprocess.run(args, cwd=cwd, env=clean_env(), capture_output=True, text=True, timeout=timeout)
        if result.returncode == 0 or not again_if or again_if not in result.stdout + result.stderr:
            break
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


@dataclass(frozen=True)
class Setup:
    """One clean environment: a Python, an install line, and whether at the lowest allowed versions."""

    minor: str
    requirements: tuple[str, ...]
    lowest: bool = False

    @property
    def uses_ray(self) -> bool:
        return any(re.fullmatch(r"imp\[[^\]]*\bray\b[^\]]*\]", r) for r in self.requirements)


class Environments:
    """Clean virtual environments, made by uv from its cache: the wheel and the install line, no lock file."""

    def __init__(self, root: Path, wheel: Path) -> None:
        self.root = root
        self.wheel = wheel
        self._count = itertools.count()

    def make(self, python: str, setup: Setup) -> Path:
        """A new environment for `setup`, with `python`; its interpreter."""
        folder = self.root / f"venv{next(self._count)}"
        run([uv(), "venv", "--quiet", "--python", python, str(folder)], cwd=self.root)
        interpreter = folder / "bin" / "python"
        wanted = [requirement_with_wheel(r, self.wheel) for r in setup.requirements]
        install = [uv(), "pip", "install", "--quiet", "--python", str(interpreter)]
        if setup.lowest:
            install += ["--resolution", "lowest-direct", *lowest_requirements(list(setup.requirements))]
        run([*install, *wanted], cwd=self.root)
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


RAY_START_TIMEOUT = "The current node timed out during startup"
"""Ray's own error when its node does not register within a fixed 30 s (ray/_private/node.py, not
configurable): on a loaded 2-core machine a local `ray.init()` misses it now and then."""
RAY_START_ATTEMPTS = 3
"""A page or snippet that failed only with `RAY_START_TIMEOUT` runs again, up to this many times in all."""


def run_pages(python: Path, pages: list[Path], root: Path) -> dict[Path, PageResult]:
    """`pages` run in one process of `python` (tests/doc_blocks.py): each page in a folder of its own and a
    fresh namespace, as tests/test_docs.py runs them in one pytest process. A page that fails there is run
    again alone in a fresh process, and its result says which way that went, so a page that breaks only
    after another one is told from a page that is broken."""
    results = _run_pages(python, pages, root)
    for page, result in results.items():
        for _ in range(RAY_START_ATTEMPTS - 1):
            if result.error is None or RAY_START_TIMEOUT not in result.error:
                break
            result = results[page] = _run_pages(python, [page], root)[page]
        if result.error is not None and len(pages) > 1:
            alone = _run_pages(python, [page], root)[page]
            verdict = (
                "It passes when run alone in a fresh process: a page run before it in the same process "
                "changed something it depends on (the pages are not independent)."
                if alone.error is None
                else "It fails when run alone in a fresh process too."
            )
            results[page] = PageResult(error=f"{result.error}\n\n{verdict}")
    return results


def _run_pages(python: Path, pages: list[Path], root: Path) -> dict[Path, PageResult]:
    folder = Path(tempfile.mkdtemp(prefix="pages", dir=root))
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
        results[page] = PageResult(ran=got["ran"], saved=got["saved"]) if got["ok"] else PageResult(error=got["error"])
    return results


Task = Callable[[Path, Path], object]
"""Work in one environment: called with its interpreter and a fresh folder outside the checkout."""


class Plan:
    """The suite's slow work, started at the session's start and done `workers` at a time (two: the
    machine's cores), while the tests wait, in order, for the results they check.

    Each environment is one job: make it, then run its tasks one after another (a task's exception,
    a failed test included, is kept for the test that asks). The environments with Ray form a single job,
    one after another: two Ray clusters starting at once on two cores miss Ray's start-up deadline."""

    def __init__(self, environments: Environments, root: Path, workers: int) -> None:
        self.environments = environments
        self.root = root
        self.workers = workers
        self.tasks: dict[Setup, dict[str, Task]] = {}
        self.results: dict[Setup, Future[dict[str, Future[object]]]] = {}

    def add(self, setup: Setup, name: str, task: Task) -> None:
        self.tasks.setdefault(setup, {})[name] = task

    def start(self) -> ThreadPoolExecutor:
        """Submit every job (Ray's first, as the longest); the caller shuts the pool down."""
        pool = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="smoke")
        with_ray = [s for s in self.tasks if s.uses_ray]
        if with_ray:
            lane = pool.submit(lambda: {s: self._job(s) for s in with_ray})
            for setup in with_ray:
                self.results[setup] = _part(lane, setup)
        for setup in self.tasks:
            if not setup.uses_ray:
                self.results[setup] = pool.submit(self._job, setup)
        return pool

    def result(self, setup: Setup, name: str) -> object:
        """The task's return value, once done; re-raises what it raised (a pytest.fail included)."""
        return self.results[setup].result()[name].result()

    def _job(self, setup: Setup) -> dict[str, Future[object]]:
        done: dict[str, Future[object]] = {}
        try:
            python = self.environments.make(PYTHONS[setup.minor], setup)
        except BaseException as failed:  # pytest.fail is a BaseException: every task of the setup reports it
            for name in self.tasks[setup]:
                done[name] = _finished(error=failed)
            return done
        for name, task in self.tasks[setup].items():
            try:
                done[name] = _finished(value=task(python, Path(tempfile.mkdtemp(prefix="task", dir=self.root))))
            except BaseException as failed:
                done[name] = _finished(error=failed)
        return done


def _finished(*, value: object = None, error: BaseException | None = None) -> Future[object]:
    future: Future[object] = Future()
    if error is not None:
        future.set_exception(error)
    else:
        future.set_result(value)
    return future


def _part(lane: Future[dict[Setup, dict[str, Future[object]]]], setup: Setup) -> Future[dict[str, Future[object]]]:
    part: Future[dict[str, Future[object]]] = Future()

    def split(whole: Future[dict[Setup, dict[str, Future[object]]]]) -> None:
        failed = whole.exception()
        if failed is not None:
            part.set_exception(failed)
        else:
            part.set_result(whole.result()[setup])

    lane.add_done_callback(split)
    return part
