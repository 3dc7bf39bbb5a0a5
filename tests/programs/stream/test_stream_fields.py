"""imp.stream: every adapter's fields as they are written, the same Prediction as imp.call."""

from __future__ import annotations

import json
from typing import Any

import pytest
from imp_backends import both_backends
from stream_lms import ChunkedLM, scripted

import imp
from imp.models.base import LMResponse

CHAT = (
    "[[ ## reasoning ## ]]\nFirst, the [brackets] and [[ ## not a marker. ]]\n\n"
    "[[ ## answer ## ]]\nforty  two\n\n[[ ## count ## ]]\n42\n\n[[ ## completed ## ]]\n"
)
JSON = json.dumps(
    {"reasoning": 'He said "hi"\nthen \\ left \u00e9 \U0001f600', "answer": "forty  two", "count": 42},
    ensure_ascii=True,
)
XML = "<reasoning>a &lt;b&gt; &amp; c</reasoning>\n<answer>forty  two</answer>\n<count>42</count>"
TEMPLATE = [
    imp.system("Think, then answer in this form:\n\nThinking: {reasoning}\nAnswer: {answer}\nCount: {count}"),
    imp.user("{question}"),
]
TEMPLATE_REPLY = "Thinking: a long thought\nAnswer: forty  two\nCount: 42"

CASES: list[tuple[str, Any, str]] = [
    ("chat", imp.ChatAdapter(), CHAT),
    ("json", imp.JSONAdapter(), JSON),
    ("xml", imp.XMLAdapter(), XML),
    ("template", imp.TemplateAdapter(TEMPLATE), TEMPLATE_REPLY),
    ("template_json", imp.TemplateAdapter(TEMPLATE).fallback, JSON),
]
SIGNATURE = "question -> answer: str, count: int"


async def collect(program: imp.Program, **inputs: Any) -> tuple[dict[str, str], list[imp.StreamPart]]:
    joined: dict[str, str] = {}
    parts = [p async for p in imp.stream(program, **inputs)]
    for part in parts:
        if part.kind == "field":
            assert part.field is not None and part.delta
            joined[part.field] = joined.get(part.field, "") + part.delta
    return joined, parts


@pytest.mark.parametrize(("name", "adapter", "reply"), CASES, ids=[c[0] for c in CASES])
@pytest.mark.parametrize("size", [1, 2, 3, 5, 8, 13, 1000])
async def test_each_field_streams_whole_and_the_prediction_is_imp_calls(
    name: str, adapter: Any, reply: str, size: int
) -> None:
    program = imp.chain_of_thought(SIGNATURE, adapter=adapter)
    expected = await imp.call(program.with_lm(scripted(reply)), question="q")
    joined, parts = await collect(program.with_lm(ChunkedLM(scripted(reply), size)), question="q")
    final = parts[-1]
    assert final.kind == "final" and final.prediction is not None
    assert [p.kind for p in parts[:-1]] == ["field"] * (len(parts) - 1)
    assert final.prediction.fields == expected.fields
    assert final.prediction.metadata == expected.metadata
    # the fields come in order, reasoning first, each whole, no marker text in any delta
    order = list(dict.fromkeys(p.field for p in parts[:-1]))
    assert order == ["reasoning", "answer", "count"]
    assert joined["reasoning"] == expected.reasoning
    assert joined["answer"] == "forty  two"
    assert joined["count"] == "42"
    for part in parts[:-1]:
        for marker in ("[[ ## answer", "<answer", "</", '"answer"', "Answer:", "Count:"):
            assert marker not in part.delta


async def test_a_marker_split_at_every_offset_is_found() -> None:
    program = imp.predict("question -> answer")
    reply = "[[ ## answer ## ]]\nyes\n\n[[ ## completed ## ]]"
    for size in range(1, len(reply) + 1):
        joined, _ = await collect(program.with_lm(ChunkedLM(scripted(reply), size)), question="q")
        assert joined == {"answer": "yes"}, size


async def test_reasoning_deltas_from_the_provider_come_before_the_fields() -> None:
    lm = ChunkedLM(scripted(LMResponse(text="[[ ## answer ## ]]\nok", reasoning="mull it over")), 4)
    _, parts = await collect(imp.predict("question -> answer", lm=lm), question="q")
    kinds = [p.kind for p in parts]
    assert kinds[: kinds.index("field")] == ["reasoning"] * kinds.index("field")
    assert "".join(p.delta for p in parts if p.kind == "reasoning") == "mull it over"
    assert parts[-1].prediction is not None and parts[-1].prediction.answer == "ok"


