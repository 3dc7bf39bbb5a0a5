"""The Ray tier: a local Ray cluster started once for the session, and the loopback fake provider.

Every test in this folder is marked `ray` (`make test-ray` runs them in `.venv-ray`; `make test`
leaves them out). The workers get the test folders on their import path, so a metric or an LM
factory defined in `ray_support` travels by name.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ray = pytest.importorskip("ray", reason="the Ray tier needs Ray: make test-ray")
if not hasattr(ray, "init"):  # a checkout in a folder named `ray` is a namespace package of that name
    pytest.skip("the Ray tier needs Ray: make test-ray", allow_module_level=True)

HERE = Path(__file__).resolve().parent
for folder in (HERE, HERE.parent):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from fake_provider import FakeProvider  # noqa: E402
from ray_support import chat_reply  # noqa: E402


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    for item in items:
        if Path(str(item.fspath)).resolve().is_relative_to(here):
            item.add_marker(pytest.mark.ray)


@pytest.fixture(scope="session")
def cluster() -> Iterator[Any]:
    """A local two-CPU cluster (workers take half a CPU each, so two fit beside the driver)."""
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        logging_level="ERROR",
        log_to_driver=False,
        runtime_env={"env_vars": {"PYTHONPATH": os.pathsep.join(sys.path)}},
    )
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.fixture
def fake() -> Iterator[FakeProvider]:
    server = FakeProvider()
    server.responder = chat_reply
    server.start()
    try:
        yield server
    finally:
        server.stop()
