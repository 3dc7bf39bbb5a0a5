"""imp.stream follows every request of a composite program, each part naming its predictor (`part.path`);
partial typed values under each adapter and from react's `submit` arguments."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from typing import Any

import pydantic
import pytest
from imp_backends import both_backends
from stream_lms import ChunkedLM, scripted

import imp
from imp.models.base import LM, LMResponse, Message, StreamEvent

DRAFT = "[[ ## text ## ]]\ndrafted words"
REVIEW = "[[ ## reasoning ## ]]\nfine\n\n[[ ## verdict ## ]]\ngood"


class Pipeline(imp.Program):
    """Two predictors, reached one of four ways."""

    def __init__(self, lm: LM, how: str) -> None:
        self.draft = imp.predict("topic -> text", lm=lm)
        self.review = imp.chain_of_thought("text -> verdict", lm=lm)
        self.signature = imp.signature("topic -> verdict")
        self.how = how

    async def acall(self, inputs: dict[str, Any], **options: Any) -> imp.Prediction:
        if self.how == "call":
            draft = await imp.call(self.draft, topic=inputs["topic"])
            return await imp.call(self.review, text=draft.text)
        if self.how == "acall":
            draft = await self.draft.acall({"topic": inputs["topic"]})
            return await self.review.acall({"text": draft.text})
        if self.how == "call_sync_inside_call":  # a program nested in a program nested in the stream
            inner = Pipeline(self.draft.lm, "call")  # type: ignore[arg-type]
            return await imp.call(inner, topic=inputs["topic"])
        raise AssertionError(self.how)


def _joined(parts: Sequence[imp.StreamPart]) -> dict[tuple[str | None, str | None], str]:
    out: dict[tuple[str | None, str | None], str] = {}
    for part in parts:
        if part.kind == "field":
            out[(part.path, part.field)] = out.get((part.path, part.field), "") + part.delta
    return out


@both_backends
@pytest.mark.parametrize("how", ["call", "acall"])
async def test_a_composite_streams_every_predictor_by_its_path(how: str) -> None:
    lm = ChunkedLM(scripted(DRAFT, REVIEW), 3)
    parts = [p async for p in imp.stream(Pipeline(lm, how), topic="kettles")]
    assert _joined(parts) == {
        ("draft.predict", "text"): "drafted words",
        ("review.predict", "reasoning"): "fine",
        ("review.predict", "verdict"): "good",
    }
    assert parts[-1].kind == "final" and parts[-1].prediction is not None
    assert parts[-1].prediction.verdict == "good" and parts[-1].path is None
    assert Pipeline(lm, how).parameters().names == ["draft.predict", "review.predict"]  # the same names


async def test_a_program_nested_two_deep_streams_under_its_own_names() -> None:
    lm = ChunkedLM(scripted(DRAFT, REVIEW), 4)
    parts = [p async for p in imp.stream(Pipeline(lm, "call_sync_inside_call"), topic="kettles")]
    # the inner pipeline is not an attribute of the streamed one: its predictors name themselves
    assert _joined(parts) == {
        ("predict", "text"): "drafted words",
        ("predict", "reasoning"): "fine",
        ("predict", "verdict"): "good",
    }


class Fanout(imp.Program):
    def __init__(self, lm: LM) -> None:
        self.summarize = imp.predict("text -> summary", lm=lm)
        self.signature = imp.signature("texts: list[str] -> summaries: list[str]")

    async def acall(self, inputs: dict[str, Any], **options: Any) -> imp.Prediction:
        done = await imp.parallel(self.summarize, [{"text": t} for t in inputs["texts"]], concurrency=3)
        return imp.Prediction({"summaries": [p.summary for p in done if isinstance(p, imp.Prediction)]})


@both_backends
async def test_parallel_items_inside_a_program_stream_each_under_its_index() -> None:
    replies = [f"[[ ## summary ## ]]\nsummary number {i}" for i in range(3)]
    lm = ChunkedLM(scripted(*replies), 2, delay=0.001)
    parts = [p async for p in imp.stream(Fanout(lm), texts=["a", "b", "c"])]
    joined = _joined(parts)
    assert set(joined) == {(f"summarize.predict[{i}]", "summary") for i in range(3)}
    assert sorted(joined.values()) == [f"summary number {i}" for i in range(3)]
    assert parts[-1].prediction is not None and len(parts[-1].prediction.summaries) == 3


@imp.fn
async def headline(article: str) -> str:
    """Write a headline."""


class UsesAFunction(imp.Program):
    signature = imp.signature("article -> title")

    async def acall(self, inputs: dict[str, Any], **options: Any) -> imp.Prediction:
        return imp.Prediction({"title": await headline(inputs["article"])})


async def test_a_function_program_streams_alone_and_inside_a_program() -> None:
    reply = "<result>\nKettles sell out\n</result>"
    with imp.context(lm=ChunkedLM(scripted(reply, reply), 3)):
        alone = [p async for p in imp.stream(headline, article="...")]
        inside = [p async for p in imp.stream(UsesAFunction(), article="...")]
    assert _joined(alone) == {("predict", "result"): "Kettles sell out"}
    assert _joined(inside) == {("headline.predict", "result"): "Kettles sell out"}
    assert inside[-1].prediction is not None and inside[-1].prediction.title == "Kettles sell out"


async def test_react_trajectory_streams_its_steps_tools_and_extraction() -> None:
    @imp.tool
    def stock(item: str) -> int:
        """Units in stock."""
        return 3

    step = (
        "[[ ## next_thought ## ]]\ncheck stock\n\n[[ ## next_tool_name ## ]]\nstock\n\n"
        '[[ ## next_tool_args ## ]]\n{"item": "kettle"}\n\n[[ ## completed ## ]]'
    )
    finish = (
        "[[ ## next_thought ## ]]\ndone\n\n[[ ## next_tool_name ## ]]\nfinish\n\n"
        "[[ ## next_tool_args ## ]]\n{}\n\n[[ ## completed ## ]]"
    )
    extract = "[[ ## reasoning ## ]]\nthree\n\n[[ ## answer ## ]]\n3 kettles\n\n[[ ## completed ## ]]"
    program = imp.react_trajectory("question -> answer", [stock], lm=ChunkedLM(scripted(step, finish, extract), 5))
    parts = [p async for p in imp.stream(program, question="how many?")]
    joined = _joined(parts)
    assert joined[("react", "next_thought")] == "check stockdone"
    assert joined[("react", "answer")] == "3 kettles"
    calls = [p for p in parts if p.kind in ("tool_call", "tool_result")]
    assert [(p.kind, p.tool_name, p.path) for p in calls][:2] == [
        ("tool_call", "stock", "react"),
        ("tool_result", "stock", "react"),
    ]
    assert parts[-1].prediction is not None and parts[-1].prediction.answer == "3 kettles"


async def test_react_trajectorys_partial_values_are_its_outputs_not_its_steps() -> None:
    @imp.tool
    def stock(item: str) -> int:
        """Units in stock."""
        return 3

    finish = (
        "[[ ## next_thought ## ]]\ndone\n\n[[ ## next_tool_name ## ]]\nfinish\n\n"
        "[[ ## next_tool_args ## ]]\n{}\n\n[[ ## completed ## ]]"
    )
    extract = "[[ ## reasoning ## ]]\nthree\n\n[[ ## count ## ]]\n3\n\n[[ ## completed ## ]]"
    program = imp.react_trajectory("question -> count: int", [stock], lm=ChunkedLM(scripted(finish, extract), 3))
    parts = [p async for p in imp.stream(program, question="how many?", partial=True)]
    values = _partials(parts)
    final = parts[-1].prediction
    assert final is not None and final.fields == {"count": 3}
    assert values and all(set(v) <= {"count"} for v in values) and values[-1] == {"count": 3}


async def test_a_react_inside_a_program_streams_its_tool_calls_with_its_path() -> None:
    @imp.tool
    def stock(item: str) -> int:
        """Units in stock."""
        return 3

    steps = [
        {"tool_calls": [{"name": "stock", "arguments": {"item": "kettle"}}]},
        {"answer": "3 kettles", "tool_calls": []},
    ]

    class Desk(imp.Program):
        signature = imp.signature("question -> answer")

        def __init__(self) -> None:
            self.agent = imp.react("question -> answer", [stock], lm=ChunkedLM(scripted(*steps), 4))

        async def acall(self, inputs: dict[str, Any], **options: Any) -> imp.Prediction:
            return await imp.call(self.agent, question=inputs["question"])

    parts = [p async for p in imp.stream(Desk(), question="how many?")]
    assert [(p.kind, p.path) for p in parts if p.kind.startswith("tool")] == [
        ("tool_call", "agent.react"),
        ("tool_result", "agent.react"),
    ]
    assert _joined(parts) == {("agent.react", "answer"): "3 kettles"}


# --- partial values -----------------------------------------------------------------------------


class Draft(pydantic.BaseModel):
    title: str
    tags: list[str] = []
    score: int


@dataclass
class Note:
    text: str
    rating: int = 0


class Report(imp.Signature):
    """Write the report."""

    topic: str = imp.InputField()
    draft: Draft = imp.OutputField()
    counts: list[int] = imp.OutputField()
    note: Note = imp.OutputField()
    summary: str = imp.OutputField()


VALUES = {
    "draft": {"title": "Kettles", "tags": ["stock", "q3"], "score": 12},
    "counts": [10, 200, 3000],
    "note": {"text": "sold out", "rating": 4},
    "summary": "All sold.",
}
REPLIES = {
    "chat": imp.ChatAdapter().reply_text(Report, VALUES),
    "json": json.dumps(VALUES),
    "xml": imp.XMLAdapter().reply_text(Report, VALUES),
}


def _partials(parts: Sequence[imp.StreamPart]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in parts:
        if part.kind == "partial":
            assert part.value is not None
            out.append(part.value)
    return out


@pytest.mark.parametrize("adapter", ["chat", "json", "xml"])
@pytest.mark.parametrize("size", [1, 3, 7])
async def test_partial_values_grow_typed_and_never_fail_validation(adapter: str, size: int) -> None:
    program = imp.predict(Report, adapter=adapter, lm=ChunkedLM(scripted(REPLIES[adapter]), size))
    parts = [p async for p in imp.stream(program, topic="kettles", partial=True)]
    values = _partials(parts)
    assert values, "partial parts were made"
    final = parts[-1].prediction
    assert final is not None and values[-1] == final.fields
    seen_counts: list[list[int]] = []
    for value in values:
        draft = value.get("draft")
        if draft is not None:
            assert isinstance(draft, Draft)
            assert "Kettles".startswith(draft.__dict__.get("title", ""))
            assert getattr(draft, "score", 12) == 12  # a number only once whole: never 1
        counts = value.get("counts")
        if counts is not None:
            assert counts == [10, 200, 3000][: len(counts)]  # item by item, each whole
            seen_counts.append(counts)
        note = value.get("note")
        if note is not None:
            assert isinstance(note, Note) and "sold out".startswith(note.text if hasattr(note, "text") else "")
        if "summary" in value:
            assert "All sold.".startswith(value["summary"])
    assert [len(c) for c in seen_counts] == sorted(len(c) for c in seen_counts)
    if size <= 3:  # a chunk that ends two numbers shows both at once
        assert [10] in seen_counts and [10, 200] in seen_counts


@pytest.mark.parametrize("adapter", ["chat", "json", "xml"])
async def test_a_partial_value_read_late_is_the_outputs_as_they_stood(adapter: str) -> None:
    """A part's value is a snapshot: read after the stream ended, it still shows that moment."""
    program = imp.predict(Report, adapter=adapter, lm=ChunkedLM(scripted(REPLIES[adapter]), 2))
    parts = [p async for p in imp.stream(program, topic="kettles", partial=True)]  # every value read after the end
    values = _partials(parts)
    summaries = [v["summary"] for v in values if "summary" in v]
    assert summaries[0] != "All sold." and summaries[-1] == "All sold."
    assert [len(s) for s in summaries] == sorted(len(s) for s in summaries)
    counts = [v["counts"] for v in values if "counts" in v]
    assert counts[0] == [] and [10] in counts and counts[-1] == [10, 200, 3000]
    titles = [v["draft"].__dict__.get("title") for v in values if "draft" in v]
    assert None in titles or "K" in titles


