"""How loosely a Python package is typed: `Any`, and `dict` / `Mapping` keyed by `str` with `Any`
values, per 1,000 lines.

    python scripts/typing_density.py imp                      # imp's figures
    python scripts/typing_density.py imp --by-room            # and each room's
    python scripts/typing_density.py path/to/site-packages/httpx   # a peer's, counted the same way

What counts: every `Any` written as a name in code (`Any`, `typing.Any`; never in a string or a
comment), and every subscript `dict[str, Any]` / `Mapping[str, Any]` (also `Dict`,
`MutableMapping`, `typing.` or `collections.abc.` spelled, and the string annotations that spell
them). Lines are physical lines of every `.py` file, blank and comment lines included, so a
figure is comparable between packages whatever their style.
"""

from __future__ import annotations

import argparse
import ast
import io
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path

__all__ = ["Density", "count_file", "count_tree", "main"]

_MAPPINGS = frozenset({"dict", "Dict", "Mapping", "MutableMapping"})


@dataclass(frozen=True, slots=True)
class Density:
    """The counts of one file or tree."""

    lines: int = 0
    any: int = 0
    str_any_maps: int = 0

    def __add__(self, other: Density) -> Density:
        return Density(self.lines + other.lines, self.any + other.any, self.str_any_maps + other.str_any_maps)

    @property
    def any_per_1000(self) -> float:
        """`Any` per 1,000 lines."""
        return 1000 * self.any / self.lines if self.lines else 0.0

    @property
    def maps_per_1000(self) -> float:
        """`dict` / `Mapping[str, Any]` per 1,000 lines."""
        return 1000 * self.str_any_maps / self.lines if self.lines else 0.0


def _name(node: ast.expr) -> str:
    """The last part of a (dotted) name: `Mapping` for `collections.abc.Mapping`."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return node.attr
    return ""


def _is_str_any_map(node: ast.Subscript) -> bool:
    if _name(node.value) not in _MAPPINGS or not isinstance(node.slice, ast.Tuple) or len(node.slice.elts) != 2:
        return False
    key, value = node.slice.elts
    return _name(key) == "str" and _name(value) == "Any"


def _maps(tree: ast.AST) -> int:
    """The `dict[str, Any]`-like subscripts in a tree, string annotations read as code too."""
    found = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is_str_any_map(node):
            found += 1
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "Any" in node.value:
            try:  # a string annotation: "dict[str, Any]"
                inner = ast.parse(node.value, mode="eval")
            except SyntaxError:
                continue
            found += _maps(inner)
    return found


def _string_annotation_anys(tree: ast.AST) -> int:
    """`Any` inside string annotations (quoted forward references), which tokenize sees as strings."""
    found = 0
    for node in ast.walk(tree):
        annotations: list[ast.expr | None] = []
        if isinstance(node, ast.AnnAssign | ast.arg):
            annotations.append(node.annotation)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            annotations.append(node.returns)
        for annotation in annotations:
            for inner in ast.walk(annotation) if annotation is not None else ():
                if isinstance(inner, ast.Constant) and isinstance(inner.value, str):
                    try:
                        parsed = ast.parse(inner.value, mode="eval")
                    except SyntaxError:
                        continue
                    found += sum(1 for n in ast.walk(parsed) if isinstance(n, ast.expr) and _name(n) == "Any")
    return found


def count_file(path: Path) -> Density:
    """The counts of one source file."""
    source = path.read_text(encoding="utf-8", errors="replace")
    lines = len(source.splitlines())
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(source).readline))
        tree = ast.parse(source)
    except (SyntaxError, tokenize.TokenError):
        return Density(lines)
    anys = sum(1 for t in tokens if t.type == tokenize.NAME and t.string == "Any")
    return Density(lines, anys + _string_annotation_anys(tree), _maps(tree))


def count_tree(root: Path) -> Density:
    """The counts of every `.py` file under `root` (or of `root` itself when it is a file)."""
    files = [root] if root.is_file() else sorted(root.rglob("*.py"))
    total = Density()
    for path in files:
        total += count_file(path)
    return total


def rooms(root: Path) -> dict[str, Density]:
    """Each room's counts: a sub-package of `root`, or a module directly in it."""
    found: dict[str, Density] = {}
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        room = relative.parts[0] if len(relative.parts) > 1 else relative.stem
        found[room] = found.get(room, Density()) + count_file(path)
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", type=Path, help="a package directory (or a file)")
    parser.add_argument("--by-room", action="store_true", help="also print each sub-package's figures")
    args = parser.parse_args(argv)
    for root in args.paths:
        if not root.exists():
            print(f"{root}: no such file or directory", file=sys.stderr)
            return 1
        total = count_tree(root)
        print(
            f"{root}: {total.lines} lines; Any {total.any} ({total.any_per_1000:.1f} per 1,000 lines); "
            f"dict/Mapping[str, Any] {total.str_any_maps} ({total.maps_per_1000:.1f} per 1,000 lines)"
        )
        if args.by_room and root.is_dir():
            for room, counts in sorted(rooms(root).items(), key=lambda kv: -kv[1].any):
                print(
                    f"  {room:<14} {counts.lines:6} lines  Any {counts.any:4} ({counts.any_per_1000:5.1f})  "
                    f"maps {counts.str_any_maps:4} ({counts.maps_per_1000:5.1f})"
                )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
