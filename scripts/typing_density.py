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

An alias counts as what it stands for, wherever it is used: a name bound to `Any` (`X = Any`,
`X: TypeAlias = Any`, `type X = Any`, `from typing import Any as X`, or a union with `Any` in it,
such as `Any | None`) counts one `Any` at each use, and a name bound to a `dict[str, Any]`-like
subscript counts one such mapping and its `Any` at each use, as if the subscript were written
there. An alias imported by name from another module of the tree counts the same
(`from pkg.mod import X`, relative imports too), so renaming `Any` never lowers a figure.
"""

from __future__ import annotations

import argparse
import ast
import io
import sys
import tokenize
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

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


AliasKind = Literal["any", "map"]
"""What an alias stands for: `"any"` (Any) or `"map"` (a `dict[str, Any]`-like subscript)."""


def _strings_parsed(node: ast.expr) -> ast.expr:
    """A string annotation read as code (itself when it is no string, or no code)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return ast.parse(node.value, mode="eval").body
        except SyntaxError:
            return node
    return node


def _is_any(node: ast.expr, aliases: dict[str, AliasKind]) -> bool:
    """Whether an annotation is `Any` as a reader would call it: `Any`, an alias of it, or a union
    (`X | None`, `Optional[X]`, `Union[...]`) or `Annotated[X, ...]` with such an `X` in it."""
    node = _strings_parsed(node)
    name = _name(node)
    if name == "Any" or aliases.get(name) == "any":
        return True
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return _is_any(node.left, aliases) or _is_any(node.right, aliases)
    if isinstance(node, ast.Subscript) and _name(node.value) in {"Optional", "Union", "Annotated"}:
        inner = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if _name(node.value) == "Annotated":
            inner = inner[:1]
        return any(_is_any(i, aliases) for i in inner)
    return False


def _is_str_any_map(node: ast.Subscript, aliases: dict[str, AliasKind] | None = None) -> bool:
    if _name(node.value) not in _MAPPINGS or not isinstance(node.slice, ast.Tuple) or len(node.slice.elts) != 2:
        return False
    key, value = node.slice.elts
    return _name(key) == "str" and (_name(value) == "Any" or (aliases or {}).get(_name(value)) == "any")


def _alias_kind(value: ast.expr, aliases: dict[str, AliasKind]) -> AliasKind | None:
    """What a name bound to `value` stands for, if it is an alias this script counts."""
    if _is_any(value, aliases):
        return "any"
    value = _strings_parsed(value)
    if isinstance(value, ast.BinOp) and isinstance(value.op, ast.BitOr):  # `dict[str, Any] | None`
        sides = [_strings_parsed(value.left), _strings_parsed(value.right)]
        kinds = {_alias_kind(side, aliases) for side in sides if not _is_none(side)}
        return "map" if kinds == {"map"} else None
    if isinstance(value, ast.Subscript) and _is_str_any_map(value, aliases):
        return "map"
    if aliases.get(_name(value)) == "map":
        return "map"
    return None


def _is_none(node: ast.expr) -> bool:
    return (isinstance(node, ast.Constant) and node.value is None) or _name(node) == "None"


