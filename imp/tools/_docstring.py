"""What a tool's docstring tells the model: its summary and each parameter's description.

Reads the three styles pydantic-ai reads (through griffe, which imp does not depend on):

- Google: an `Args:` / `Arguments:` / `Parameters:` / `Keyword Args:` section of `name (type): text`
  lines, also when the docstring is nothing but that section (header on the first line);
- NumPy: a `Parameters` heading underlined with dashes, then `name : type` lines each followed by
  its indented text (`x, y : int` describes both);
- Sphinx: `:param x: text` fields (also `:param int x:`, `:arg`, `:argument`, `:key`, `:keyword`).

Any mix of them is read; the first description found for a name wins. Text the parser does not
recognise is left out of the parameters, never an error: a docstring is prose, not a contract.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

__all__ = ["Docstring", "parse_docstring"]


@dataclass(frozen=True, slots=True)
class Docstring:
    """A parsed docstring: the summary (its first paragraph before any section) and the
    description of each parameter it documents."""

    summary: str = ""
    parameters: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))


_GOOGLE_PARAMS = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters):\s*$", re.IGNORECASE
)
_GOOGLE_ANY = re.compile(
    r"^(Args|Arguments|Parameters|Params|Keyword Args|Keyword Arguments|Other Parameters|Returns?|Yields?|"
    r"Raises|Exceptions?|Examples?|Notes?|Attributes|Methods|References|See Also|Todo|Warnings?|Warns):\s*$",
    re.IGNORECASE,
)
_GOOGLE_ENTRY = re.compile(r"^(\*{0,2}[A-Za-z_]\w*)\s*(?:\((?:[^()]|\([^()]*\))*\))?\s*:(?:\s+(.*))?$")
_NUMPY_PARAMS = frozenset({"parameters", "other parameters", "keyword arguments", "keyword args"})
_NUMPY_RULE = re.compile(r"^-{3,}\s*$")
_NUMPY_ENTRY = re.compile(r"^(\*{0,2}[A-Za-z_]\w*(?:\s*,\s*\*{0,2}[A-Za-z_]\w*)*)\s*(?::.*)?$")
_SPHINX_FIELD = re.compile(r"^:(\w+)((?:\s+[^:]+?)?)\s*:(?:\s+(.*))?$")
_SPHINX_PARAMS = frozenset({"param", "parameter", "arg", "argument", "key", "keyword"})


def parse_docstring(doc: str | None) -> Docstring:
    """The summary and parameter descriptions of `doc` (a raw or cleaned docstring, or None)."""
    if not doc or not doc.strip():
        return Docstring()
    lines = inspect.cleandoc(doc).splitlines()
    found: dict[str, str] = {}
    for reader in (_google, _numpy, _sphinx):
        for name, text in reader(lines).items():
            if text and name not in found:
                found[name] = text
    return Docstring(summary=_summary(lines), parameters=MappingProxyType(found))


def _depth(line: str) -> int:
    return len(line) - len(line.lstrip())


def _joined(parts: list[str]) -> str:
    return " ".join(part.strip() for part in parts if part.strip())


def _starts_section(lines: list[str], index: int) -> bool:
    """Whether line `index` opens a section of any style (where the summary stops)."""
    text = lines[index].strip()
    if _GOOGLE_ANY.match(text) or _SPHINX_FIELD.match(text):
        return True
    return index + 1 < len(lines) and bool(text) and bool(_NUMPY_RULE.match(lines[index + 1].strip()))


def _summary(lines: list[str]) -> str:
    """The first paragraph of the text before the first section, on one line."""
    paragraph: list[str] = []
    for index, line in enumerate(lines):
        if _starts_section(lines, index):
            break
        if not line.strip():
            if paragraph:
                break
            continue
        paragraph.append(line)
    return _joined(paragraph)


def _google(lines: list[str]) -> dict[str, str]:
    found: dict[str, list[str]] = {}
    index = 0
    while index < len(lines):
        header = lines[index]
        index += 1
        if not _GOOGLE_PARAMS.match(header.strip()):
            continue
        # A header on the docstring's first line lost its indentation to cleandoc: its entries
        # then sit at any depth, not only deeper than the header.
        floor = -1 if index == 1 else _depth(header)
        entry_depth: int | None = None
        current: str | None = None
        while index < len(lines):
            line = lines[index]
            if not line.strip():
                index += 1
                continue
            depth = _depth(line)
            if depth <= floor or _GOOGLE_ANY.match(line.strip()):
                break  # the next section, or text after this one
            match = _GOOGLE_ENTRY.match(line.strip())
            if match and (entry_depth is None or depth <= entry_depth):
                entry_depth, current = depth, match.group(1).lstrip("*")
                found[current] = [match.group(2) or ""]
            elif current is not None and entry_depth is not None and depth > entry_depth:
                found[current].append(line)
            else:
                break
            index += 1
    return {name: _joined(parts) for name, parts in found.items()}


def _numpy(lines: list[str]) -> dict[str, str]:
    found: dict[str, list[str]] = {}
    index = 0
    while index + 1 < len(lines):
        heading, rule = lines[index], lines[index + 1]
        index += 1
        if heading.strip().lower() not in _NUMPY_PARAMS or not _NUMPY_RULE.match(rule.strip()):
            continue
        base = _depth(heading)
        index += 1
        names: list[str] = []
        while index < len(lines):
            line = lines[index]
            if not line.strip():
                index += 1
                continue
            depth = _depth(line)
            if depth < base or (index + 1 < len(lines) and _NUMPY_RULE.match(lines[index + 1].strip())):
                break  # less indented text, or the next underlined heading
            if depth == base:
                match = _NUMPY_ENTRY.match(line.strip())
                if not match:
                    break
                names = [n.strip().lstrip("*") for n in match.group(1).split(",")]
                for name in names:
                    found[name] = []
            else:
                for name in names:
                    found[name].append(line)
            index += 1
    return {name: _joined(parts) for name, parts in found.items()}


def _sphinx(lines: list[str]) -> dict[str, str]:
    found: dict[str, list[str]] = {}
    current: str | None = None
    field_depth = 0
    for line in lines:
        match = _SPHINX_FIELD.match(line.strip())
        if match:
            kind, words = match.group(1).lower(), match.group(2).split()
            current = None
            if kind in _SPHINX_PARAMS and words:
                current, field_depth = words[-1].lstrip("*"), _depth(line)
                found[current] = [match.group(3) or ""]
            continue
        if current is not None and line.strip() and _depth(line) > field_depth:
            found[current].append(line)
        else:
            current = None
    return {name: _joined(parts) for name, parts in found.items()}
