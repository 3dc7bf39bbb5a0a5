"""`imp.agui.events`: a run's stream parts as AG-UI events, checked through the protocol package's
own types, its ordering rules and its TypeScript schemas."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import pydantic
import pytest
from agui_helpers import check_order, check_with_typescript_schemas, wire_events

import imp
import imp.agui
from imp.models.base import LM, LMResponse, StreamEvent
from imp.programs.stream import StreamPart

REPLY = "[[ ## reasoning ## ]]\nSix times seven.\n\n[[ ## answer ## ]]\n42\n\n[[ ## completed ## ]]"


class TypingLM(LM):
    """Writes its one reply a few characters at a time."""

    def __init__(self, reply: str = REPLY, size: int = 3) -> None:
        self.reply, self.size = reply, size

    async def request(self, messages: Any, **options: Any) -> LMResponse:
        return LMResponse(text=self.reply)

    async def stream(self, messages: Any, **options: Any) -> AsyncIterator[StreamEvent]:
        for i in range(0, len(self.reply), self.size):
            yield StreamEvent("text", delta=self.reply[i : i + self.size])
        yield StreamEvent("final", response=LMResponse(text=self.reply))


@imp.tool
def stock(item: str) -> int:
    """How many of an item are in stock."""
    return {"kettle": 3}[item]


def _agent() -> imp.ReAct:
    steps = [
        {
            "tool_calls": [
                {"name": "stock", "arguments": {"item": "kettle"}},
                {"name": "stock", "arguments": {"item": "pan"}},
            ]
        },
        {"answer": "3 kettles", "tool_calls": []},
    ]
    return imp.react("question -> answer", [stock], lm=imp.ScriptedLM(steps))


SOURCES = '[[ ## answer ## ]]\nParis\n\n[[ ## sources ## ]]\n["atlas", "wiki"]\n\n[[ ## completed ## ]]'

ALL: list[list[dict[str, Any]]] = []
"""Every run's events, checked together against the TypeScript schemas at the end."""