def _module_name(path: Path, root: Path) -> str:
    """`pkg.sub.mod` for `root/sub/mod.py` when `root` is the package `pkg` (`__init__` is the package)."""
    relative = path.relative_to(root.parent).with_suffix("")
    parts = list(relative.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imported_from(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    """The absolute module a `from ... import` names (relative imports resolved against `module`)."""
    if not node.level:
        return node.module or ""
    base = module.split(".")
    if not is_package:
        base = base[:-1]
    base = base[: len(base) - (node.level - 1)] if node.level > 1 else base
    return ".".join([*base, node.module] if node.module else base)


def _aliases(
    tree: ast.Module, module: str = "", is_package: bool = False, known: dict[str, dict[str, AliasKind]] | None = None
) -> dict[str, AliasKind]:
    """The names a module binds to `Any` or to a `dict[str, Any]`-like type: its own aliases and
    those it imports by name from modules whose aliases are `known`."""
    found: dict[str, AliasKind] = {}
    for _ in range(2):  # an alias of an alias defined further down the module
        for node in tree.body:
            target: str | None = None
            value: ast.expr | None = None
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                target, value = node.targets[0].id, node.value
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                if _name(_strings_parsed(node.annotation)) == "TypeAlias":
                    target, value = node.target.id, node.value
            elif isinstance(node, ast.TypeAlias) and isinstance(node.name, ast.Name):
                target, value = node.name.id, node.value
            elif isinstance(node, ast.ImportFrom):
                source = _imported_from(node, module, is_package)
                for alias in node.names:
                    bound = alias.asname or alias.name
                    if source == "typing" or source == "typing_extensions":
                        if alias.name == "Any" and alias.asname and alias.asname != "Any":
                            found[bound] = "any"
                    elif known and alias.name in known.get(source, {}):
                        found[bound] = known[source][alias.name]
            if target is not None and value is not None:
                kind = _alias_kind(value, found)
                if kind is not None:
                    found[target] = kind
    return found


def _alias_uses(tree: ast.AST, aliases: dict[str, AliasKind]) -> tuple[int, int]:
    """How many `Any` and `dict[str, Any]`-like types the uses of `aliases` stand for (string
    annotations read as code). A use is a name read, not the name an alias is bound to."""
    if not aliases:
        return 0, 0
    anys = maps = 0
    for node in ast.walk(tree):
        names: list[ast.Name] = []
        if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            names.append(node)
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and any(a in node.value for a in aliases):
            try:  # a string annotation: "LM | None"
                inner = ast.parse(node.value, mode="eval")
            except SyntaxError:
                continue
            names.extend(n for n in ast.walk(inner) if isinstance(n, ast.Name))
        for name in names:
            kind = aliases.get(name.id)
            if kind == "any":
                anys += 1
            elif kind == "map":
                anys, maps = anys + 1, maps + 1
    return anys, maps


def _maps(tree: ast.AST, aliases: dict[str, AliasKind] | None = None) -> int:
    """The `dict[str, Any]`-like subscripts in a tree, string annotations read as code too."""
    found = 0
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _is_str_any_map(node, aliases):
            found += 1
        elif isinstance(node, ast.Constant) and isinstance(node.value, str) and "Any" in node.value:
            try:  # a string annotation: "dict[str, Any]"
                inner = ast.parse(node.value, mode="eval")
            except SyntaxError:
                continue
            found += _maps(inner, aliases)
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


def _parsed(path: Path) -> tuple[str, ast.Module | None, list[tokenize.TokenInfo]]:
    source = path.read_text(encoding="utf-8", errors="replace")
    try:
        return source, ast.parse(source), list(tokenize.generate_tokens(io.StringIO(source).readline))
    except (SyntaxError, tokenize.TokenError, ValueError):
        return source, None, []


def count_file(path: Path, root: Path | None = None, known: dict[str, dict[str, AliasKind]] | None = None) -> Density:
    """The counts of one source file; with the package `root` and the aliases `known` in its
    modules, the aliases it imports from them count too."""
    source, tree, tokens = _parsed(path)
    lines = len(source.splitlines())
    if tree is None:
        return Density(lines)
    module = _module_name(path, root) if root is not None else ""
    aliases = _aliases(tree, module, path.name == "__init__.py", known)
    anys = sum(1 for t in tokens if t.type == tokenize.NAME and t.string == "Any")
    alias_anys, alias_maps = _alias_uses(tree, aliases)
    return Density(lines, anys + _string_annotation_anys(tree) + alias_anys, _maps(tree, aliases) + alias_maps)


def known_aliases(root: Path) -> dict[str, dict[str, AliasKind]]:
    """Every module's aliases of `Any` and of `dict[str, Any]`-like types, by module name; an alias
    imported from another module of the tree (and handed on again) is one too."""
    files = [] if root.is_file() else sorted(root.rglob("*.py"))
    trees = {}
    for path in files:
        _, tree, _ = _parsed(path)
        if tree is not None:
            trees[_module_name(path, root)] = (tree, path.name == "__init__.py")
    known: dict[str, dict[str, AliasKind]] = {}
    while True:  # until no module learns a new alias through its imports
        found = {module: _aliases(tree, module, package, known) for module, (tree, package) in trees.items()}
        if found == known:
            return known
        known = found


def count_tree(root: Path) -> Density:
    """The counts of every `.py` file under `root` (or of `root` itself when it is a file)."""
    files = [root] if root.is_file() else sorted(root.rglob("*.py"))
    known = known_aliases(root)
    total = Density()
    for path in files:
        total += count_file(path, root if root.is_dir() else None, known)
    return total


def rooms(root: Path) -> dict[str, Density]:
    """Each room's counts: a sub-package of `root`, or a module directly in it."""
    found: dict[str, Density] = {}
    known = known_aliases(root)
    for path in sorted(root.rglob("*.py")):
        relative = path.relative_to(root)
        room = relative.parts[0] if len(relative.parts) > 1 else relative.stem
        found[room] = found.get(room, Density()) + count_file(path, root, known)
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
