"""The figures of docs/architecture.md's "Measured" table, computed from the source.

    python scripts/measure.py            # print the table
    python scripts/measure.py --write    # write it into docs/architecture.md (`make measure`)
    python scripts/measure.py --check    # exit 1 when the page's table is not the one the code gives

tests/test_architecture.py runs the check, so the page cannot drift from the code: after a change
to `imp/` that moves a figure, `make measure` rewrites the table.
"""

from __future__ import annotations

import argparse
import ast
import sys
from dataclasses import dataclass
from pathlib import Path

import import_graph
import typing_density

__all__ = ["Figures", "figures", "main", "table"]

REPO = Path(__file__).resolve().parent.parent
PAGE = REPO / "docs" / "architecture.md"
START = "<!-- measured: `make measure` writes this table from the code; tests/test_architecture.py checks it -->"
END = "<!-- /measured -->"
CAP = 600
NEAR = 20
STEP_KEYS = ("next_thought", "tool_call_results")
"""The readable keys of a saved history step, which the page says are spelled in one table."""


@dataclass(frozen=True, slots=True)
class Figures:
    """What `make measure` counts."""

    modules: int
    rooms: int
    lines: int
    largest: tuple[str, int]
    near_cap: tuple[str, ...]
    circles_run: tuple[int, int]
    circles_all: tuple[int, int]
    upward_type_only: tuple[str, ...]
    density: typing_density.Density
    spelling: dict[str, tuple[str, ...]]


def _reaches(runs: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, todo = {start}, [start]
    while todo:
        for nxt in runs.get(todo.pop(), ()):
            if nxt == goal:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def _upward(found: list[import_graph.Edge], package: Path) -> list[str]:
    """Type-only imports whose target reaches back to their module (or its room to their room)
    through imports that run: the imports that would close a circle if they ran."""
    modules = import_graph.graph(found)
    rooms = import_graph.graph(import_graph.room_edges(found, package))
    room = import_graph.room
    return sorted(
        {
            f"{e.source} -> {e.target}"
            for e in found
            if e.kind == "type"
            and (
                _reaches(modules, e.target, e.source)
                or (
                    e.source != "imp"
                    and room(e.source, package) != room(e.target, package)
                    and _reaches(rooms, room(e.target, package), room(e.source, package))
                )
            )
        }
    )


def _spelled(paths: dict[str, Path], key: str) -> tuple[str, ...]:
    """The modules holding `key` as a string constant (docstrings left out)."""
    found = []
    for name, path in paths.items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {
            id(node.body[0].value)
            for node in ast.walk(tree)
            if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)
            and node.body
            and isinstance(node.body[0], ast.Expr)
            and isinstance(node.body[0].value, ast.Constant)
        }
        if any(isinstance(n, ast.Constant) and n.value == key and id(n) not in docstrings for n in ast.walk(tree)):
            found.append(name)
    return tuple(sorted(found))


def figures(package: Path = import_graph.PACKAGE) -> Figures:
    """Count everything the table shows."""
    paths = import_graph.modules(package)
    lengths = {name: len(path.read_text(encoding="utf-8").splitlines()) for name, path in paths.items()}
    found = import_graph.edges(package)
    rooms = import_graph.room_edges(found, package)
    both: tuple[import_graph.Kind, ...] = ("run", "type")
    largest = max(lengths.items(), key=lambda kv: (kv[1], kv[0]))
    return Figures(
        modules=len(paths),
        rooms=len({import_graph.room(m, package) for m in paths if m != "imp"}),
        lines=sum(lengths.values()),
        largest=largest,
        near_cap=tuple(sorted(m for m, n in lengths.items() if n >= CAP - NEAR)),
        circles_run=(
            len(import_graph.cycles(import_graph.graph(found))),
            len(import_graph.cycles(import_graph.graph(rooms))),
        ),
        circles_all=(
            len(import_graph.cycles(import_graph.graph(found, kinds=both))),
            len(import_graph.cycles(import_graph.graph(rooms, kinds=both))),
        ),
        upward_type_only=tuple(_upward(found, package)),
        density=typing_density.count_tree(package),
        spelling={key: _spelled(paths, key) for key in STEP_KEYS},
    )


def _path(module: str) -> str:
    return "`" + module.removeprefix("imp.").replace(".", "/") + ".py`"


def table(f: Figures) -> str:
    """The Markdown table (whole numbers where a figure moves with every line written)."""
    near = ", ".join(_path(m) for m in f.near_cap) or "none"
    spelled = "; ".join(f"`{key}` {len(mods)}" for key, mods in f.spelling.items())
    rows = [
        ("modules / rooms", f"{f.modules} / {f.rooms}"),
        ("largest module", f"{_path(f.largest[0])}, {f.largest[1]} lines (cap {CAP})"),
        (f"modules within {NEAR} lines of the cap", near),
        ("import circles, imports that run (modules / rooms)", f"{f.circles_run[0]} / {f.circles_run[1]}"),
        ("import circles, type-only imports counted too", f"{f.circles_all[0]} / {f.circles_all[1]}"),
        ("type-only imports that point up", str(len(f.upward_type_only))),
        ("`Any` per 1,000 lines", f"{f.density.any_per_1000:.1f}"),
        ("`dict` / `Mapping[str, Any]` per 1,000 lines", f"{f.density.maps_per_1000:.1f}"),
        ("modules spelling a saved step's keys", spelled),
    ]
    out = ["| figure | imp |", "| --- | --- |"]
    out += [f"| {name} | {value} |" for name, value in rows]
    return "\n".join(out)


def _block(f: Figures) -> str:
    return f"{START}\n\n{table(f)}\n\n{END}"


def _page_block(text: str) -> str | None:
    start, end = text.find(START), text.find(END)
    if start < 0 or end < start:
        return None
    return text[start : end + len(END)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true", help=f"write the table into {PAGE.relative_to(REPO)}")
    mode.add_argument("--check", action="store_true", help="exit 1 when the page's table is stale")
    parser.add_argument("--page", type=Path, default=PAGE, help="the page holding the table (default: %(default)s)")
    args = parser.parse_args(argv)
    page: Path = args.page
    f = figures()
    block = _block(f)
    text = page.read_text(encoding="utf-8")
    current = _page_block(text)
    if args.write:
        if current is None:
            print(f"{page}: no measured block ({START!r} ... {END!r}) to write into", file=sys.stderr)
            return 1
        page.write_text(text.replace(current, block), encoding="utf-8")
        print(f"wrote the measured table into {page}")
        return 0
    if args.check:
        if current != block:
            print(f"{page}'s measured table is stale: run `make measure`", file=sys.stderr)
            return 1
        return 0
    print(table(f))
    d = f.density
    print(
        f"\n{f.lines} lines; Any {d.any} ({d.any_per_1000:.1f} per 1,000); "
        f"dict/Mapping[str, Any] {d.str_any_maps} ({d.maps_per_1000:.1f} per 1,000)"
    )
    for edge in f.upward_type_only:
        print(f"type-only, pointing up: {edge}")
    for key, mods in f.spelling.items():
        print(f"{key!r} spelled in: {', '.join(mods)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
