"""`imp.trace_html`: one run as one self-contained HTML page (timeline, steps, tokens, the reason)."""

from __future__ import annotations

from pathlib import Path

from imp.observe._page import esc, number, page, pretty
from imp.observe.picture import Bar, Picture, Source, Step, picture_of

__all__ = ["render_trace", "trace_html"]

OPEN_STEPS = 12
"""Runs with more steps than this show the first and last few open and the rest collapsed."""
_LANE = 22


def trace_html(source: Source, path: str | Path) -> Path:
    """Write a run (its events, or a prediction) as one self-contained HTML file; returns the path.

    From events (`imp.call(..., on_event=events.append)`, an `imp.observe.Recorder`, or `Event.dump()`
    dicts read back from a JSON Lines file) the page has a timeline; a prediction has no timings, so its page shows the
    steps of its history, the outputs and the totals. Everything shown is redacted.
    """
    target = Path(path)
    target.write_text(render_trace(source), encoding="utf-8")
    return target


def render_trace(source: Source, *, title: str | None = None) -> str:
    """The HTML page of a run, as text."""
    picture = picture_of(source)
    name = title or (f"imp run: {picture.program}" if picture.program else "imp run")
    body = [f"<header><h1>{esc(name)}</h1>{_summary(picture)}</header><main>"]
    body.append(_timeline(picture))
    if picture.outputs:
        body.append(f"<h2>Outputs</h2><div class='card' id='outputs'>{pretty(picture.outputs)}</div>")
    body.append(_steps(picture))
    body.append("</main>")
    return page(name, "".join(body))


def _seconds(value: float | None) -> str:
    if value is None or isinstance(value, bool) or not isinstance(value, int | float):
        return "-"
    return f"{value * 1000:.0f} ms" if value < 1 else f"{value:.2f} s"


def _summary(picture: Picture) -> str:
    bad = picture.complete is False or picture.error is not None
    reason = esc(picture.reason or "unknown")
    cause = f" <span class='meta'>cause: <span id='cause'>{esc(picture.cause)}</span></span>" if picture.cause else ""
    error = f"<div class='error' id='run-error'>{esc(picture.error)}</div>" if picture.error else ""
    totals = [
        ("duration", _seconds(picture.duration)),
        ("LM requests", str(int(picture.requests))),
        ("tokens in", str(int(picture.input_tokens))),
        ("tokens out", str(int(picture.output_tokens))),
        ("tool calls", str(int(picture.tool_calls))),
        ("retries", str(int(picture.retries))),
        ("projections", str(int(picture.projections))),
    ]
    cells = "".join(f"<div class='total'><span class='meta'>{k}</span><b>{esc(v)}</b></div>" for k, v in totals)
    complete = "" if picture.complete is None else (" (complete)" if picture.complete else " (incomplete)")
    return (
        f"<div>Termination: <span id='reason' class='reason{' bad' if bad else ''}'>{reason}</span>"
        f"{esc(complete)}{cause}</div>{error}<div class='totals' id='totals'>{cells}</div>"
    )


def _timeline(picture: Picture) -> str:
    if not picture.bars:
        return (
            "<h2>Timeline</h2><div id='timeline' class='card meta'>No timings: a prediction does not keep them. "
            "Record the run's events (on_event=events.append) and draw those for a timeline.</div>"
        )
    span = max(max(number(b.end) for b in picture.bars), number(picture.duration)) or 1e-9
    tracks: dict[str, list[Bar]] = {}
    for bar in picture.bars:
        tracks.setdefault(bar.call_id, []).append(bar)
    rows = []
    for call_id, bars in tracks.items():
        height = (max(int(b.lane) for b in bars) + 1) * _LANE
        label = f"{esc(picture.calls.get(call_id, 'call'))} <span class='meta'>{esc(call_id)}</span>"
        rows.append(
            f"<div class='track' data-call='{esc(call_id)}'><div class='track-label'>{label}</div>"
            f"<div class='lanes' style='height:{height}px'>{''.join(_bar(b, span) for b in bars)}</div></div>"
        )
    ticks = "".join(f"<span class='tick' style='left:{i * 25}%'>{esc(_seconds(span * i / 4))}</span>" for i in range(5))
    legend = (
        "<div class='legend'><span><i class='swatch' style='background:var(--lm)'></i>LM request</span>"
        "<span><i class='swatch' style='background:var(--tool)'></i>tool call</span>"
        "<span><i class='swatch' style='background:var(--err)'></i>error</span>"
        "<span><i class='swatch' style='border:2px dashed #f0b429'></i>retried</span></div>"
    )
    axis = f"<div class='track axis-row'><div class='track-label'></div><div class='axis'>{ticks}</div></div>"
    return f"<h2>Timeline</h2>{legend}<div id='timeline'>{''.join(rows)}{axis}</div>"


