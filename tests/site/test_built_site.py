"""The built documentation site (`make docs` builds build/site, then runs these): the API reference
lists every public name, each extra's module has its page, and headless Chromium renders the home
page, a guide and the API reference with their navigation, served over HTTP on 127.0.0.1.

Marked `site`: `make test` leaves them out (they need the site built in its own environment).
"""

from __future__ import annotations

import functools
import html
import http.server
import os
import re
import shutil
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

import imp

pytestmark = pytest.mark.site

ROOT = Path(__file__).resolve().parents[2]
SITE = Path(os.environ.get("IMP_SITE_DIR", ROOT / "build" / "site"))
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
ARTIFACTS = Path(os.environ.get("IMP_TEST_ARTIFACTS", ROOT / "build" / "test-artifacts"))


@pytest.fixture(scope="module", autouse=True)
def built() -> None:
    assert (SITE / "index.html").is_file(), f"no site in {SITE}: run make docs"


def _ids(page: Path) -> set[str]:
    return set(re.findall(r'id="([^"]+)"', page.read_text(encoding="utf-8")))


def test_the_api_reference_lists_every_public_name() -> None:
    ids = _ids(SITE / "api" / "index.html")

    def listed(name: str) -> bool:
        value = getattr(imp, name)
        defined = f"{getattr(value, '__module__', '')}.{getattr(value, '__qualname__', '')}"
        return f"imp.{name}" in ids or defined in ids

    missing = [name for name in imp.__all__ if not listed(name)]
    assert not missing, f"the API reference has no entry for {missing}"


@pytest.mark.parametrize(
    ("page", "module", "names"),
    [
        ("mcp", "imp.mcp", ("connect", "MCPTools", "MCPError")),
        ("acp", "imp.acp", ("serve", "SessionContext")),
        ("ray", "imp.ray", ("evaluate", "map", "Limits")),
        ("otel", "imp.observe.otel", ("instrument_otel", "OtelSink")),
    ],
)
def test_each_extra_has_its_page(page: str, module: str, names: tuple[str, ...]) -> None:
    ids = _ids(SITE / "api" / page / "index.html")
    assert not [n for n in names if f"{module}.{n}" not in ids], sorted(i for i in ids if i.startswith(module))


def test_the_errors_page_documents_the_tree() -> None:
    ids = _ids(SITE / "errors" / "index.html")
    assert {"imp.RateLimited", "imp.ContextWindowExceeded", "imp.mcp.MCPError", "imp.ray.WorkerLost"} <= ids


@pytest.fixture(scope="module")
def served() -> Iterator[str]:
    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Quiet, directory=str(SITE)))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


def _render(url: str, profile: Path, screenshot: Path | None = None) -> str:
    if CHROMIUM is None:
        pytest.fail("headless Chromium is needed to check the site (apt-get install -y chromium, or make browser)")
    flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={profile}"]
    if screenshot is not None:
        subprocess.run(
            [CHROMIUM, *flags, "--window-size=1280,900", f"--screenshot={screenshot}", url],
            capture_output=True,
            timeout=120,
            check=True,
        )
    done = subprocess.run(
        [CHROMIUM, *flags, "--window-size=1280,900", "--virtual-time-budget=5000", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def _nav_links(dom: str) -> list[str]:
    return [
        html.unescape(t).strip() for t in re.findall(r'class="md-nav__link[^"]*"[^>]*>\s*(?:<[^>]+>\s*)*([^<]+)', dom)
    ]


@pytest.mark.parametrize(
    ("path", "title", "must_hold"),
    [
        ("", "imp", ("prediction = imp.call_sync", "billing True")),
        ("react/", "ReAct", ("imp.react(",)),
        ("api/", "API reference", ('id="imp.call_sync"', 'id="imp.Prediction"', "doc-signature")),
    ],
    ids=["home", "guide", "api"],
)
def test_a_page_renders_with_its_navigation(
    served: str, tmp_path: Path, path: str, title: str, must_hold: tuple[str, ...]
) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / f"site-{path.strip('/') or 'home'}.png"
    dom = _render(served + path, tmp_path / "profile", shot)
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    heading = re.search(r"<h1[^>]*>(.*?)</h1>", dom, re.S)
    assert heading and re.sub(r"<[^>]+>", "", heading.group(1)).strip().startswith(title), heading
    links = _nav_links(dom)
    for section in ("Home", "Guides", "API reference", "Signatures", "ReAct", "Errors", "How imp is built"):
        assert section in links, f"the navigation lacks {section!r}: {links}"
    for text in must_hold:
        assert text in html.unescape(re.sub(r"<[^>]+>", "", dom)) or text in dom, f"{path or 'home'} lacks {text!r}"
    assert "md-search" in dom  # material's search box, put there by its JavaScript bundle too
