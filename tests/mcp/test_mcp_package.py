"""`imp.mcp` is its own package: its public names, and the optional SDK needed only by who uses it."""

from __future__ import annotations

import subprocess
import sys

import imp
import imp.mcp


def _run(code: str) -> subprocess.CompletedProcess[str]:
    """Run `code` in a fresh interpreter, so `sys.modules` starts empty."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)


def test_public_names_are_reached_through_imp() -> None:
    assert imp.mcp is sys.modules["imp.mcp"]
    assert sorted(imp.mcp.__all__) == imp.mcp.__all__
    for name in ["MCPTools", "MCPResult", "MCPImage", "MCPError", "InvalidMCPServer", "Unavailable"]:
        assert getattr(imp.mcp, name).__module__.startswith("imp.mcp.")
    assert imp.mcp.connect.__module__ == "imp.mcp._connect"
    assert issubclass(imp.mcp.MCPError, imp.ImpError)


def test_import_imp_does_not_load_the_sdk() -> None:
    done = _run("import sys, imp, imp.tools; print('mcp' in sys.modules, 'imp.mcp' in sys.modules)")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["False", "False"]


def test_without_the_sdk_imp_works_and_imp_mcp_says_what_to_install() -> None:
    code = (
        "import sys\n"
        "sys.modules['mcp'] = None  # as if the extra were not installed\n"
        "import imp\n"
        "assert imp.predict is not None\n"
        "try:\n"
        "    imp.mcp\n"
        "except ImportError as exc:\n"
        "    print(exc)\n"
    )
    done = _run(code)
    assert done.returncode == 0, done.stderr
    assert "pip install 'imp[mcp]'" in done.stdout
