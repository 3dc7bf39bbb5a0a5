"""The documentation site's nav (mkdocs.yml) holds every page in docs/, so a new page cannot be left out
of the site (mkdocs itself only warns about an omitted page, and `make docs` is not part of `make test`)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def nav_pages() -> list[str]:
    text = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    nav = text.split("\nnav:\n", 1)[1]
    nav = re.split(r"\n\S", nav, maxsplit=1)[0]  # up to the next top-level key
    return re.findall(r"^\s*-\s*(?:[^:\n]+:\s*)?(\S+\.md)\s*$", nav, re.M)


def test_every_docs_page_is_in_the_nav() -> None:
    pages = sorted(p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs").rglob("*.md"))
    listed = nav_pages()
    missing = [p for p in pages if p not in listed]
    assert not missing, f"mkdocs.yml's nav lacks {missing}: add each page under the section it belongs to"
    gone = [p for p in listed if p not in pages]
    assert not gone, f"mkdocs.yml's nav names pages that do not exist: {gone}"
    assert len(listed) == len(set(listed)), "a page is in the nav twice"


def test_the_nav_reader_reads_both_forms() -> None:
    assert "index.md" in nav_pages() and "api/index.md" in nav_pages() and "errors.md" in nav_pages()
