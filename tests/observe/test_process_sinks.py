"""Process-wide event sinks (`imp.runtime.run.add_process_sink`), the hook `imp.instrument_otel` uses."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

import pytest

import imp
from imp.runtime.run import Event, Run, add_process_sink, remove_process_sink

KEY = "sk-test-abcdefghijklmnopqrstuvwx0123456789"


def _answer(messages: list[dict[str, Any]], options: dict[str, Any]) -> dict[str, Any]:
    return {"answer": "ok"}


QA = imp.predict("question -> answer", lm=imp.StaticLM(_answer))


class RawSink:
    """Takes payloads before they are made events."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, str, Mapping[str, Any]]] = []
        self.events: list[Event] = []

    def __call__(self, event: Event) -> None:
        self.events.append(event)

    def raw_event(self, run: Run, kind: str, payload: Mapping[str, Any], at: float) -> None:
        self.seen.append((run.call_id, kind, payload))


@pytest.fixture
def installed() -> Iterator[list[object]]:
    sinks: list[object] = []
    yield sinks
    for sink in sinks:
        remove_process_sink(sink)  # type: ignore[arg-type]


def test_a_process_sink_sees_every_call_without_an_on_event(installed: list[object]) -> None:
    events: list[Event] = []
    add_process_sink(events.append)
    installed.append(events.append)
    imp.call_sync(QA, question=f"q {KEY}")
    imp.call_sync(QA, question="again")
    assert [e.kind for e in events] == ["run_started", "model_request", "model_response", "run_finished"] * 2
    assert len({e.call_id for e in events}) == 2
    remove_process_sink(events.append)
    imp.call_sync(QA, question="not seen")
    assert len(events) == 8


def test_a_calls_own_sink_and_the_process_sink_both_get_each_event_and_one_failing_spares_the_other(
    installed: list[object],
) -> None:
    def broken(event: Event) -> None:
        raise RuntimeError("sink down")

    seen: list[Event] = []
    add_process_sink(broken)
    add_process_sink(seen.append)
    installed += [broken, seen.append]
    own: list[str] = []
    prediction = imp.call_sync(QA, question="q", on_event=lambda e: own.append(e.kind))
    assert prediction.answer == "ok"
    assert own == [e.kind for e in seen] == ["run_started", "model_request", "model_response", "run_finished"]


def test_raw_sinks_get_payloads_only_when_nothing_else_listens(installed: list[object]) -> None:
    raw = RawSink()
    add_process_sink(raw)
    installed.append(raw)
    imp.call_sync(QA, question="q")
    assert [kind for _, kind, _ in raw.seen] == ["run_started", "model_request", "model_response", "run_finished"]
    assert raw.events == []  # no Event built for it
    own: list[Event] = []
    imp.call_sync(QA, question="q", on_event=own.append)  # a call's own sink: events for everyone
    assert len(raw.events) == len(own) == 4 and len(raw.seen) == 4


def test_a_nested_call_keeps_the_process_sink_under_its_own_on_event(installed: list[object]) -> None:
    seen: list[Event] = []
    add_process_sink(seen.append)
    installed.append(seen.append)
    inner_events: list[Event] = []

    class Outer(imp.Program):
        signature = imp.signature("question -> answer")

        async def acall(self, inputs: dict[str, Any], **options: Any) -> imp.Prediction:
            return await imp.call(QA, inputs, on_event=inner_events.append)

    imp.call_sync(Outer(), question="q")
    outer_id = seen[0].call_id
    nested = [e for e in seen if e.parent_id == outer_id]
    assert (
        [e.kind for e in nested]
        == [e.kind for e in inner_events]
        == [
            "run_started",
            "model_request",
            "model_response",
            "run_finished",
        ]
    )


def test_adding_a_sink_twice_delivers_once(installed: list[object]) -> None:
    seen: list[Event] = []
    add_process_sink(seen.append)
    add_process_sink(seen.append)
    installed.append(seen.append)
    imp.call_sync(QA, question="q")
    assert len(seen) == 4