async def test_a_json_fallback_says_so_and_streams_the_fields_again() -> None:
    lm = ChunkedLM(scripted("no markers at all", '{"answer": "from json"}'), 2)
    joined, parts = await collect(imp.predict("question -> answer", lm=lm), question="q")
    kinds = [p.kind for p in parts]
    assert kinds[0] == "retry" and parts[0].reason and "JSONAdapter" in parts[0].reason
    assert joined == {"answer": "from json"}
    prediction = parts[-1].prediction
    assert prediction is not None and prediction.metadata.json_fallback and prediction.metadata.lm_calls == 2


async def test_a_template_with_a_prefill_streams_what_follows_it() -> None:
    template = [imp.system("Reply as\nAnswer: {answer}"), imp.user("{question}"), imp.assistant("Answer:")]
    program = imp.predict("question -> answer", adapter=imp.TemplateAdapter(template))
    reply = " fine"
    expected = await imp.call(program.with_lm(scripted(reply)), question="q")
    joined, _ = await collect(program.with_lm(ChunkedLM(scripted(reply), 2)), question="q")
    assert joined == {"answer": expected.answer}


async def test_run_events_usage_and_a_user_sink_are_those_of_imp_call() -> None:
    seen: list[str] = []
    lm = ChunkedLM(scripted("[[ ## answer ## ]]\nok"), 2)
    parts = [
        p
        async for p in imp.stream(
            imp.predict("question -> answer", lm=lm), question="q", on_event=lambda e: seen.append(e.kind)
        )
    ]
    assert seen[0] == "run_started" and seen[-1] == "run_finished"
    assert "model_request" in seen and "model_response" in seen
    assert parts[-1].prediction is not None


@both_backends
async def test_streams_under_both_backends() -> None:
    lm = ChunkedLM(scripted(CHAT), 3)
    joined, parts = await collect(imp.chain_of_thought(SIGNATURE, lm=lm), question="q")
    assert joined["answer"] == "forty  two"
    assert parts[-1].prediction is not None and parts[-1].prediction.count == 42


FIRST_TOKEN = [
    (imp.ChatAdapter(), "[[ ## answer ## ]]\nHel"),
    (imp.JSONAdapter(), '{"answer": "Hel'),
    (imp.XMLAdapter(), "<answer>Hel"),
    (
        imp.TemplateAdapter([imp.system("Reply as\nAnswer: {answer}\nCount: {count}"), imp.user("{question}")]),
        "Answer: Hel",
    ),
]


@pytest.mark.parametrize(("adapter", "text"), FIRST_TOKEN, ids=["chat", "json", "xml", "template"])
def test_text_that_cannot_start_a_marker_is_not_held_back(adapter: Any, text: str) -> None:
    signature = imp.signature("question -> answer: str, count: int")
    splitter = adapter.field_splitter(signature)
    assert splitter.feed(text) == [("answer", "Hel")]
    # what could be the start of the next marker waits for the next chunk
    tail = {"chat": "lo [[ ## co", "json": 'lo", "co', "xml": "lo</ans", "template": "lo\nCou"}[_kind(adapter)]
    assert splitter.feed(tail) == [("answer", "lo")]


def _kind(adapter: Any) -> str:
    return {"ChatAdapter": "chat", "JSONAdapter": "json", "XMLAdapter": "xml"}.get(type(adapter).__name__, "template")


class LinesAdapter(imp.Adapter):
    """A dialect of one's own (`name: value` lines) that says nothing of how its replies stream."""

    name = "LinesAdapter"

    def default_system(self, signature: imp.Signature, options: Any) -> str:
        return "Answer with `name: value` lines for: " + ", ".join(signature.outputs)

    def input_section(self, field: imp.Field, formatted_value: str) -> str:
        return f"{field.name}: {formatted_value}"

    def default_outputs(self, signature: imp.Signature, outputs: Any, missing_message: str) -> str:
        return "\n".join(f"{n}: {outputs.get(n, missing_message)}" for n in signature.outputs)

    def response_instruction(self, signature: imp.Signature) -> str | None:
        return None

    def parse_text(self, signature: imp.Signature, text: str) -> dict[str, Any]:
        found = dict(line.split(": ", 1) for line in text.splitlines() if ": " in line)
        return self.complete(signature, {k: v for k, v in found.items() if k in signature.outputs}, completion=text)


