"""The installed-package smoke suite's helpers: the sdist and wheel built once, and clean virtual
environments made on demand, one per (Python, install line, lowest bounds or not), shared by the tests
of one session.

Environments are made with the standard library's venv and filled by pip with the wheel and the install
line, no lock file, as a user would; the lowest-bounds ones by uv (`--resolution lowest-direct`, with
pyproject.toml's requirements given as direct ones). Every command runs from a folder outside the
checkout, with PYTHONPATH cleared, so the source tree cannot stand in for the wheel.

`IMP_SMOKE_PYTHONS` (comma-separated interpreters) overrides the Pythons found: each supported minor
version (pyproject's requires-python) on PATH or under ~/.pyenv.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
USER_EXTRAS = {k: v for k, v in PROJECT["optional-dependencies"].items() if k not in ("test", "dev", "bench")}
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
    uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
    assert uv, "the smoke suite needs uv (in the dev extra: make .venv/.installed)"
    run([uv, "build", "--python", sys.executable, "--out-dir", str(out), str(ROOT)], cwd=out)
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
    `--resolution lowest-direct` takes their lower bounds (the wheel's are transitive to uv)."""
    found = list(PROJECT["dependencies"])
    for requirement in requirements:
        match = re.fullmatch(r"imp\[([^\]]*)\]", requirement)
        if match:
            for extra in filter(None, (e.strip() for e in match.group(1).split(","))):
                found += USER_EXTRAS[extra]
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
        run([python, "-m", "venv", str(folder)], cwd=self.root)
        interpreter = folder / "bin" / "python"
        wanted = [requirement_with_wheel(r, self.wheel) for r in requirements]
        if lowest:
            uv = shutil.which("uv", path=str(Path(sys.executable).parent)) or shutil.which("uv")
            assert uv
            args = [uv, "pip", "install", "--python", str(interpreter), "--resolution", "lowest-direct"]
            run([*args, *wanted, *lowest_requirements(requirements)], cwd=self.root)
        else:
            run([str(interpreter), "-m", "pip", "install", "--quiet", *wanted], cwd=self.root)
        self.made[key] = interpreter
        return interpreter


@pytest.fixture(scope="session")
def environments(dist: Dist, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Environments]:
    yield Environments(tmp_path_factory.mktemp("venvs"), dist.wheel)


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A working folder outside the checkout."""
    assert ROOT not in tmp_path.parents
    return tmp_path
