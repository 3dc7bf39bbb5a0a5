"""The typing-density count (`scripts/typing_density.py`, the Measured table's figures): every `Any`
a reader would call one is counted, however it is spelled or renamed."""

from __future__ import annotations

from pathlib import Path

import pytest
import typing_density


def _count(tmp_path: Path, files: dict[str, str]) -> typing_density.Density:
    package = tmp_path / "pkg"
    for name, source in files.items():
        path = package / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(source, encoding="utf-8")
    return typing_density.count_tree(package)


@pytest.mark.parametrize(
    ("source", "anys", "maps"),
    [
        ("from typing import Any\nx: Any\n", 2, 0),
        ("import typing\nx: typing.Any\n", 1, 0),
        ("from typing import Any\nx: 'Any | None'\n", 2, 0),
        ("from typing import Any\nx: dict[str, Any]\n", 2, 1),
        ("from typing import Any\nimport typing as t\nx: t.Mapping[str, Any]\n", 2, 1),
        ("from typing import Any\nx: 'Mapping[str, Any]'\n", 2, 1),
        ("x = 'Any text in a string is no Any'  # nor in a comment: Any\n", 0, 0),
        ("x: dict[str, object]\ny: dict[int, int]\n", 0, 0),
    ],
)
def test_spellings_of_any_and_of_string_keyed_maps(tmp_path: Path, source: str, anys: int, maps: int) -> None:
    density = _count(tmp_path, {"__init__.py": "", "m.py": source})
    assert (density.any, density.str_any_maps) == (anys, maps)


@pytest.mark.parametrize(
    "alias",
    [
        "Loose = Any",
        "Loose: TypeAlias = Any",
        "type Loose = Any",
        "Loose = Any | None",
        "Loose = Optional[Any]",
        "Loose = Union[int, Any]",
        "Loose = Annotated[Any, 'meta']",
        "Loose: 'TypeAlias' = 'Any'",
    ],
)
def test_an_alias_of_any_counts_at_every_use(tmp_path: Path, alias: str) -> None:
    head = "from typing import Annotated, Any, Optional, TypeAlias, Union\n"
    defined = _count(tmp_path / "a", {"m.py": head + alias + "\n"}).any
    used = _count(
        tmp_path / "b", {"m.py": head + alias + "\nx: Loose\ny: 'list[Loose]'\ndef f(v: Loose) -> Loose: ...\n"}
    )
    assert used.any == defined + 4


def test_any_imported_under_another_name_counts(tmp_path: Path) -> None:
    density = _count(tmp_path, {"m.py": "from typing import Any as Whatever\nx: Whatever\ny: list[Whatever]\n"})
    assert density.any == 3  # the import names Any once, and each use is one


def test_an_alias_of_a_string_keyed_map_counts_as_the_map_at_every_use(tmp_path: Path) -> None:
    source = "from typing import Any\nRow = dict[str, Any]\nMaybe = Row | None\na: Row\nb: Maybe\nc: 'list[Row]'\n"
    density = _count(tmp_path, {"m.py": source})
    # written: the import's Any and Row's subscript; then four uses (Maybe's own definition is one)
    assert (density.any, density.str_any_maps) == (2 + 4, 1 + 4)


def test_an_alias_imported_from_another_module_counts_there_too(tmp_path: Path) -> None:
    files = {
        "__init__.py": "",
        "low.py": "from typing import Any\nLM = Any\nRow = dict[str, Any]\n",
        "mid.py": "from pkg.low import LM, Row\n",  # handed on, not used here
        "sub/__init__.py": "",
        "sub/high.py": "from ..mid import LM as Model\nfrom pkg.mid import Row\ndef f(m: Model) -> Row: ...\n",
    }
    density = _count(tmp_path, files)
    # written in low.py: the import's Any, LM's, Row's; used in high.py: Model once, Row once
    assert (density.any, density.str_any_maps) == (3 + 2, 1 + 1)


def test_names_that_are_not_aliases_of_any_do_not_count(tmp_path: Path) -> None:
    source = (
        "from typing import Any, Callable\n"
        "Handler = Callable[..., Any]\n"  # counted where it is written, not at each use
        "Pair = tuple[int, str]\n"
        "Loose = object\n"
        "def f(h: Handler, p: Pair, x: Loose) -> None:\n    LM = 3\n    print(LM)\n"
    )
    density = _count(tmp_path, {"m.py": source})
    assert (density.any, density.str_any_maps) == (2, 0)
