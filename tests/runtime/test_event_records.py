"""Events are typed: each of imp's kinds has its payload record, which every reader takes by type.

A run's events come out as records (never as a loose mapping), dump to JSON lines and load back as
the same records, keep their type when cut to size, and still read as the mappings they dump to.
"""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest

import imp
from imp.models._log import log_retry
from imp.observe.picture import picture_of
from imp.observe.recorder import Recorder
from imp.runtime.events import (
    MAX_EVENT_BYTES,
    PAYLOADS,
    Custom,
    EventKind,
    ModelRequest,
    ModelResponse,
    Payload,
    ToolCalled,
    ToolReturned,
    payload_of,
)
from imp.runtime.run import Event, emit, run_scope


def on_call(team: str) -> str:
    """Who is on call for a squad."""
    return {"atlas": "Maya"}.get(team, "nobody")


def big(team: str) -> str:
    """A tool whose result is far larger than an event may be."""
    return "x" * (MAX_EVENT_BYTES * 2)


async def a_run_of_every_kind() -> list[Event]:
    """A predict, a react turn (tools, a thought, a context projection, a retry, a forced last
    request), a trajectory turn, a failed and a cancelled call, recorded with the content events."""
    recorder = Recorder(content=True)
    sig = imp.signature("ticket -> team, contact")

    def reply(messages: list[Any], options: dict[str, Any]) -> Any:
        # what an HTTP client reports for an attempt it retries
        log_retry("static:static", 1, imp.LMError("busy", status=503, retryable=True), 0.1)
        return {"team": "atlas", "contact": "Maya"}

    await imp.call(imp.predict(sig, lm=imp.StaticLM(reply)), ticket="t", on_event=recorder)
    overflow = imp.LMError("maximum context length exceeded", status=400, context_window_exceeded=True)
    history = imp.History([{"ticket": "old", "team": "atlas", "contact": "Maya"}])
    script = imp.ScriptedLM(
        [
            overflow,
            {"next_thought": "Money.", "tool_calls": [{"name": "on_call", "arguments": {"team": "atlas"}}]},
            {"next_thought": "Thinking."},
            {"tool_calls": [{"name": "big", "arguments": {"team": "atlas"}}]},
            {"tool_calls": [{"name": "submit", "arguments": {"team": "atlas", "contact": "Maya"}}]},
        ]
    )
    agent = imp.react(sig, [on_call, big], lm=script, finish="submit", max_iters=3)
    await imp.call(agent, ticket="charged twice", history=history, on_event=recorder)
    trajectory = imp.react_trajectory(
        "question -> answer",
        [on_call],
        lm=imp.ScriptedLM(
            [
                {"next_thought": "look", "next_tool_name": "on_call", "next_tool_args": {"team": "atlas"}},
                {"next_thought": "done", "next_tool_name": "finish", "next_tool_args": {}},
                {"reasoning": "r", "answer": "Maya"},
            ]
        ),
    )
    await imp.call(trajectory, question="who?", on_event=recorder)
    with pytest.raises(imp.LMError):
        await imp.call(
            imp.predict(sig, lm=imp.ScriptedLM([imp.LMError("no", status=401)])), ticket="t", on_event=recorder
        )
    return recorder.events


async def test_every_kind_of_imp_comes_out_as_its_record() -> None:
    events = await a_run_of_every_kind()
    kinds = {e.kind for e in events}
    assert kinds == set(PAYLOADS) - {"run_cancelled"}  # cancelled: its own test below
    for event in events:
        assert type(event.payload) is PAYLOADS[event.kind], event
    assert set(typing.get_args(EventKind)) == set(PAYLOADS)


async def test_a_cancelled_call_says_so_with_its_record() -> None:
    events: list[Event] = []

    async def stuck(messages: list[Any], options: dict[str, Any]) -> Any:
        import anyio

        await anyio.sleep(10)

    import anyio

    with anyio.move_on_after(0.05):
        await imp.call(imp.predict("q -> a", lm=imp.StaticLM(handler=stuck)), q="x", on_event=events.append)
    assert [type(e.payload).__name__ for e in events][-1] == "RunCancelled"