@pytest.mark.parametrize("size", [1, 4, 1000])
async def test_a_dialect_of_ones_own_streams_its_fields_whole_when_the_reply_ends(size: int) -> None:
    """An adapter that does not say how its replies are split still streams: each output arrives
    once, read by the adapter itself, after the reply's last chunk (never silently nothing)."""
    reply = "answer: forty two\ncount: 42"
    program = imp.predict(SIGNATURE, adapter=LinesAdapter())
    joined, parts = await collect(program.with_lm(ChunkedLM(scripted(reply), size)), question="q")
    assert joined == {"answer": "forty two", "count": "42"}
    assert [p.field for p in parts if p.kind == "field"] == ["answer", "count"]
    final = parts[-1].prediction
    assert final is not None and final.answer == "forty two" and final.count == 42


async def test_a_dialect_of_ones_own_that_splits_its_replies_is_streamed_by_its_own_splitter() -> None:
    """Adding a dialect touches only its adapter: its `field_splitter` is what `imp.stream` uses."""
    from imp.adapters._split import FieldSplitter

    class Streaming(LinesAdapter):
        def field_splitter(self, signature: imp.Signature) -> Any:
            names = list(signature.outputs)

            def find_open(buf: str, pos: int) -> tuple[str, int, int] | None:
                for name in names:
                    at = buf.find(f"{name}: ", pos)
                    if at >= 0:
                        return name, at, at + len(name) + 2
                return None

            def find_close(buf: str, pos: int, field: str) -> tuple[int, int] | None:
                at = buf.find("\n", pos)
                return (at, at + 1) if at >= 0 else None

            return FieldSplitter(find_open, find_close, lambda field: ("\n",))

    program = imp.predict(SIGNATURE, adapter=Streaming())
    joined, parts = await collect(program.with_lm(ChunkedLM(scripted("answer: forty two\ncount: 42"), 3)), question="q")
    assert joined == {"answer": "forty two", "count": "42"}
    assert len([p for p in parts if p.field == "answer"]) > 1  # written piece by piece, as it came


@pytest.mark.parametrize("size", [1, 2, 5, 1000])
async def test_json_streams_a_non_string_value_past_its_commas_and_every_later_field(size: int) -> None:
    """The JSON splitter ended an object field at its first comma (`{"items": ["a"`), a later field got
    no deltas, and a `list[int]` streamed as `[1`; each value now streams whole, as it is written."""
    signature = "question -> tags: list[str], numbers: list[int], meta: dict[str, int], answer"
    reply = '{"tags": ["a", "b, c"], "numbers": [1, 22, 333], "meta": {"x": 1, "y": 2}, "answer": " spaced  out "}'
    program = imp.predict(signature, adapter="json")
    joined, parts = await collect(program.with_lm(ChunkedLM(scripted(reply), size)), question="q")
    assert joined == {
        "tags": '["a", "b, c"]',
        "numbers": "[1, 22, 333]",
        "meta": '{"x": 1, "y": 2}',
        "answer": " spaced  out ",  # a JSON string is sent exactly
    }
    if size <= 5:  # written as it arrives, not whole at its end
        assert len([p for p in parts if p.field == "numbers"]) > 2
    final = parts[-1].prediction
    assert final is not None and final.numbers == [1, 22, 333] and final.meta == {"x": 1, "y": 2}


def test_whitespace_inside_a_field_waits_for_the_text_after_it_and_never_ends_a_field() -> None:
    splitter = imp.ChatAdapter().field_splitter(imp.signature("question -> answer, note"))
    assert splitter.feed("[[ ## answer ## ]]\n  two") == [("answer", "two")]
    assert splitter.feed("  ") == []  # it may be the field's end
    assert splitter.feed(" words\n\n") == [("answer", "   words")]
    assert splitter.feed("[[ ## note ## ]]\nx") == [("note", "x")]  # the trailing newlines were dropped
