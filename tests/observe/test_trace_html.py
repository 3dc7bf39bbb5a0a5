"""`imp.trace_html` and `python -m imp.trace`: a run as one self-contained, redacted HTML page."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

import imp
from imp.observe import Recorder
from imp.observe.picture import picture_of
from imp.observe.trace_html import OPEN_STEPS, render_trace

SECRET = "sk-test-abcdefghijklmnopqrstuvwx0123456789"


async def slow_lookup(city: str) -> str:
    """The weather in a city."""
    await anyio.sleep(0.05)
    return f"sunny in {city}"


def broken(city: str) -> str:
    """A tool that fails."""
    raise RuntimeError(f"the weather service is down (key {SECRET})")


def recorded_run(*, content: bool = False) -> tuple[imp.Prediction, Recorder]:
    """A react run with two concurrent tool calls, a failing one, and a secret in the question."""
    lm = imp.ScriptedLM(
        [
            {
                "next_thought": "Ask for both cities at once.",
                "tool_calls": [
                    {"name": "slow_lookup", "arguments": {"city": "Oslo"}},
                    {"name": "slow_lookup", "arguments": {"city": "Rome"}},
                ],
            },
            {"next_thought": "Try the broken one.", "tool_calls": [{"name": "broken", "arguments": {"city": "Oslo"}}]},
            {"answer": "sunny in both"},
        ]
    )
    agent = imp.react("question -> answer", [imp.tool(slow_lookup), imp.tool(broken)], lm=lm)
    recorder = Recorder(content=content)
    prediction = imp.call_sync(agent, question=f"weather? api_key={SECRET}", on_event=recorder)
    return prediction, recorder


def test_the_picture_of_a_run_has_its_bars_steps_and_totals() -> None:
    prediction, recorder = recorded_run()
    picture = picture_of(recorder.events)
    assert picture.program == "ReAct" and picture.reason == prediction.metadata.termination_reason == "answered"
    assert picture.complete is True
    lm_bars = [b for b in picture.bars if b.kind == "lm"]
    tool_bars = [b for b in picture.bars if b.kind == "tool"]
    assert len(lm_bars) == picture.requests == 3 and len(tool_bars) == picture.tool_calls == 3
    oslo, rome = tool_bars[:2]
    assert oslo.start < rome.end and rome.start < oslo.end  # they ran at once ...
    assert {oslo.lane, rome.lane} == {0, 1}  # ... so they sit side by side
    assert tool_bars[2].label == "broken" and tool_bars[2].error is not None
    assert [s.thought for s in picture.steps[:2]] == ["Ask for both cities at once.", "Try the broken one."]
    assert [t.arguments for t in picture.steps[0].tools] == [{"city": "Oslo"}, {"city": "Rome"}]
    assert picture.steps[0].tools[0].output == "sunny in Oslo"
    assert picture.duration is not None and picture.duration >= 0.05


def _text_of(page: str) -> str:
    return re.sub(r"<[^>]+>", " ", page)


def test_the_page_is_self_contained_and_redacted(tmp_path: Path) -> None:
    _, recorder = recorded_run(content=True)
    path = imp.trace_html(recorder, tmp_path / "run.html")
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!DOCTYPE html>")
    assert not re.search(r"(src|href)\s*=\s*['\"]?(https?:)?//", page)  # nothing fetched
    assert "<link" not in page and "@import" not in page
    assert SECRET not in page and "[REDACTED]" in page
    assert "id='reason'" in page and ">answered<" in page
    assert page.count("class='bar lm") == 3 and page.count("class='bar tool") == 3
    assert page.count("class='bar tool error") == 1  # the failed tool call is red
    assert page.count("<details class='step") == 3
    assert "Ask for both cities at once." in page and "sunny in Oslo" in page
    assert "user message" in page and "weather?" in _text_of(page)  # messages, recorded with content=True
    assert "id='search'" in page


def test_retries_and_projections_are_marked() -> None:
    at = 1_000.0
    events: list[dict[str, Any]] = [
        {"seq": 1, "call_id": "call-1", "parent_id": None, "kind": "run_started", "at": at, "program": "ReAct"},
        {"seq": 2, "call_id": "call-1", "parent_id": None, "kind": "model_request", "at": at + 0.1, "model": "openai:gpt-4o"},
        {"seq": 3, "call_id": "call-1", "parent_id": None, "kind": "model_retry", "at": at + 0.2, "attempt": 1,
         "status": 429, "error": "slow down", "wait": 0.5},
        {"seq": 4, "call_id": "call-1", "parent_id": None, "kind": "model_error", "at": at + 0.8,
         "model": "openai:gpt-4o", "status": 400, "error": "context window exceeded", "duration": 0.7},
        {"seq": 5, "call_id": "call-1", "parent_id": None, "kind": "context_projected", "at": at + 0.81,
         "omitted_steps": 3, "recovery_requests": 1},
        {"seq": 6, "call_id": "call-1", "parent_id": None, "kind": "run_finished", "at": at + 1.0,
         "complete": False, "termination_reason": "max_iters", "termination_cause": "context_window_exceeded"},
    ]  # fmt: skip
    page = render_trace(events)
    assert "1 retry" in page and "class='bar lm error retried'" in page
    assert "context projected" in page and "omitted_steps" in page
    assert "class='reason bad'" in page and ">max_iters<" in page and ">context_window_exceeded<" in page
    assert "context window exceeded" in page


def test_a_long_run_stays_usable() -> None:
    events: list[dict[str, Any]] = [{"call_id": "c", "kind": "run_started", "at": 0.0, "program": "ReAct"}]
    for i in range(300):
        t = 1.0 + i
        events += [
            {"call_id": "c", "kind": "model_request", "at": t, "model": "scripted:m"},
            {
                "call_id": "c",
                "kind": "model_response",
                "at": t + 0.1,
                "model": "scripted:m",
                "usage": {"input_tokens": 10, "output_tokens": 2},
                "duration": 0.1,
            },
            {"call_id": "c", "kind": "tool_call", "at": t + 0.2, "tool_call_id": f"t{i}", "tool_name": f"tool{i}"},
            {"call_id": "c", "kind": "tool_result", "at": t + 0.3, "tool_call_id": f"t{i}", "output": i},
        ]
    page = render_trace(events)
    steps = re.findall(r"<details class='step'[^>]*>", page)
    assert len(steps) == 300 > OPEN_STEPS
    assert sum(" open" in s for s in steps) == 6  # the first and last three; the rest collapsed
    assert "id='search'" in page and "id='expand'" in page and "data-search" in page
    picture = picture_of(events)
    assert (picture.input_tokens, picture.output_tokens, picture.requests) == (3000, 600, 300)
    assert "<b>3000</b>" in page and "<b>600</b>" in page and "10 in / 2 out" in page


def test_a_prediction_draws_its_history_without_a_timeline(tmp_path: Path) -> None:
    prediction, _ = recorded_run()
    page = imp.trace_html(prediction, tmp_path / "p.html").read_text(encoding="utf-8")
    assert "No timings" in page and ">answered<" in page and "sunny in both" in page
    assert "Ask for both cities at once." in page and SECRET not in page and "]]" not in _text_of(page)
    picture = picture_of(prediction)
    assert [len(s.tools) for s in picture.steps] == [2, 1, 0] and picture.tool_calls == 3
    assert (
        picture.steps[0].tools[1].arguments == {"city": "Rome"} and picture.steps[0].tools[1].output == "sunny in Rome"
    )
    assert picture.steps[1].tools[0].outcome == "unknown" and "weather service is down" in str(
        picture.steps[1].tools[0].error
    )
    assert page.count("class='tool-call failed'") == 1 and picture.requests == 3


def test_bad_sources_get_clear_errors() -> None:
    with pytest.raises(ValueError, match="no events"):
        render_trace([])
    with pytest.raises(TypeError, match=r"imp.Prediction or a list of events"):
        render_trace("events.jsonl")  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="kind"):
        render_trace([{"at": 1.0}])


def test_the_command_draws_a_jsonl_file(tmp_path: Path) -> None:
    _, recorder = recorded_run()
    events = recorder.save(tmp_path / "events.jsonl")
    lines = events.read_text().splitlines()
    assert len(lines) == len(recorder.events) and json.loads(lines[0])["kind"] == "run_started"
    raw = tmp_path / "raw.jsonl"  # a file written by hand, secret and all: the page still hides it
    raw.write_text(events.read_text().replace("weather?", f"weather? {SECRET}") + "\n")
    done = subprocess.run([sys.executable, "-m", "imp.trace", str(raw)], capture_output=True, text=True, check=True)
    page = (tmp_path / "raw.html").read_text(encoding="utf-8")
    assert done.stdout.strip() == str(tmp_path / "raw.html")
    assert ">answered<" in page and SECRET not in page
    out = tmp_path / "x.html"
    subprocess.run([sys.executable, "-m", "imp.trace", str(events), "-o", str(out)], check=True, capture_output=True)
    assert out.read_text(encoding="utf-8").count("class='bar tool") == 3
    bad = tmp_path / "bad.jsonl"
    bad.write_text("not json\n")
    failed = subprocess.run([sys.executable, "-m", "imp.trace", str(bad)], capture_output=True, text=True)
    assert failed.returncode == 1 and "bad.jsonl:1 is not a JSON event line" in failed.stderr
