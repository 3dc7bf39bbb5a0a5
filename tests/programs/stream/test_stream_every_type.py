"""Every adapter streams every field type as its text arrives: a property over random values of random
types, replies chunked at random points. The joined deltas of each field are the field's text in the
reply, and a field's deltas all come before the next field's (nothing arrives after its end)."""

from __future__ import annotations

import enum
import itertools
import json
import re
from typing import Any, Literal

import pydantic
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import imp
from imp.adapters.chat import split_sections


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Item(pydantic.BaseModel):
    name: str
    count: int
    tags: list[str] = []


_ALPHABET = st.characters(
    codec="utf-8", categories=("L", "N", "P", "S", "Zs"), exclude_characters="[]<>&\\\"'`{}#\r\u2028\u2029"
)
_TEXT = st.text(_ALPHABET, min_size=1, max_size=12).map(str.strip).filter(bool)
_TEXT_WITH_JSON = st.text(
    st.characters(codec="utf-8", categories=("L", "N", "P", "S", "Zs"), exclude_characters="\r\u2028\u2029"),
    min_size=1,
    max_size=12,
).filter(lambda s: s.strip() == s and s and "[[" not in s and "]]" not in s)

TYPES: dict[str, tuple[Any, st.SearchStrategy[Any]]] = {
    "str": (str, _TEXT),
    "int": (int, st.integers(-(10**12), 10**12)),
    "float": (float, st.floats(-1e6, 1e6, allow_nan=False).map(lambda x: round(x, 3))),
    "bool": (bool, st.booleans()),
    "enum": (Color, st.sampled_from(list(Color))),
    "literal": (Literal["yes", "no"], st.sampled_from(["yes", "no"])),
    "list_str": (list[str], st.lists(_TEXT_WITH_JSON, max_size=4)),
    "list_int": (list[int], st.lists(st.integers(-1000, 1000), max_size=5)),
    "dict": (dict[str, int], st.dictionaries(_TEXT, st.integers(-99, 99), max_size=3)),
    "model": (Item, st.builds(Item, name=_TEXT, count=st.integers(0, 99), tags=st.lists(_TEXT, max_size=3))),
    "optional": (int | None, st.one_of(st.none(), st.integers(-50, 50))),
    "union": (int | str, st.one_of(st.integers(0, 50), _TEXT.filter(lambda s: not s.lstrip("-").isdigit()))),
    "list_model": (list[Item], st.lists(st.builds(Item, name=_TEXT, count=st.integers(0, 9)), max_size=2)),
}


def _signature(kinds: list[str]) -> imp.Signature:
    fields = [imp.Field("question", "input", str)]
    fields += [imp.Field(f"out{i}", "output", TYPES[kind][0]) for i, kind in enumerate(kinds)]
    return imp.Signature(fields[:1], fields[1:], "Answer.")


def _xml_text(reply: str, name: str) -> str:
    match = re.search(rf"<{name}>(.*?)</{name}>", reply, re.DOTALL)
    assert match is not None
    text = match.group(1).strip()
    for entity, char in (("&lt;", "<"), ("&gt;", ">"), ("&quot;", '"'), ("&apos;", "'"), ("&amp;", "&")):
        text = text.replace(entity, char)
    return text


def _reply_and_texts(adapter: str, signature: imp.Signature, values: dict[str, Any]) -> tuple[str, dict[str, str]]:
    """A reply as the adapter asks for it, and each field's text in it as the adapter reads it."""
    if adapter == "json":
        data = pydantic.TypeAdapter(dict[str, Any]).dump_python(values, mode="json")
        reply = json.dumps(data, ensure_ascii=False)
        return reply, {k: v if isinstance(v, str) else json.dumps(v, ensure_ascii=False) for k, v in data.items()}
    if adapter == "chat":
        reply = imp.ChatAdapter().reply_text(signature, values)
        return reply, {name: body for name, body in split_sections(reply) if name in values}
    reply = imp.XMLAdapter().reply_text(signature, values)
    return reply, {name: _xml_text(reply, name) for name in values}


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, imp.Signature, dict[str, Any], list[int]]:
    adapter = draw(st.sampled_from(["chat", "json", "xml"]))
    kinds = draw(st.lists(st.sampled_from(sorted(TYPES)), min_size=1, max_size=4))
    signature = _signature(kinds)
    values = {f"out{i}": draw(TYPES[kind][1]) for i, kind in enumerate(kinds)}
    cuts = draw(st.lists(st.integers(1, 400), min_size=1, max_size=40))
    return adapter, signature, values, cuts


ADAPTERS = {"chat": imp.ChatAdapter(), "json": imp.JSONAdapter(), "xml": imp.XMLAdapter()}


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_every_field_streams_its_text_whole_in_order_under_every_adapter(
    case: tuple[str, imp.Signature, dict[str, Any], list[int]],
) -> None:
    adapter_name, signature, values, cuts = case
    reply, texts = _reply_and_texts(adapter_name, signature, values)
    splitter = ADAPTERS[adapter_name].field_splitter(signature)
    pieces: list[tuple[str, str]] = []
    points = sorted({c % (len(reply) + 1) for c in cuts} | {0, len(reply)})
    for start, end in itertools.pairwise(points):
        pieces += splitter.feed(reply[start:end])
    pieces += splitter.close()
    joined: dict[str, str] = {}
    order: list[str] = []
    for name, delta in pieces:
        assert delta, "no empty delta"
        if not order or order[-1] != name:
            assert name not in order, f"{name} got a delta after the next field began"
            order.append(name)
        joined[name] = joined.get(name, "") + delta
    expected = {name: text for name, text in texts.items() if text}
    assert joined == expected
    assert order == [name for name in signature.outputs if name in expected]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_a_chunked_stream_gives_imp_calls_prediction(
    case: tuple[str, imp.Signature, dict[str, Any], list[int]],
) -> None:
    """The same replies through imp.stream: the final Prediction is imp.call's."""
    import anyio
    from stream_lms import ChunkedLM, scripted

    adapter_name, signature, values, cuts = case
    reply, _ = _reply_and_texts(adapter_name, signature, values)
    program = imp.predict(signature, adapter=ADAPTERS[adapter_name], json_fallback=False)

    async def run() -> tuple[imp.Prediction, imp.Prediction]:
        expected = await imp.call(program.with_lm(scripted(reply)), question="q")
        parts = [
            p
            async for p in imp.stream(program.with_lm(ChunkedLM(scripted(reply), cuts[0])), question="q", partial=True)
        ]
        final = parts[-1].prediction
        assert final is not None
        partials = [p.value for p in parts if p.kind == "partial"]
        for value in partials:  # only outputs, each of its type
            assert isinstance(value, dict) and set(value) <= set(signature.outputs)
        answered = {k: v for k, v in final.fields.items() if k in (partials[-1] if partials else {})}
        if partials:  # the last partial value is the prediction's, for every output it holds
            assert partials[-1] == answered
        return expected, final

    expected, final = anyio.run(run)
    assert final.fields == expected.fields
