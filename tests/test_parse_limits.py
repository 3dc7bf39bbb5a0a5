"""Hostile replies get typed errors in bounded work: every parser of a model's or a server's text.

Nested, huge and malformed input goes to each parser (imp's JSON reader, strict and repairing, the
Chat, JSON, XML and template adapters, tool arguments from a wire and from text, field coercion,
MCP answers, recorded event lines). Each must answer or raise its typed error (never
`RecursionError`, never another exception), and the work is *counted*, not timed: the Python lines
a parse runs, under `sys.settrace`, stay within a bound linear in the text's length, and grow
linearly when the text does (a quadratic repair, as json-repair's was, grows sixteenfold when the
text grows fourfold).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import types

import imp
from imp._json import find_object, loads, loads_strict
from imp.mcp._render import render_result
from imp.mcp._sdk import wire
from imp.models._wire import parse_arguments
from imp.observe.picture import load_events
from imp.signature import Field
from imp.tools.schema import check_arguments, decode_arguments
from imp.values import CoercionError, coerce_text


class Item(pydantic.BaseModel):
    name: str
    tags: list[str] = []


SIG = imp.signature("q -> answer: str, count: int, data: list[Any], obj: dict[str, Any]")


def _items_sig() -> imp.Signature:
    class Sig(imp.Signature):
        q: str = imp.InputField()
        entries: list[Item] = imp.OutputField()
        note: str | None = imp.OutputField()

    return Sig


def _mcp(text: str) -> Any:
    return render_result(
        wire(
            types.CallToolResult(
                content=[types.TextContent(type="text", text=text)], structuredContent={"result": text}
            )
        )
    )


def _events(text: str) -> Any:
    path = Path(_events.folder) / "events.jsonl"  # type: ignore[attr-defined]
    path.write_text(text, encoding="utf-8")
    return load_events(path)


PARSERS: dict[str, tuple[Callable[[str], Any], tuple[type[BaseException], ...]]] = {
    "json.loads": (loads, (ValueError,)),
    "json.loads_strict": (loads_strict, (ValueError,)),
    "json.find_object": (find_object, ()),
    "chat": (lambda t: imp.ChatAdapter().parse(SIG, t), (imp.AdapterParseError,)),
    "json adapter": (lambda t: imp.JSONAdapter().parse(SIG, t), (imp.AdapterParseError,)),
    "xml": (lambda t: imp.XMLAdapter().parse(SIG, t), (imp.AdapterParseError,)),
    "xml models": (lambda t: imp.XMLAdapter().parse(_items_sig(), t), (imp.AdapterParseError,)),
    "chat models": (lambda t: imp.ChatAdapter().parse(_items_sig(), t), (imp.AdapterParseError,)),
    "tool arguments (text)": (decode_arguments, ()),
    "tool arguments (wire)": (parse_arguments, (imp.ImpError, ValueError)),
    "tool arguments (schema)": (
        lambda t: check_arguments(
            {"type": "object", "properties": {"a": {"type": "string", "pattern": "(a+)+$"}}},
            decode_arguments(t)[0] or {},
        ),
        (),
    ),
    "coerce list": (lambda t: coerce_text(Field("v", "output", list[Any]), t), (CoercionError,)),
    "coerce model": (lambda t: coerce_text(Field("v", "output", Item), t), (CoercionError,)),
    "coerce union": (lambda t: coerce_text(Field("v", "output", int | list[Any] | str), t), (CoercionError,)),
    "mcp answer": (_mcp, (imp.ImpError, ValueError)),
}


def counted(parse: Callable[[str], Any], text: str) -> tuple[Any, int]:
    """What `parse(text)` returned or raised, and how many Python lines it ran."""
    lines = 0

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        nonlocal lines
        if event == "line":
            lines += 1
        return tracer

    sys.settrace(tracer)
    try:
        try:
            outcome: Any = parse(text)
        except BaseException as exc:
            outcome = exc
    finally:
        sys.settrace(None)
    return outcome, lines


LINES_PER_CHAR = 400
"""The bound on work: lines run per character of input, plus a constant for the setup of a parse."""
SETUP_LINES = 60_000


def check(name: str, text: str) -> int:
    parse, typed = PARSERS[name]
    outcome, lines = counted(parse, text)
    if isinstance(outcome, BaseException):
        assert isinstance(outcome, typed) and not isinstance(outcome, RecursionError), (
            f"{name} raised {type(outcome).__name__}: {outcome!s:.200}"
        )
    assert lines <= LINES_PER_CHAR * len(text) + SETUP_LINES, f"{name}: {lines} lines for {len(text)} characters"
    return lines


SIGNIFICANT = [*list("{}[]\"':,\\ \n<>/=!-`#ntrufalse0123456789.eE"), "[[ ## answer ## ]]", "<data>", "</data>", "```"]


@st.composite
def nested(draw: st.DrawFn) -> str:
    depth = draw(st.integers(1, 3_000))
    openers = draw(st.text(alphabet="[{", min_size=1, max_size=4))
    head = (openers * depth)[:depth] if draw(st.booleans()) else '{"a":' * depth
    tail = draw(st.sampled_from(["", "1", '"x', "]" * depth, "}" * depth, "1" + "]}" * depth]))
    prefix = draw(st.sampled_from(["", "[[ ## data ## ]]\n", "<data>", "Sure: "]))
    return prefix + head + tail


@st.composite
def huge(draw: st.DrawFn) -> str:
    chunk = draw(st.lists(st.sampled_from(SIGNIFICANT), min_size=1, max_size=12).map("".join))
    return chunk * draw(st.integers(100, 4_000 // max(1, len(chunk)) + 100))


malformed = st.lists(st.sampled_from(SIGNIFICANT) | st.characters(), max_size=600).map("".join)


@pytest.mark.parametrize("name", sorted(PARSERS))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(text=st.one_of(nested(), huge(), malformed))
def test_hostile_text_gets_a_typed_answer_in_bounded_work(name: str, text: str) -> None:
    check(name, text)


def test_recorded_event_lines_are_read_in_bounded_work(tmp_path: Path) -> None:
    _events.folder = str(tmp_path)  # type: ignore[attr-defined]
    PARSERS["event lines"] = (_events, (ValueError,))
    try:
        for text in ("[" * 100_000, '{"kind": "x", "a": ' * 20_000, "{" * 50_000, '{"kind": "run_started", "at": "x"}'):
            check("event lines", text)
    finally:
        del PARSERS["event lines"]


FAMILIES: dict[str, Callable[[int], str]] = {
    "{ repeated": lambda n: "{" * n,
    '[" repeated': lambda n: '["' * (n // 2),
    "deep, then text": lambda n: "{" * 60 + "a" * n,
    "open strings": lambda n: '{"a": "' * (n // 7),
    "keys without values": lambda n: "{" + '"k": ' * (n // 5),
    "objects without commas": lambda n: "[" + '{"a": 1 "b": [1 2]}' * (n // 20),
    "python spelling": lambda n: "{" + ", ".join(f"'k{i}': True" for i in range(n // 12)) + ",",
    "comments": lambda n: "/*" * (n // 2),
    "unclosed tags": lambda n: "<data>" * (n // 6),
    "unclosed items": lambda n: "<data>" + "<item>" * (n // 6),
    "distinct tags": lambda n: "<data>" + "".join(f"<t{i}>" for i in range(n // 6)) + "</data>",
    "nested items": lambda n: "<data>" + "<item>" * 90 + "x" * n + "</item>" * 90 + "</data>",
    "many items": lambda n: "<data>" + "<item><item>x</item></item>" * (n // 27) + "</data>",
    "chat markers": lambda n: "[[ ## data ## ]]\n" * (n // 17),
}


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_work_grows_linearly_with_the_text(family: str) -> None:
    """Four times the text is at most about four times the work, for every parser and pathological shape."""
    make = FAMILIES[family]
    for name in ("json.loads", "json adapter", "xml", "chat", "tool arguments (text)", "coerce list"):
        small, large = check(name, make(2_000)), check(name, make(8_000))
        assert large <= 4.6 * small + 2_000, f"{name} on {family}: {small} lines at 2,000 characters, {large} at 8,000"


def test_the_limits_refuse_what_is_too_long_or_too_deep_naming_the_setting() -> None:
    with pytest.raises(ValueError, match=r"nested deeper than 100 levels \(imp\.ParseLimits\.max_depth"):
        loads("[" * 101 + "]" * 101)
    assert loads("[" * 100 + "]" * 100) is not None
    with pytest.raises(ValueError, match=r"over the limit of 4,000,000 \(imp\.ParseLimits\.max_chars"):
        loads_strict(json.dumps("x" * 4_000_000))
    with pytest.raises(imp.AdapterParseError, match="nested deeper than 100"):
        imp.JSONAdapter().parse(SIG, '{"data": ' + "[" * 5000 + "]" * 5000 + "}")
    arguments, problem = decode_arguments("[" * 100_000)
    assert arguments is None and problem is not None and "nested deeper" in problem


def test_ordinary_repairs_still_read_as_before() -> None:
    """What json-repair read for imp (the cases imp's docs promise), read the same."""
    cases = {
        "{'a': 1, 'b': True, 'c': None}": {"a": 1, "b": True, "c": None},
        '{"a": 1,}': {"a": 1},
        '{"a": [1, 2,], }': {"a": [1, 2]},
        '```json\n{"a": 1}\n```': {"a": 1},
        '{"a": 1': {"a": 1},
        '{"a": [1, {"b": "c': {"a": [1, {"b": "c"}]},
        "{'city': 'Paris',": {"city": "Paris"},
        'Sure! {"a": 1} Hope that helps': {"a": 1},
        '{"a": 1, // note\n "b": 2 /* more */}': {"a": 1, "b": 2},
        "{a: 1, b: 'x'}": {"a": 1, "b": "x"},
        '{"a": "x\\"y", "b": "\\u00e9"}': {"a": 'x"y', "b": "é"},
        '{"a": 1 "b": 2}': {"a": 1, "b": 2},
    }
    for text, value in cases.items():
        assert loads(text) == value, text
    for text in ("hello", "", "   ", "'blue'", "42 apples"):
        with pytest.raises(ValueError, match="not JSON"):
            loads(text)


def test_text_too_long_to_repair_is_refused_but_valid_json_of_any_size_is_read() -> None:
    long_valid = json.dumps({"rows": [{"i": i, "text": "x" * 40} for i in range(2_000)]})
    assert len(long_valid) > imp.ParseLimits().max_repair_chars
    assert len(loads(long_valid)["rows"]) == 2_000
    with pytest.raises(ValueError, match=r"over the 8,000 imp repairs \(imp\.ParseLimits\.max_repair_chars"):
        loads(long_valid[:-1] + ",}")
    reply = json.dumps({"answer": "x" * 20_000, "count": 1, "data": [], "obj": {}})
    assert imp.JSONAdapter().parse(SIG, f"Here it is: {reply} Hope that helps.")["count"] == 1  # found, not repaired
    with pytest.raises(imp.AdapterParseError, match="max_repair_chars"):
        imp.JSONAdapter().parse(SIG, '{"answer": "' + "x" * 20_000)  # cut off, too long to repair


def test_a_pattern_from_a_file_cannot_backtrack() -> None:
    """Schema and signature patterns run on a linear-time engine; one it cannot run is refused at declaration."""
    evil = r"(a+)+$"
    field = imp.Signature.load(
        {
            "inputs": [{"name": "q", "kind": "input", "type": "str"}],
            "outputs": [{"name": "a", "kind": "output", "type": "str", "constraints": {"pattern": evil}}],
        }
    ).outputs["a"]
    for size in (30, 3_000):  # Python's re takes minutes at 30 characters
        outcome, lines = counted(lambda t: coerce_text(field, t), "a" * size + "!")
        assert isinstance(outcome, CoercionError) and lines < SETUP_LINES
        schema = {"type": "object", "properties": {"x": {"type": "string", "pattern": evil}}}
        problems = check_arguments(schema, {"x": "a" * size + "!"})
        assert problems and "pattern" in problems[0].message
    with pytest.raises(imp.SignatureError, match="look-around"):
        imp.Signature.load(
            {
                "inputs": [{"name": "q", "kind": "input", "type": "str"}],
                "outputs": [{"name": "a", "kind": "output", "type": "str", "constraints": {"pattern": "(?=a)a"}}],
            }
        )
