"""Every page escapes everything: hostile text in every field of a run, a prediction and an evaluation.

Each page (`imp.trace_html` from events and from a prediction, `python -m imp.trace` from a JSON
Lines file, `EvaluationReport.save_html` and its run pages) is fed text that breaks out of an
element, an attribute or a script, in labels, names, ids, thoughts, arguments, results and errors.
The parsed page must hold only the elements and attributes imp writes; in headless Chromium no
injected script may run, with the page's CSP and without it (the escaping alone), while a control
page with a raw injection shows the check can see a script run and that the CSP stops it.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import anyio
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_browser import CHROMIUM, REQUIRED, _chromium

import imp
from imp.observe.report_html import render_report
from imp.observe.trace_html import render_trace
from imp.trace import main as trace_main

PAYLOADS = [
    "<img src=x onerror=\"document.title='PWNED'\">",
    "'><img src=x onerror=document.title='PWNED'>",
    "\"><svg onload=document.title='PWNED'>",
    "</script><script>document.title='PWNED'</script>",
    "</pre></details></div><script>document.title='PWNED'</script>",
    "<a href='javascript:document.title=1'>click</a>",
    "' onmouseover='document.title=\"PWNED\"' x='",
    "<iframe srcdoc=\"<script>parent.document.title='PWNED'</script>\"></iframe>",
    "<meta http-equiv='refresh' content='0;url=javascript:document.title=1'>",
    "<base href='javascript:/'><form action='javascript:1'><button>x</button></form>",
    "&lt;script&gt;document.title='PWNED'&lt;/script&gt;",
]
HOSTILE = " ".join(PAYLOADS)

# What imp's pages are made of: any other element, or an on* / javascript: attribute, came from a value.
TAGS = {
    "html", "head", "meta", "title", "style", "body", "script", "header", "main", "h1", "h2", "div", "span",
    "b", "i", "pre", "details", "summary", "input", "button", "table", "thead", "tbody", "tr", "th", "td",
    "ul", "li", "a",
}  # fmt: skip
ATTRIBUTES = {
    "charset", "name", "content", "http-equiv", "lang", "id", "class", "style", "title", "data-call", "data-kind",
    "data-step", "data-search", "data-index", "open", "type", "placeholder", "href",
}  # fmt: skip


class _Shape(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.attributes: list[tuple[str, str | None]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attributes += attrs


def assert_only_imps_markup(page: str) -> None:
    shape = _Shape()
    shape.feed(page)
    assert set(shape.tags) <= TAGS, set(shape.tags) - TAGS
    assert shape.tags.count("script") == 1 and shape.tags.count("meta") == 3
    names = {name for name, _ in shape.attributes}
    assert names <= ATTRIBUTES, names - ATTRIBUTES
    for name, value in shape.attributes:
        if name == "href":
            assert value is not None and value.startswith("./") and ":" not in value, value
        if name == "http-equiv":
            assert value in ("Content-Security-Policy",)


def hostile_events(text: str) -> list[dict[str, Any]]:
    """A run's events with `text` in every field a page shows (and in the numbers' places too)."""
    base = {"call_id": text, "parent_id": None}
    child = {"call_id": text + "2", "parent_id": text}
    return [
        {**base, "seq": 1, "kind": "run_started", "at": 100.0, "program": text},
        {**base, "seq": 2, "kind": "model_request", "at": 100.1, "model": f"{text}:{text}", "forced": text},
        {**base, "seq": 3, "kind": "model_retry", "at": 100.2, "attempt": text, "status": text, "error": text, "wait": text},
        {**base, "seq": 4, "kind": "model_response", "at": 100.3, "usage": {"input_tokens": text, "output_tokens": 3},
         "duration": text, "finish_reason": text, "tool_calls": [text, text]},
        {**base, "seq": 5, "kind": "model_content", "at": 100.3,
         "messages": [{"role": text, "content": text}], "reply": {"text": text, text: [text]}},
        {**base, "seq": 6, "kind": "reasoning", "at": 100.31, "text": text},
        {**base, "seq": 7, "kind": "context_projected", "at": 100.32, text: text, "omitted_steps": text},
        {**base, "seq": 8, "kind": "tool_call", "at": 100.4, "tool_name": text, "tool_call_id": text,
         "arguments": {text: text, "nested": [{text: text}]}},
        {**base, "seq": 9, "kind": "tool_result", "at": 100.5, "tool_call_id": text, "output": {text: text},
         "outcome": text, "duration": text, "error": text},
        {**child, "seq": 10, "kind": "run_started", "at": 100.6, "program": text},
        {**child, "seq": 11, "kind": "model_request", "at": 100.6, "model": text},
        {**child, "seq": 12, "kind": "model_error", "at": 100.7, "error": text, "duration": text},
        {**base, "seq": 13, "kind": text, "at": 100.8, text: text},
        {**base, "seq": 14, "kind": "run_finished", "at": 101.0, "termination_reason": text,
         "termination_cause": text, "complete": text},
        {**base, "seq": 15, "kind": "run_failed", "at": 101.1, "error": text},
    ]  # fmt: skip


def echo(text: str) -> str:
    """Say the text back."""
    return text


def boom(text: str) -> str:
    """Fail with the text."""
    raise RuntimeError(text)


def hostile_prediction(text: str) -> imp.Prediction:
    lm = imp.ScriptedLM(
        [
            {
                "next_thought": text,
                "tool_calls": [
                    {"name": "echo", "arguments": {"text": text}},
                    {"name": "boom", "arguments": {"text": text}},
                ],
            },
            {"answer": text},
        ]
    )
    agent = imp.react("question -> answer", [imp.tool(echo), imp.tool(boom)], lm=lm)
    return imp.call_sync(agent, question=text)


def hostile_report(text: str) -> imp.EvaluationReport:
    def answer(messages: list[dict[str, Any]], options: dict[str, Any]) -> dict[str, Any]:
        if "fail" in messages[-1]["content"]:
            raise RuntimeError(text)
        return {"answer": text}

    def metric(example: imp.Example, prediction: imp.Prediction) -> imp.Score:
        return imp.Score(0.5, feedback=text)

    qa = imp.predict("question -> answer", lm=imp.StaticLM(answer))
    devset = [
        imp.Example(question=q, answer=text).with_inputs("question") for q in (text, f"fail {text}", f"{text} ok")
    ]

    async def run() -> imp.EvaluationReport:
        return await imp.evaluate(qa, devset, metric, progress=False)

    return anyio.run(run)


def pages(folder: Path, text: str) -> list[Path]:
    """Every page imp writes, each fed `text` everywhere."""
    events = hostile_events(text)
    made = [imp.trace_html(events, folder / "events.html")]
    lines = folder / "run.jsonl"
    lines.write_text("\n".join(json.dumps(e) for e in events), encoding="utf-8")
    assert trace_main([str(lines), "-o", str(folder / "cli.html")]) == 0
    made.append(folder / "cli.html")
    made.append(imp.trace_html(hostile_prediction(text), folder / "prediction.html"))
    report = hostile_report(text).save_html(folder / "report.html")
    made += [report, *sorted((folder / "report.runs").glob("*.html"))]
    return made


def test_every_page_holds_only_imps_markup_whatever_the_values(tmp_path: Path) -> None:
    made = pages(tmp_path, HOSTILE)
    assert len(made) >= 6
    for path in made:
        page = path.read_text(encoding="utf-8")
        assert_only_imps_markup(page)
        assert "PWNED" in page  # the text is shown, as text
        assert "'unsafe-inline'; " not in page.split("script-src", 1)[1].split(";", 1)[0]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(alphabet=st.sampled_from(list("<>'\"&=/ ;:!-`abcjavascriptonerror\\\n")) | st.characters(), max_size=40))
def test_any_text_in_any_field_stays_text(text: str) -> None:
    assert_only_imps_markup(render_trace(hostile_events(text)))


def test_a_report_link_is_always_a_relative_path(tmp_path: Path) -> None:
    folder = tmp_path / "javascript:document.title=1"
    folder.mkdir()
    report = hostile_report("x").save_html(folder / "javascript:alert(1).html")
    links = re.findall(r"href='([^']*)'", report.read_text(encoding="utf-8"))
    assert links and all(link.startswith("./javascript:alert(1).runs/") for link in links)
    assert_only_imps_markup(render_report(hostile_report("x"), {0: "./x.html"}))


# --- in a real browser ------------------------------------------------------------------------------------

browser = pytest.mark.skipif(
    CHROMIUM is None and not REQUIRED, reason="headless Chromium is not installed (apt-get install -y chromium)"
)


def _title_after_load(path: Path, profile: Path) -> str:
    dom = _chromium("--virtual-time-budget=2000", "--dump-dom", path.as_uri(), profile=profile).stdout
    found = re.search(r"<title>(.*?)</title>", dom, re.S)
    assert found is not None, dom[:500]
    return found.group(1)


@browser
def test_no_injected_script_runs_in_chromium_with_the_csp_or_without_it(tmp_path: Path) -> None:
    made = pages(tmp_path, HOSTILE)
    bare = tmp_path / "bare"
    bare.mkdir()
    for number, path in enumerate(made):
        page = path.read_text(encoding="utf-8")
        title = _title_after_load(path, tmp_path / f"p{number}")
        assert title not in ("PWNED", "1") and title.startswith(("imp ", "row ")), (path.name, title)
        # Without the CSP, the escaping alone keeps the text text.
        stripped = bare / path.name
        stripped.write_text(re.sub(r"<meta http-equiv='Content-Security-Policy'[^>]*>", "", page), encoding="utf-8")
        title = _title_after_load(stripped, tmp_path / f"q{number}")
        assert title not in ("PWNED", "1") and title.startswith(("imp ", "row ")), (path.name, title)


@browser
def test_the_check_sees_a_script_run_and_the_csp_stops_one(tmp_path: Path) -> None:
    page = render_trace(hostile_events("plain"))
    injected = page.replace("<body>", "<body><img src=x onerror=\"document.title='PWNED'\">", 1)
    with_csp = tmp_path / "with.html"
    with_csp.write_text(injected, encoding="utf-8")
    without = tmp_path / "without.html"
    without.write_text(re.sub(r"<meta http-equiv='Content-Security-Policy'[^>]*>", "", injected), encoding="utf-8")
    assert _title_after_load(with_csp, tmp_path / "a").startswith("imp run")  # the CSP stops an injected handler
    assert _title_after_load(without, tmp_path / "b") == "PWNED"  # and the check would have seen it run