async def test_a_partial_part_is_only_made_when_asked_for() -> None:
    program = imp.predict(Report, lm=ChunkedLM(scripted(REPLIES["chat"]), 4))
    parts = [p async for p in imp.stream(program, topic="kettles")]
    assert not [p for p in parts if p.kind == "partial"] and all(p.value is None for p in parts)


class SubmitLM(LM):
    """Calls `submit` with its arguments streamed a few characters at a time."""

    provider = "submitting"
    model = "m"

    def __init__(self, arguments: dict[str, Any], size: int = 4) -> None:
        self.arguments, self.size = json.dumps(arguments), size

    async def request(self, messages: Sequence[Message], **options: Any) -> LMResponse:
        return LMResponse(text="", tool_calls=[imp.ToolCall("c1", "submit", json.loads(self.arguments))])

    async def stream(self, messages: Sequence[Message], **options: Any) -> AsyncIterator[StreamEvent]:
        yield StreamEvent("tool_call", index=0, tool_name="submit", tool_call_id="c1")
        for i in range(0, len(self.arguments), self.size):
            yield StreamEvent("tool_call", index=0, delta=self.arguments[i : i + self.size])
        yield StreamEvent("final", response=await self.request(messages))


async def test_reacts_submit_arguments_stream_as_partial_values() -> None:
    agent = imp.react(Report, [], finish="submit", lm=SubmitLM(VALUES))
    parts = [p async for p in imp.stream(agent, topic="kettles", partial=True)]
    values = _partials(parts)
    final = parts[-1].prediction
    assert final is not None and final.complete
    assert len(values) > 5 and values[-1] == final.fields
    assert all(p.path == "react" for p in parts if p.kind == "partial")
    counts = [v["counts"] for v in values if "counts" in v]
    assert all(c == [10, 200, 3000][: len(c)] for c in counts) and [10, 200] in counts
