"""The house's rules, checked: layers import only downward (no circles), no module over 600 lines,
and every public name is importable from `imp`.

An import that runs counts, at the top or inside a function (a function-local import that closes a
circle only hides it); one under `if TYPE_CHECKING:` names a type for annotations and runs never. `from imp.a.b import x` is an edge to
`imp.a.b` (not to the package `imp.a`); `from imp.a import b` is an edge to the module `imp.a.b`
when there is one.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import import_graph
import measure

import imp

ROOT = Path(imp.__file__).resolve().parent
MAX_LINES = 600
MODULES = import_graph.modules()
EDGES = import_graph.edges()

TYPE_ONLY_CIRCLES: dict[tuple[str, ...], str] = {}
"""Circles that only type-only imports close, still waiting to be settled by moving code, with the
change that settles them. Empty: none shows even when type-only imports are counted."""


def test_the_checker_sees_a_circle() -> None:
    assert import_graph.cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_graph.cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_circles_in_imp() -> None:
    cycles = import_graph.cycles(import_graph.graph(EDGES))
    assert cycles == [], "import circles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_no_circles_between_rooms() -> None:
    """Packages import one another only downward too (the package root `imp` re-exports and is left out)."""
    cycles = import_graph.cycles(import_graph.graph(import_graph.room_edges(EDGES)))
    assert cycles == [], "room circles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_no_circle_even_counting_type_only_imports() -> None:
    """A type-only import that closes a circle says the code is in the wrong place: move it instead."""
    both: tuple[import_graph.Kind, ...] = ("run", "type")
    found = import_graph.cycles(import_graph.graph(EDGES, kinds=both))
    found += import_graph.cycles(import_graph.graph(import_graph.room_edges(EDGES), kinds=both))
    unexpected = [c for c in found if tuple(c) not in TYPE_ONLY_CIRCLES]
    assert unexpected == [], "circles closed by type-only imports: " + "; ".join(" <-> ".join(c) for c in unexpected)
    gone = [c for c in TYPE_ONLY_CIRCLES if list(c) not in found]
    assert gone == [], f"settled, so leave TYPE_ONLY_CIRCLES: {gone}"


def test_no_module_over_600_lines() -> None:
    long = {name: n for name, path in MODULES.items() if (n := len(path.read_text().splitlines())) > MAX_LINES}
    assert long == {}


def test_the_measured_figures_of_the_architecture_page_are_the_codes() -> None:
    """docs/architecture.md's Measured table is what `make measure` counts now (run it after a change)."""
    assert measure.table(measure.figures()) in measure.PAGE.read_text(encoding="utf-8"), (
        "docs/architecture.md's measured table is stale: run `make measure`"
    )


def test_measure_check_says_when_the_page_is_stale(tmp_path: Path) -> None:
    page = tmp_path / "architecture.md"
    page.write_text(f"# x\n\n{measure.START}\n\n| stale |\n\n{measure.END}\n", encoding="utf-8")
    script = Path(measure.__file__)
    stale = subprocess.run(
        [sys.executable, str(script), "--check", "--page", str(page)], capture_output=True, text=True, check=False
    )
    assert stale.returncode == 1 and "make measure" in stale.stderr
    subprocess.run([sys.executable, str(script), "--write", "--page", str(page)], check=True, capture_output=True)
    assert measure.table(measure.figures()) in page.read_text(encoding="utf-8")
    fresh = subprocess.run([sys.executable, str(script), "--check", "--page", str(page)], check=False)
    assert fresh.returncode == 0


def test_every_public_name_is_importable_and_all_is_sorted() -> None:
    missing = [name for name in imp.__all__ if not hasattr(imp, name)]
    assert missing == []
    assert list(imp.__all__) == sorted(imp.__all__)
    assert len(set(imp.__all__)) == len(imp.__all__)
