"""The smoke suite's rule for extras, checked in `make test` (no environment needed): an extra added to
pyproject.toml without its snippet fails `make smoke` with a message naming the file to add."""

from __future__ import annotations

from pathlib import Path

import pytest
from smoke_support import EXTRAS, USER_EXTRAS, MissingSnippet, snippet_for


def test_a_missing_snippet_names_the_file_to_add(tmp_path: Path) -> None:
    (tmp_path / "use_mcp.py").write_text("print('ok')\n")
    assert snippet_for("mcp", tmp_path) == tmp_path / "use_mcp.py"
    with pytest.raises(MissingSnippet, match=r"extra 'dbos' .* add tests/smoke/extras/use_dbos\.py"):
        snippet_for("dbos", tmp_path)


def test_the_extras_are_read_from_pyproject() -> None:
    assert {"mcp", "acp", "fastapi", "otel", "ray", "agui"} <= set(USER_EXTRAS)
    assert not {"test", "dev", "bench"} & set(USER_EXTRAS)
    for snippet in EXTRAS.glob("use_*.py"):  # no snippet for an extra that is gone
        assert snippet.stem.removeprefix("use_") in USER_EXTRAS, f"{snippet.name} names no extra of pyproject.toml"
