"""imp as users install it: the built wheel in clean virtual environments, used from outside the checkout.

`make smoke` runs this (it is marked `smoke`, so `make test` leaves it out). For each supported Python
the machine has: `import imp` and its version, `python -m imp.trace --help`, every docs page's examples
(the README's too) in an environment holding only that page's install line, each extra of
pyproject.toml installed alone and used once (tests/smoke/extras/use_<extra>.py), and mypy on a user's
file (the wheel's py.typed). The same again with the lowest versions pyproject.toml allows, on the
oldest supported Python.

The work is planned from the selected tests when the session starts (`plan`, below) and runs two jobs at
a time (`IMP_SMOKE_JOBS` changes that); each test then checks its own part of the results.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tarfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from doc_blocks import install_line, python_blocks
from smoke_support import (
    EXTRAS,
    PROJECT,
    PYTHONS,
    RAY_START_ATTEMPTS,
    RAY_START_TIMEOUT,
    ROOT,
    SUPPORTED,
    USER_EXTRAS,
    Dist,
    Environments,
    PageResult,
    Plan,
    Setup,
    Task,
    clean_env,
    run,
    run_pages,
    snippet_for,
)

pytestmark = pytest.mark.smoke

PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
OLDEST = SUPPORTED[0]


def _page_id(page: Path) -> str:
    return page.relative_to(ROOT).as_posix()


def _requirements(page: Path) -> tuple[str, ...]:
    return tuple(install_line(page.read_text(encoding="utf-8")) or ())


def _own_packages_only(page: Path) -> bool:
    """An install line of imp (and its extras) alone: the lowest bounds are pyproject's to keep."""
    return len(_requirements(page)) == 1


# --- what each test needs: an environment and a task in it ------------------------------------------


def _import_task(python: Path, folder: Path) -> tuple[list[str], str]:
    shown = run([str(python), "-c", "import imp; print(imp.__version__, imp.__file__)"], cwd=folder).stdout.split()
    helped = run([str(python), "-m", "imp.trace", "--help"], cwd=folder).stdout
    return shown, helped


def _pages_task(pages: list[Path]) -> Task:
    def task(python: Path, folder: Path) -> dict[Path, PageResult]:
        return run_pages(python, pages, folder)

    return task


def _snippet_task(extra: str) -> Task:
    def task(python: Path, folder: Path) -> str:
        snippet = snippet_for(extra)
        shutil.copy(snippet, folder / snippet.name)
        command = [str(python), snippet.name]
        return run(command, cwd=folder, timeout=600, attempts=RAY_START_ATTEMPTS, again_if=RAY_START_TIMEOUT).stdout

    return task


USER_FILE = """
import imp


async def answer(question: str) -> str:
    program = imp.predict("question -> answer", lm=imp.ScriptedLM([{"answer": "4"}]))
    with imp.deadline(5):
        prediction = await imp.call(program, question=question)
    return str(prediction.answer)


version: str = imp.__version__
"""

WRONG_FILE = """
import imp

imp.deadline("five seconds")
"""


