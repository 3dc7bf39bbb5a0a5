"""The public surface: `imp.__all__` is sorted, unique, and every name in it is importable from `imp`."""

from __future__ import annotations

import subprocess
import sys

import imp


def test_all_is_sorted_and_unique() -> None:
    assert imp.__all__ == sorted(imp.__all__)
    assert len(imp.__all__) == len(set(imp.__all__))


def test_every_public_name_is_importable_from_imp() -> None:
    for name in imp.__all__:
        assert getattr(imp, name) is not None, name


def test_star_import_gives_every_public_name_in_a_fresh_process() -> None:
    """The lazily loaded names (evaluation, saving) come with `from imp import *` too."""
    code = "from imp import *; import imp; missing = [n for n in imp.__all__ if n not in globals()]; print(missing)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