async def test_a_tool_loop_becomes_tool_calls_results_and_the_answer_message() -> None:
    events = await wire_events(imp.stream(_agent(), question="How many kettles?"), thread_id="t1", run_id="r1")
    ALL.append(events)
    check_order(events)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "RUN_STARTED" and events[0]["threadId"] == "t1" and events[0]["runId"] == "r1"
    starts = [e for e in events if e["type"] == "TOOL_CALL_START"]
    assert [s["toolCallName"] for s in starts] == ["stock", "stock"]
    args = {e["toolCallId"]: e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS"}
    assert [args[s["toolCallId"]] for s in starts] == ['{"item": "kettle"}', '{"item": "pan"}']
    results = {e["toolCallId"]: e for e in events if e["type"] == "TOOL_CALL_RESULT"}
    assert results[starts[0]["toolCallId"]]["content"] == "3"
    assert results[starts[0]["toolCallId"]]["role"] == "tool"
    assert results[starts[1]["toolCallId"]]["content"].startswith("Error: ")  # the failed call, as the model read it
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "3 kettles"
    (start,) = [e for e in events if e["type"] == "TEXT_MESSAGE_START"]
    assert start["role"] == "assistant"
    assert kinds[-2:] == ["STATE_SNAPSHOT", "RUN_FINISHED"]
    assert events[-2]["snapshot"] == {"answer": "3 kettles"} and events[-1]["result"] == {"answer": "3 kettles"}


async def test_reasoning_and_the_answer_stream_as_their_own_messages() -> None:
    program = imp.chain_of_thought("question -> answer: int", lm=TypingLM())
    events = await wire_events(imp.stream(program, question="6 x 7?"), thread_id="t", run_id="r")
    ALL.append(events)
    check_order(events)
    reasoning = "".join(e["delta"] for e in events if e["type"] == "REASONING_MESSAGE_CONTENT")
    answer = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert reasoning == "Six times seven." and answer == "42"
    assert len([e for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"]) > 0
    assert events[-1]["result"] == {"reasoning": "Six times seven.", "answer": 42}  # typed, as the prediction is


async def test_message_fields_choose_which_outputs_are_the_assistants_text() -> None:
    program = imp.predict("question -> answer, sources: list[str]", lm=TypingLM(SOURCES, size=5))
    events = await wire_events(imp.stream(program, question="q"), thread_id="t", run_id="r", message_fields=["answer"])
    ALL.append(events)
    check_order(events)
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "Paris"
    assert events[-1]["result"] == {"answer": "Paris", "sources": ["atlas", "wiki"]}


async def test_an_error_ends_the_events_with_run_error() -> None:
    program = imp.predict(
        "question -> answer",
        lm=imp.ScriptedLM([imp.RateLimited("slow down, key sk-live-abcdef1234567890abcd", status=429)]),
    )
    events = await wire_events(imp.stream(program, question="q"), thread_id="t", run_id="r")
    ALL.append(events)
    check_order(events)
    assert [e["type"] for e in events] == ["RUN_STARTED", "RUN_ERROR"]
    assert events[-1]["code"] == "RateLimited" and "slow down" in events[-1]["message"]
    assert "sk-live-abcdef1234567890abcd" not in events[-1]["message"]


class Draft(pydantic.BaseModel):
    title: str
    tags: list[str] = []


@dataclass(frozen=True)
class PartialPart:
    """A stream part of kind "partial" as `imp.stream(..., partial=True)` will yield it: `value` is
    the output so far, typed. Built by hand here: the events read parts through their public fields."""

    value: Any
    kind: str = "partial"


async def _parts(*parts: Any) -> AsyncIterator[Any]:
    for part in parts:
        yield part


async def test_partial_values_become_state_snapshots() -> None:
    final = imp.Prediction({"draft": Draft(title="Kettles", tags=["stock", "q3"])})
    parts = [
        PartialPart(Draft(title="Ket")),
        StreamPart("field", field="draft", delta='{"title": "Ket'),
        PartialPart(Draft(title="Kettles", tags=["stock"])),
        PartialPart({"draft": {"title": "Kettles", "tags": ["stock", "q3"]}, "count": 3}),
        StreamPart("final", prediction=final),
    ]
    events = await wire_events(_parts(*parts), thread_id="t", run_id="r", message_fields=())
    ALL.append(events)
    check_order(events)
    snapshots = [e["snapshot"] for e in events if e["type"] == "STATE_SNAPSHOT"]
    assert snapshots == [
        {"title": "Ket", "tags": []},
        {"title": "Kettles", "tags": ["stock"]},
        {"draft": {"title": "Kettles", "tags": ["stock", "q3"]}, "count": 3},
        {"draft": {"title": "Kettles", "tags": ["stock", "q3"]}},  # the final prediction's fields
    ]
    assert not [e for e in events if e["type"].startswith("TEXT_MESSAGE")]  # no message field


class Report(imp.Signature):
    """Draft the report."""

    topic: str = imp.InputField()
    draft: Draft = imp.OutputField()
    summary: str = imp.OutputField()


async def test_a_streams_real_partial_values_become_growing_state_snapshots() -> None:
    reply = imp.ChatAdapter().reply_text(
        Report, {"draft": {"title": "Kettles", "tags": ["stock", "q3"]}, "summary": "Sold out."}
    )
    program = imp.predict(Report, lm=TypingLM(reply, size=4))
    events = await wire_events(
        imp.stream(program, topic="kettles", partial=True), thread_id="t", run_id="r", message_fields=["summary"]
    )
    ALL.append(events)
    check_order(events)
    snapshots = [e["snapshot"] for e in events if e["type"] == "STATE_SNAPSHOT"]
    final = {"draft": {"title": "Kettles", "tags": ["stock", "q3"]}, "summary": "Sold out."}
    assert len(snapshots) > 4 and snapshots[-1] == final
    titles = [s["draft"].get("title", "") for s in snapshots if "draft" in s]
    assert titles == sorted(titles, key=len) and all("Kettles".startswith(t) for t in titles)
    assert ["stock"] in [s["draft"].get("tags") for s in snapshots if "draft" in s]  # a list, item by item
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == "Sold out."


class Pipeline(imp.Program):
    signature = imp.signature("topic -> verdict")

    def __init__(self) -> None:
        lm = TypingLM("[[ ## verdict ## ]]\nfirst try", size=3)
        self.draft = imp.predict("topic -> verdict", lm=lm)
        self.review = imp.predict("topic -> verdict", lm=TypingLM("[[ ## verdict ## ]]\nchecked", size=3))

    async def acall(self, inputs: dict[str, Any], **options: Any) -> imp.Prediction:
        await imp.call(self.draft, **inputs)
        return await imp.call(self.review, **inputs)


async def test_each_predictor_of_a_composite_writes_its_own_message() -> None:
    events = await wire_events(imp.stream(Pipeline(), topic="kettles"), thread_id="t", run_id="r")
    ALL.append(events)
    check_order(events)
    starts = [e["messageId"] for e in events if e["type"] == "TEXT_MESSAGE_START"]
    assert len(starts) == 2
    texts = ["".join(e["delta"] for e in events if e.get("messageId") == m and "delta" in e) for m in starts]
    assert texts == ["first try", "checked"]


async def test_a_retry_ends_the_open_message_and_says_why() -> None:
    parts = [
        StreamPart("field", field="answer", delta="{broken"),
        StreamPart("retry", reason="the reply was not JSON"),
        StreamPart("field", field="answer", delta="fine"),
        StreamPart("final", prediction=imp.Prediction({"answer": "fine"})),
    ]
    events = await wire_events(_parts(*parts), thread_id="t", run_id="r")
    ALL.append(events)
    check_order(events)
    kinds = [e["type"] for e in events]
    assert kinds.count("TEXT_MESSAGE_START") == 2
    (custom,) = [e for e in events if e["type"] == "CUSTOM"]
    assert custom["name"] == "imp.retry" and custom["value"] == {"reason": "the reply was not JSON"}
    assert kinds.index("CUSTOM") == kinds.index("TEXT_MESSAGE_END") + 1


async def test_an_empty_delta_opens_the_message_but_sends_no_content() -> None:
    parts = [
        StreamPart("field", field="answer", delta=""),
        StreamPart("final", prediction=imp.Prediction({"answer": ""})),
    ]
    events = await wire_events(_parts(*parts), thread_id="t", run_id="r")
    check_order(events)
    assert [e["type"] for e in events] == [
        "RUN_STARTED",
        "TEXT_MESSAGE_START",
        "TEXT_MESSAGE_END",
        "STATE_SNAPSHOT",
        "RUN_FINISHED",
    ]


async def test_leaving_the_events_early_cancels_the_run() -> None:
    closed: list[bool] = []

    async def parts() -> AsyncIterator[Any]:
        try:
            yield StreamPart("field", field="answer", delta="a")
            yield StreamPart("field", field="answer", delta="b")
        finally:
            closed.append(True)

    stream = imp.agui.events(parts(), thread_id="t", run_id="r")
    async for event in stream:
        if event.type == "TEXT_MESSAGE_CONTENT":
            break
    await stream.aclose()  # type: ignore[attr-defined]
    assert closed == [True]


def test_every_run_passes_the_protocols_typescript_schemas() -> None:
    events = [event for run in ALL for event in run]
    if not events:
        pytest.skip("run with the other tests of this module")
    assert check_with_typescript_schemas(events) == len(events)
