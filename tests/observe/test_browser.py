"""A recorded run's page in a real browser: headless Chromium lays it out, and the DOM is checked.

Needs Debian's `chromium` package (`.ci/run` installs it); skipped, saying so, where it is absent.
The screenshot is kept in `IMP_TEST_ARTIFACTS` (default `build/test-artifacts/`).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from test_trace_html import recorded_run

import imp

CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
REQUIRED = os.environ.get("IMP_REQUIRE_BROWSER") == "1"
"""Set by `.ci/run`: there a missing browser fails the test instead of skipping it."""
pytestmark = pytest.mark.skipif(
    CHROMIUM is None and not REQUIRED,
    reason="headless Chromium is not installed (apt-get install -y chromium, or make browser; .ci/run does)",
)
ARTIFACTS = Path(os.environ.get("IMP_TEST_ARTIFACTS", Path(__file__).resolve().parents[2] / "build" / "test-artifacts"))

# Measures the laid-out page and tries the search box, then writes what it found into the DOM.
_PROBE = """
<script>
(function () {
  function box(el) { var r = el.getBoundingClientRect(); return {x: r.left, y: r.top, w: r.width, h: r.height}; }
  var bars = Array.prototype.map.call(document.querySelectorAll('#timeline .bar'), function (b) {
    return {kind: b.getAttribute('data-kind'), label: b.textContent, error: b.classList.contains('error'),
            color: getComputedStyle(b).backgroundColor, box: box(b)};
  });
  var steps = document.querySelectorAll('details.step');
  var search = document.getElementById('search');
  search.value = 'sunny in rome';
  search.dispatchEvent(new Event('input'));
  var visible = Array.prototype.filter.call(steps, function (s) { return s.offsetParent !== null; }).length;
  search.value = '';
  search.dispatchEvent(new Event('input'));
  var out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify({
    bars: bars, steps: steps.length, open: document.querySelectorAll('details.step[open]').length,
    visibleAfterSearch: visible, reason: document.getElementById('reason').textContent,
    reasonShown: document.getElementById('reason').offsetParent !== null,
    timeline: box(document.getElementById('timeline')), title: document.title
  });
  document.body.appendChild(out);
})();
</script>
"""


def with_probe(page: str, probe: str) -> str:
    """The page with a probe script added, and the probe's hash added to the page's CSP so it may run."""
    body = probe.strip().removeprefix("<script>").removesuffix("</script>")
    digest = base64.b64encode(hashlib.sha256(body.encode("utf-8")).digest()).decode("ascii")
    page = page.replace("script-src ", f"script-src 'sha256-{digest}' ", 1)
    return page.replace("</body>", f"<script>{body}</script></body>")


def _chromium(*args: str, profile: Path) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None, "IMP_REQUIRE_BROWSER=1 but no chromium on PATH: run make browser"
    flags = ["--headless=new", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", f"--user-data-dir={profile}"]
    return subprocess.run([CHROMIUM, *flags, *args], capture_output=True, text=True, timeout=120, check=True)


def test_a_recorded_run_renders_in_headless_chromium(tmp_path: Path) -> None:
    _, recorder = recorded_run()
    page = imp.trace_html(recorder, tmp_path / "run.html")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "trace_html.png"
    _chromium("--window-size=1200,1000", f"--screenshot={shot}", page.as_uri(), profile=tmp_path / "p1")
    assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000

    probed = tmp_path / "probed.html"
    probed.write_text(with_probe(page.read_text(encoding="utf-8"), _PROBE), encoding="utf-8")
    dom = _chromium("--virtual-time-budget=3000", "--dump-dom", probed.as_uri(), profile=tmp_path / "p2").stdout
    found = re.search(r"<pre id=\"probe\">(.*?)</pre>", dom, re.S)
    assert found is not None, dom[-2000:]
    data = json.loads(
        found.group(1).replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")
    )

    assert data["title"] == "imp run: ReAct" and data["reason"] == "answered" and data["reasonShown"]
    assert data["steps"] == 3 and data["open"] == 3
    assert data["visibleAfterSearch"] == 1  # the search box keeps only the step that has it
    bars = data["bars"]
    assert [b["kind"] for b in bars].count("lm") == 3 and [b["kind"] for b in bars].count("tool") == 3
    timeline = data["timeline"]
    for bar in bars:  # every bar is drawn, inside the timeline
        assert bar["box"]["w"] >= 2 and bar["box"]["h"] > 10
        assert (
            timeline["x"] <= bar["box"]["x"] and bar["box"]["x"] + bar["box"]["w"] <= timeline["x"] + timeline["w"] + 1
        )
    oslo, rome = (b["box"] for b in bars if b["label"] == "slow_lookup")
    assert oslo["y"] != rome["y"]  # concurrent calls side by side, one lane each ...
    assert oslo["x"] < rome["x"] + rome["w"] and rome["x"] < oslo["x"] + oslo["w"]  # ... over the same time
    (failed,) = [b for b in bars if b["error"]]
    assert failed["label"] == "broken" and failed["color"] == "rgb(208, 49, 45)"  # errors in red
    lm_bars = sorted((b["box"] for b in bars if b["kind"] == "lm"), key=lambda b: b["x"])
    assert lm_bars[0]["x"] < oslo["x"] < lm_bars[1]["x"]  # the time axis runs left to right


_REPORT_PROBE = """
<script>
(function () {
  var fills = Array.prototype.map.call(document.querySelectorAll('#distribution .fill'), function (f) {
    return f.getBoundingClientRect().height;
  });
  var rows = Array.prototype.map.call(document.querySelectorAll('#rows tbody tr'), function (r) {
    return {index: r.getAttribute('data-index'), failed: r.classList.contains('failed'),
            link: (r.querySelector('a') || {}).href || null};
  });
  var out = document.createElement('pre');
  out.id = 'probe';
  out.textContent = JSON.stringify({fills: fills, rows: rows, score: document.getElementById('score').textContent});
  document.body.appendChild(out);
})();
</script>
"""


def test_an_evaluation_page_renders_in_headless_chromium(tmp_path: Path) -> None:
    from test_report_html import _report

    page = _report().save_html(tmp_path / "eval.html")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    _chromium(
        "--window-size=1200,800",
        f"--screenshot={ARTIFACTS / 'report_html.png'}",
        page.as_uri(),
        profile=tmp_path / "p1",
    )
    probed = tmp_path / "probed.html"
    probed.write_text(with_probe(page.read_text(encoding="utf-8"), _REPORT_PROBE), encoding="utf-8")
    dom = _chromium("--virtual-time-budget=3000", "--dump-dom", probed.as_uri(), profile=tmp_path / "p2").stdout
    found = re.search(r"<pre id=\"probe\">(.*?)</pre>", dom, re.S)
    assert found is not None, dom[-2000:]
    data = json.loads(found.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert data["score"] == "0.600"
    fills = data["fills"]
    assert len(fills) == 10 and fills[9] > fills[0] > 2 and fills[5] <= 1.5  # 3 passes, 2 zeros, nothing between
    assert [r["index"] for r in data["rows"]] == ["3", "2", "0", "1", "4"] and data["rows"][0]["failed"]
    for row in data["rows"][1:]:  # each linked run page exists where the link points
        assert row["link"].startswith("file://") and Path(row["link"][len("file://") :]).is_file()