async def test_every_event_dumps_to_a_json_line_and_loads_back_as_the_same_record() -> None:
    for event in await a_run_of_every_kind():
        line = json.loads(json.dumps(event.dump()))
        fields = {k: v for k, v in line.items() if k not in ("seq", "call_id", "parent_id", "kind", "at")}
        again = Event(line["seq"], line["call_id"], line["parent_id"], line["kind"], line["at"], fields)
        assert type(again.payload) is type(event.payload)
        assert again.payload.dump() == json.loads(json.dumps(event.payload.dump()))


async def test_a_cut_payload_keeps_its_type_so_readers_still_close_the_tool_call() -> None:
    events = await a_run_of_every_kind()
    (cut,) = [e.payload for e in events if isinstance(e.payload, ToolReturned) and e.payload.original_size]
    assert cut.tool_name == "big" and cut.outcome == "result"
    assert cut["truncated"] is True and cut["original_size"] > MAX_EVENT_BYTES * 2
    assert len(json.dumps(cut.dump())) <= MAX_EVENT_BYTES
    picture = picture_of(events)
    rows = [row for step in picture.steps for row in step.tools if row.name == "big"]
    assert rows and rows[0].outcome == "result" and "more characters" in str(rows[0].output)
    assert not [b for b in picture.bars if b.kind == "tool" and b.error == "unfinished"]


async def test_payloads_read_as_the_mappings_they_dump_to() -> None:
    events = await a_run_of_every_kind()
    request = next(e.payload for e in events if isinstance(e.payload, ModelRequest) and e.payload.step)
    assert request == request.dump() and request["step"] == request.step and "extract" not in request
    response = next(e.payload for e in events if isinstance(e.payload, ModelResponse) and e.payload.usage)
    assert response["usage"] == response.usage.dump() if response.usage else False
    assert dict(response) == response.dump() and len(response) == len(response.dump())
    call = next(e.payload for e in events if isinstance(e.payload, ToolCalled))
    assert call.get("arguments") == {"team": "atlas"} and call.get("output") is None


async def test_a_kind_of_your_own_is_custom_and_imp_s_kinds_from_keywords_are_records() -> None:
    events: list[Event] = []
    with run_scope(on_event=events.append):
        emit("lookup", rows=3, url="https://bob:hunter2@db.example.com/x")
        emit("tool_call", tool_call_id="c1", tool_name="look", arguments={"api_key": "sk-x"})
        emit("tool_call", tool_call_id="c2", tool_name="look", note="not a field of the record")
        emit(ToolCalled("c3", "look", 0, {"token": "abc"}))
    custom, typed, loose, record = (e.payload for e in events)
    assert isinstance(custom, Custom) and custom["rows"] == 3 and "hunter2" not in custom["url"]
    assert json.loads(json.dumps(custom)) == dict(custom)  # a custom payload is the dict it was emitted as
    assert isinstance(typed, ToolCalled) and typed.arguments == {"api_key": "[REDACTED]"}
    assert isinstance(loose, Custom) and loose["note"] == "not a field of the record"
    assert isinstance(record, ToolCalled) and record.arguments == {"token": "[REDACTED]"}


@pytest.mark.parametrize("kind", sorted(PAYLOADS))
def test_a_dump_missing_fields_still_loads_as_its_record(kind: str) -> None:
    """Event files written by hand (or by an older imp) may leave fields out: each reads as its
    record, the missing fields None, empty or zero; a key the record does not have keeps it Custom."""
    payload = payload_of(kind, {})
    assert type(payload) is PAYLOADS[kind] and isinstance(payload, Payload)
    assert isinstance(payload_of(kind, {"not_a_field": 1}), Custom)
    assert type(payload_of(kind, {**payload.dump(), "truncated": True, "original_size": 99})) is PAYLOADS[kind]
