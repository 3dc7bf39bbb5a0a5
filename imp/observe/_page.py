"""The shared frame of imp's HTML pages: one self-contained file, inline style and script, no network.

A page shows what models, tools and servers wrote, so everything in it is escaped (`esc` and
`pretty`, attributes too), and its Content-Security-Policy runs only the page's own script, named by its SHA-256: an
injected `<script>` or `onerror=` handler would not run even if a value slipped past the escaping.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json

from imp._redact import redact, redact_text

__all__ = ["CSP", "esc", "number", "page", "pretty"]

_STYLE = """
:root { --fg:#1d2433; --muted:#5b6475; --line:#d9dee7; --lm:#3b6fd8; --tool:#1f9d74; --err:#d0312d;
        --bg:#fafbfc; --card:#fff; font-family: system-ui, -apple-system, "Segoe UI", sans-serif; }
body { margin: 0; background: var(--bg); color: var(--fg); font-size: 14px; }
header, main { max-width: 1200px; margin: 0 auto; padding: 12px 20px; }
h1 { font-size: 20px; margin: 8px 0; } h2 { font-size: 16px; margin: 18px 0 8px; }
.totals { display: flex; flex-wrap: wrap; gap: 8px; margin: 8px 0; }
.total { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 6px 10px; }
.total b { display: block; font-size: 16px; }
.reason { font-weight: 600; } .reason.bad, .error, .bar.error { color: var(--err); }
.card { background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 8px 12px; margin: 6px 0; }
#timeline { position: relative; background: var(--card); border: 1px solid var(--line); border-radius: 6px; padding: 8px; }
.track { display: flex; align-items: stretch; border-top: 1px dashed var(--line); }
.track:first-of-type { border-top: 0; }
.track-label { width: 140px; flex: none; color: var(--muted); font-size: 12px; padding: 4px; overflow: hidden; }
.lanes { position: relative; flex: 1; }
.bar { position: absolute; height: 18px; border-radius: 3px; color: #fff; font-size: 11px; line-height: 18px;
       padding: 0 4px; overflow: hidden; white-space: nowrap; box-sizing: border-box; min-width: 3px; cursor: pointer; }
.bar.lm { background: var(--lm); } .bar.tool { background: var(--tool); }
.bar.error { background: var(--err); color: #fff; outline: 2px solid #8b1512; }
.bar.retried { border: 2px dashed #f0b429; }
.axis { position: relative; flex: 1; height: 18px; color: var(--muted); font-size: 11px; margin: 0 12px 0 0; }
.axis-row { border-top: 1px solid var(--line); }
.tick { position: absolute; transform: translateX(-50%); }
.legend span { display: inline-block; margin-right: 12px; font-size: 12px; }
.swatch { display: inline-block; width: 10px; height: 10px; border-radius: 2px; margin-right: 4px; vertical-align: middle; }
details.step { background: var(--card); border: 1px solid var(--line); border-radius: 6px; margin: 6px 0; }
details.step > summary { padding: 6px 10px; cursor: pointer; }
details.step.failed { border-color: var(--err); }
.step-body { padding: 4px 12px 10px; }
.meta { color: var(--muted); font-size: 12px; }
pre { background: #f3f5f8; padding: 6px 8px; border-radius: 4px; white-space: pre-wrap; word-break: break-word;
      margin: 4px 0; font-size: 12px; max-height: 320px; overflow: auto; }
.tool-call { border-left: 3px solid var(--tool); padding-left: 8px; margin: 6px 0; }
.tool-call.failed { border-left-color: var(--err); }
.mark { display: inline-block; font-size: 11px; padding: 0 6px; border-radius: 8px; margin-left: 6px; }
.mark.retry { background: #fff3c4; color: #7a5b00; } .mark.projection { background: #e4e0ff; color: #3b2f99; }
.mark.fail { background: #fde2e1; color: var(--err); }
.controls { display: flex; gap: 8px; align-items: center; margin: 8px 0; }
#search { flex: 1; max-width: 420px; padding: 5px 8px; border: 1px solid var(--line); border-radius: 4px; }
button { padding: 4px 10px; border: 1px solid var(--line); background: var(--card); border-radius: 4px; cursor: pointer; }
table { border-collapse: collapse; width: 100%; background: var(--card); }
th, td { border-bottom: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; font-size: 13px; }
tr.failed td { background: #fff5f5; }
.hidden { display: none !important; }
.chart { display: flex; align-items: flex-end; gap: 4px; height: 120px; background: var(--card);
         border: 1px solid var(--line); border-radius: 6px; padding: 8px; }
.col { flex: 1; display: flex; flex-direction: column; align-items: center; justify-content: flex-end; height: 100%; }
.col .fill { width: 100%; background: var(--lm); border-radius: 3px 3px 0 0; min-height: 1px; }
.col span { font-size: 11px; color: var(--muted); }
"""

_SCRIPT = """
(function () {
  var search = document.getElementById('search');
  var items = Array.prototype.slice.call(document.querySelectorAll('[data-search]'));
  if (search) search.addEventListener('input', function () {
    var q = search.value.trim().toLowerCase(), shown = 0;
    items.forEach(function (el) {
      var hit = !q || el.textContent.toLowerCase().indexOf(q) >= 0;
      el.classList.toggle('hidden', !hit);
      if (hit) shown++;
      if (hit && q && el.tagName === 'DETAILS') el.open = true;
    });
    var count = document.getElementById('shown');
    if (count) count.textContent = q ? shown + ' shown' : '';
  });
  function all(open) { document.querySelectorAll('details.step').forEach(function (d) { d.open = open; }); }
  var e = document.getElementById('expand'), c = document.getElementById('collapse');
  if (e) e.addEventListener('click', function () { all(true); });
  if (c) c.addEventListener('click', function () { all(false); });
  document.querySelectorAll('.bar[data-step]').forEach(function (bar) {
    bar.addEventListener('click', function () {
      var step = document.getElementById('step-' + bar.getAttribute('data-step'));
      if (step) { step.open = true; step.scrollIntoView({block: 'center'}); }
    });
  });
})();
"""


SCRIPT_HASH = "sha256-" + base64.b64encode(hashlib.sha256(_SCRIPT.encode("utf-8")).digest()).decode("ascii")
CSP = (
    f"default-src 'none'; script-src '{SCRIPT_HASH}'; style-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'none'"
)
"""The page's policy: its own script by hash, no other script, nothing fetched, no form posted."""


def number(value: object, default: float = 0.0) -> float:
    """A number from a recorded value (a hostile file may put text where a number belongs)."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return default


def esc(value: object) -> str:
    """Text for HTML, redacted and escaped."""
    return html.escape(redact_text(value if isinstance(value, str) else str(value)))


def pretty(value: object) -> str:
    """A value as redacted, escaped, indented JSON (strings as they are) inside <pre>."""
    text = value if isinstance(value, str) else json.dumps(redact(value), indent=2, ensure_ascii=False, default=str)
    return f"<pre>{esc(text)}</pre>"


def page(title: str, body: str) -> str:
    """A whole HTML document around `body`: inline style and script, nothing fetched."""
    return (
        "<!DOCTYPE html>\n<html lang='en'><head><meta charset='utf-8'>"
        "<meta name='viewport' content='width=device-width, initial-scale=1'>"
        f"<meta http-equiv='Content-Security-Policy' content=\"{CSP}\">"
        f"<title>{esc(title)}</title><style>{_STYLE}</style></head>"
        f"<body>{body}<script>{_SCRIPT}</script></body></html>\n"
    )