def _mypy_task(python: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    (folder / "user.py").write_text(USER_FILE, encoding="utf-8")
    (folder / "wrong.py").write_text(WRONG_FILE, encoding="utf-8")
    # one run over both files (mypy's start-up, reading imp's types, is most of its time)
    return subprocess.run(
        [str(python), "-m", "mypy", "--strict", "--no-incremental", "user.py", "wrong.py"],
        cwd=folder,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=600,
    )


def needs(test: str, params: dict[str, object]) -> tuple[Setup, str, Task] | str:
    """The environment and task a test checks, or why it is skipped."""
    minor, lowest = str(params.get("minor")), bool(params.get("lowest", False))
    if minor not in PYTHONS:
        return f"Python {minor} is not on this machine (IMP_SMOKE_PYTHONS names interpreters)"
    if lowest and minor != OLDEST:
        return "the lowest bounds run on the oldest supported Python"
    if test == "test_import_version_and_the_trace_command":
        return Setup(minor, ("imp",), lowest), "import", _import_task
    if test == "test_a_page_runs_with_only_its_install_line":
        page = params["page"]
        assert isinstance(page, Path)
        requirements = _requirements(page)
        if not requirements:
            return "no install line"  # the test fails on it, before asking for the environment
        if lowest and not _own_packages_only(page):
            return "the lowest bounds run for pages that install imp (and its extras) alone"
        sharing = [p for p in PAGES if _requirements(p) == requirements]
        return Setup(minor, requirements, lowest), "pages", _pages_task(sharing)
    if test == "test_an_extra_installs_alone_and_works":
        extra = str(params["extra"])
        return Setup(minor, (f"imp[{extra}]",), lowest), f"use_{extra}", _snippet_task(extra)
    if test == "test_a_users_mypy_reads_imps_types":
        return Setup(minor, ("imp", "mypy")), "mypy", _mypy_task
    raise AssertionError(f"no plan for {test}")


@pytest.fixture(scope="session")
def plan(
    request: pytest.FixtureRequest, environments: Environments, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Plan]:
    """Every selected test's environment and task, started at once (see the module's docstring)."""
    made = Plan(environments, tmp_path_factory.mktemp("tasks"), workers=int(os.environ.get("IMP_SMOKE_JOBS", "2")))
    for item in request.session.items:
        module = getattr(item, "module", None)
        params = getattr(getattr(item, "callspec", None), "params", None)
        if module is not None and module.__name__ == __name__ and params is not None:
            needed = needs(getattr(item, "originalname", item.name), params)
            if not isinstance(needed, str):
                made.add(*needed)
    pool = made.start()
    yield made
    pool.shutdown(wait=True, cancel_futures=True)


def _result(plan: Plan, test: str, params: dict[str, object]) -> object:
    needed = needs(test, params)
    if isinstance(needed, str):
        pytest.skip(needed)
    setup, name, _ = needed
    return plan.result(setup, name)


# --- the tests --------------------------------------------------------------------------------------


def test_every_supported_python_is_here() -> None:
    """CI's machine has every Python the package claims; a missing one is said, not silently skipped."""
    claimed = sorted(
        c.rsplit(":: ", 1)[1]
        for c in PROJECT["classifiers"]
        if re.fullmatch(r"Programming Language :: Python :: 3\.\d+", c)
    )
    assert claimed == list(SUPPORTED)
    assert PROJECT["requires-python"] == f">={SUPPORTED[0]}"
    assert sorted(PYTHONS) == list(SUPPORTED), f"found only {PYTHONS}"


def test_every_extra_has_its_snippet() -> None:
    """Said once, up front, before any environment is made (each extra's own test says it again)."""
    missing = [extra for extra in sorted(USER_EXTRAS) if not (EXTRAS / f"use_{extra}.py").is_file()]
    assert not missing, (
        f"pyproject.toml declares extras the smoke suite has no snippet for: {missing}; add "
        "tests/smoke/extras/use_<extra>.py for each (it imports the extra's module, uses it once, prints ok)"
    )


def test_the_wheel_and_the_sdist_hold_the_package(dist: Dist) -> None:
    sources = sorted(p.relative_to(ROOT).as_posix() for p in (ROOT / "imp").rglob("*.py"))
    with zipfile.ZipFile(dist.wheel) as wheel:
        names = set(wheel.namelist())
        metadata = wheel.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    missing = [s for s in [*sources, "imp/py.typed"] if s not in names]
    assert not missing, f"the wheel lacks {missing}"
    assert not [n for n in names if n.split("/")[0] in ("tests", "docs", "examples", "benchmarks")]
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    for field in (
        f"Version: {PROJECT['version']}",
        "License-Expression: MIT",
        f"Requires-Python: {PROJECT['requires-python']}",
        f"Summary: {PROJECT['description']}",
        "Classifier: Typing :: Typed",
        *(f"Classifier: Programming Language :: Python :: {minor}" for minor in SUPPORTED),
        *(f"Provides-Extra: {extra}" for extra in USER_EXTRAS),
    ):
        assert field in metadata, f"the wheel's METADATA lacks {field!r}"
    with tarfile.open(dist.sdist) as sdist:
        held = {name.split("/", 1)[1] for name in sdist.getnames() if "/" in name}
    for needed in ["pyproject.toml", "README.md", "LICENSE", "CHANGELOG.md", *sources, "imp/py.typed"]:
        assert needed in held, f"the sdist lacks {needed}"
    assert not [n for n in held if n.startswith("tests/")], "the sdist holds part of the tests"


@pytest.mark.parametrize("lowest", [False, True], ids=["current", "lowest"])
@pytest.mark.parametrize("minor", SUPPORTED)
def test_import_version_and_the_trace_command(minor: str, lowest: bool, plan: Plan) -> None:
    result = _result(plan, "test_import_version_and_the_trace_command", {"minor": minor, "lowest": lowest})
    assert isinstance(result, tuple)
    shown, helped = result
    assert shown[0] == PROJECT["version"]
    assert "site-packages" in shown[1], f"imp was imported from {shown[1]}, not the installed wheel"
    assert "usage:" in helped


@pytest.mark.parametrize("lowest", [False, True], ids=["current", "lowest"])
@pytest.mark.parametrize("minor", SUPPORTED)
@pytest.mark.parametrize("page", PAGES, ids=_page_id)
def test_a_page_runs_with_only_its_install_line(page: Path, minor: str, lowest: bool, plan: Plan) -> None:
    assert _requirements(page), f"{_page_id(page)} states no install line (tests/test_docs.py says how)"
    results = _result(
        plan, "test_a_page_runs_with_only_its_install_line", {"page": page, "minor": minor, "lowest": lowest}
    )
    assert isinstance(results, dict)
    result = results[page]
    if result.error is not None:
        pytest.fail(result.error, pytrace=False)
    blocks = [b for b in python_blocks(page.read_text(encoding="utf-8")) if b.title is None and b.run]
    assert result.ran == len(blocks), f"{result.ran} of {len(blocks)} blocks ran (a needs- block skipped?)"


@pytest.mark.parametrize("lowest", [False, True], ids=["current", "lowest"])
@pytest.mark.parametrize("minor", SUPPORTED)
@pytest.mark.parametrize("extra", sorted(USER_EXTRAS))
def test_an_extra_installs_alone_and_works(extra: str, minor: str, lowest: bool, plan: Plan) -> None:
    snippet_for(extra)  # a missing snippet is named before anything else
    printed = _result(
        plan, "test_an_extra_installs_alone_and_works", {"extra": extra, "minor": minor, "lowest": lowest}
    )
    assert isinstance(printed, str)
    assert printed.strip().endswith("ok"), printed


@pytest.mark.parametrize("minor", SUPPORTED)
def test_a_users_mypy_reads_imps_types(minor: str, plan: Plan) -> None:
    checked = _result(plan, "test_a_users_mypy_reads_imps_types", {"minor": minor})
    assert isinstance(checked, subprocess.CompletedProcess)
    errors = [line for line in checked.stdout.splitlines() if ": error:" in line]
    assert not [e for e in errors if e.startswith("user.py")], checked.stdout
    # imp's own annotations reach the user (py.typed): a wrong argument type is caught, and no
    # "missing library stubs or py.typed marker" error stands in for it
    assert checked.returncode == 1, checked.stdout + checked.stderr
    assert len(errors) == 1 and errors[0].startswith("wrong.py:4: error: "), checked.stdout
    assert 'Argument 1 to "deadline" has incompatible type "str"' in errors[0], checked.stdout
    assert "py.typed" not in checked.stdout
