"""Saving to a folder that does not exist names that folder, not imp's temporary file."""

from __future__ import annotations

from pathlib import Path

import pytest

import imp


def test_saving_into_a_missing_folder_names_the_folder_and_leaves_nothing(tmp_path: Path) -> None:
    program = imp.predict("question -> answer")
    target = tmp_path / "nope" / "deeper" / "program.json"
    with pytest.raises(FileNotFoundError, match=r"the folder .*deeper does not exist") as info:
        imp.save(program, target)
    assert ".tmp" not in str(info.value) and info.value.filename == str(target)
    assert not (tmp_path / "nope").exists()
    target.parent.mkdir(parents=True)
    assert imp.save(program, target) == target and target.exists()
