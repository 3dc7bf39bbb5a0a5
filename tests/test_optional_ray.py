"""Without the `ray` extra, `import imp` works and `imp.ray` says how to install it."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import pytest

import imp


def test_import_imp_never_imports_ray() -> None:
    code = "import sys, imp, imp.evaluation; assert 'ray' not in sys.modules, 'import imp loaded ray'"
    subprocess.run([sys.executable, "-c", code], check=True)


def _has_ray() -> bool:
    # not find_spec("ray") alone: a checkout in a folder named `ray` is a namespace package of that name
    spec = importlib.util.find_spec("ray")
    return spec is not None and spec.origin is not None


@pytest.mark.skipif(_has_ray(), reason="ray is installed here (the ray tier)")
def test_imp_ray_without_ray_names_the_extra() -> None:
    with pytest.raises(ImportError, match=r"imp\.ray needs Ray: pip install 'imp\[ray\]'"):
        imp.ray  # noqa: B018 - the lazy attribute is what is tested