def _bar(bar: Bar, span: float) -> str:
    left = 100 * number(bar.start) / span
    width = max(100 * (number(bar.end) - number(bar.start)) / span, 0.2)
    classes = f"bar {esc(bar.kind)}{' error' if bar.error else ''}{' retried' if bar.retries else ''}"
    tip = f"{bar.label}: {_seconds(bar.end - bar.start)}"
    if bar.retries:
        tip += f", {int(bar.retries)} retr{'y' if bar.retries == 1 else 'ies'}"
    if bar.error:
        tip += f", error: {bar.error}"
    step = f" data-step='{int(bar.step)}'" if bar.step is not None else ""
    return (
        f"<div class='{classes}' data-kind='{esc(bar.kind)}'{step} title='{esc(tip)}' "
        f"style='left:{left:.3f}%;width:{width:.3f}%;top:{int(bar.lane) * _LANE}px'>{esc(bar.label)}</div>"
    )


def _steps(picture: Picture) -> str:
    steps = picture.steps
    head = (
        f"<h2>Steps ({len(steps)})</h2><div class='controls'><input id='search' type='search' "
        "placeholder='Search steps: a tool, an argument, a word of a thought'>"
        "<button id='expand'>Expand all</button><button id='collapse'>Collapse all</button>"
        "<span id='shown' class='meta'></span></div>"
    )
    many = len(steps) > OPEN_STEPS
    items = []
    for i, step in enumerate(steps):
        opened = not many or i < 3 or i >= len(steps) - 3
        items.append(_step(step, picture, opened))
    return head + f"<div id='steps'>{''.join(items)}</div>"


def _step(step: Step, picture: Picture, opened: bool) -> str:
    marks = ""
    if step.retries:
        marks += f"<span class='mark retry'>{len(step.retries)} retr{'y' if len(step.retries) == 1 else 'ies'}</span>"
    if step.projection:
        marks += "<span class='mark projection'>context projected</span>"
    if step.error or any(t.error for t in step.tools):
        marks += "<span class='mark fail'>error</span>"
    if step.forced:
        marks += "<span class='mark'>forced</span>"
    caller = picture.calls.get(step.call_id)
    where = f" · {esc(caller)} {esc(step.call_id)}" if caller and len(picture.calls) > 1 else ""
    facts = [step.model, f"{int(step.input_tokens)} in / {int(step.output_tokens)} out"] if step.model else []
    if step.duration is not None:
        facts.append(_seconds(step.duration))
    if step.finish_reason:
        facts.append(str(step.finish_reason))
    summary = f"<summary><b>Step {int(step.number)}</b>{where} <span class='meta'>{esc(' · '.join(facts))}</span>{marks}</summary>"
    body = []
    if step.thought:
        body.append(f"<div class='thought'><span class='meta'>thought</span>{pretty(step.thought)}</div>")
    for text in step.retries:
        body.append(f"<div class='retry-note meta'>retry: {esc(text)}</div>")
    if step.projection:
        body.append(f"<div class='projection-note meta'>context projected: {esc(step.projection)}</div>")
    for message in step.messages:
        role = esc(message.get("role", "?"))  # escaped like every recorded value
        body.append(
            f"<div class='message'><span class='meta'>{role} message</span>{pretty(message.get('content', ''))}</div>"
        )
    if step.reply is not None:
        body.append(f"<div class='reply'><span class='meta'>reply</span>{pretty(step.reply)}</div>")
    if step.error:
        body.append(f"<div class='error'>request failed: {esc(step.error)}</div>")
    elif step.asked is not None:
        asked = ", ".join(step.asked) if step.asked else "no tool calls"
        body.append(f"<div class='meta asked'>the model asked for: {esc(asked)}</div>")
    for tool in step.tools:
        outcome = f" <span class='meta'>{esc(tool.outcome or '')} · {esc(_seconds(tool.duration))}</span>"
        result = (
            f"<div class='error'>{esc(tool.error)}</div>"
            if tool.error
            else pretty(tool.output if tool.output is not None else "")
        )
        body.append(
            f"<div class='tool-call{' failed' if tool.error else ''}'><b>{esc(tool.name)}</b>"
            f" <span class='meta'>{esc(tool.call_id)}</span>{outcome}"
            f"<div class='meta'>arguments</div>{pretty(tool.arguments if tool.arguments is not None else {})}"
            f"<div class='meta'>result</div>{result}</div>"
        )
    if step.fields is not None:
        body.append(pretty(step.fields))
    classes = "step failed" if step.error or any(t.error for t in step.tools) else "step"
    return (
        f"<details class='{classes}' id='step-{int(step.number)}' data-search{' open' if opened else ''}>"
        f"{summary}<div class='step-body'>{''.join(body)}</div></details>"
    )
