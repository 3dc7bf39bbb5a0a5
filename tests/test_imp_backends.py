"""`@both_backends` and the `run` fixture: every test they make runs once under asyncio and once under trio."""

from __future__ import annotations

import inspect
import subprocess
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
import sniffio
from imp_backends import BACKENDS, both_backends

ROOT = Path(__file__).resolve().parent.parent


def test_the_body_runs_once_under_each_library() -> None:
    seen: list[tuple[str, str]] = []

    @both_backends
    async def probe(backend: str) -> None:
        seen.append((backend, sniffio.current_async_library()))

    (mark,) = [m for m in probe.pytestmark if m.name == "parametrize"]  # type: ignore[attr-defined]
    assert mark.args == ("backend", BACKENDS) and set(BACKENDS) == {"asyncio", "trio"}
    for backend in BACKENDS:
        probe(backend=backend)
    assert seen == [("asyncio", "asyncio"), ("trio", "trio")]


def test_fixtures_pass_through_and_marks_stay() -> None:
    got: list[object] = []

    @both_backends
    @pytest.mark.filterwarnings("error")
    async def probe(tmp_path: Path, backend: str) -> None:
        got.append((tmp_path, backend))

    assert list(inspect.signature(probe).parameters) == ["backend", "tmp_path"]
    assert {m.name for m in probe.pytestmark} == {"filterwarnings", "parametrize"}  # type: ignore[attr-defined]
    probe(backend="trio", tmp_path=Path("/x"))
    assert got == [(Path("/x"), "trio")]


def test_a_test_that_does_not_ask_for_the_backend_is_not_given_it() -> None:
    @both_backends
    async def probe() -> None:
        assert sniffio.current_async_library() == "trio"

    probe(backend="trio")
    with pytest.raises(AssertionError):
        probe(backend="asyncio")


def test_only_async_tests_are_decorated() -> None:
    def plain() -> None:
        pass

    with pytest.raises(TypeError, match="async def"):
        both_backends(plain)  # type: ignore[arg-type]


def test_the_run_fixture_runs_under_its_backend(
    backend: str, run: Callable[[Callable[[], Awaitable[Any]]], Any]
) -> None:
    async def body() -> str:
        return sniffio.current_async_library()

    assert run(body) == backend


def test_a_decorated_test_passes_when_run_alone() -> None:
    """Run one `@both_backends` test by its node id in a fresh pytest: both items run and pass."""
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-o",
            "addopts=",
            "-p",
            "no:cacheprovider",
            "tests/programs/test_predict.py::test_runs_under_each_backend",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0 and "2 passed" in result.stdout, result.stdout + result.stderr
