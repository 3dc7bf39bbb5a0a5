"""Round trips as a property: what imp writes (a demo, a prompt value, a reply as the system message
asks for it) it reads back equal, for every supported type, in every adapter.

Types and values are generated together: str, int, float, bool, datetime, Literal, Enum, Optional,
unions, lists, dicts, TypedDict, pydantic models (nested, recursive, with aliases). Strings have
no blank ends (every dialect trims a value's ends) and are never `[[ ## ... ## ]]` marker lines.
A string inside a union never reads as one of the union's other members (`"5"` in `int | str` is
the number, in any dialect), so the generated ones are not JSON.
"""

from __future__ import annotations

import datetime as dt
import enum
import itertools
import json
from dataclasses import dataclass
from typing import Any, Literal, Optional, TypedDict, Union

import pydantic
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic_core import to_jsonable_python

import imp
from imp.signature import Field
from imp.values import coerce_text, render_value

ADAPTERS = [imp.ChatAdapter(), imp.JSONAdapter(), imp.XMLAdapter()]
SETTINGS = settings(max_examples=8, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])
_ids = itertools.count()

_ALPHABET = st.characters(
    codec="utf-8", exclude_categories=("Cs", "Cc"), exclude_characters="[]\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"
) | st.just("\n")
# "null" (and "none") is how an absent optional value is written: a choice spelled so would read
# back as None in an optional field, in every text layout, so choices are never spelled so here.
_WORD = st.text(st.sampled_from("abcdefghijklmnopqrstuvwxyz"), min_size=1, max_size=6).filter(
    lambda word: word not in ("null", "none")
)


def _is_json(text: str) -> bool:
    try:
        json.loads(text)
    except ValueError:
        return False
    return True


def _is_plain(text: str) -> bool:
    return text == text.strip() and text not in ("", "null", "None")


TEXT = st.text(_ALPHABET, min_size=1, max_size=24).filter(_is_plain)
UNION_TEXT = TEXT.filter(lambda t: not _is_json(t))


class Node(pydantic.BaseModel):
    """A recursive model."""

    name: str
    children: list[Node] = []


@dataclass(frozen=True)
class Kind:
    """A generated type: its annotation and a strategy for its values."""

    annotation: Any
    values: st.SearchStrategy[Any]
    label: str


def _scalar_kinds(in_union: bool = False) -> st.SearchStrategy[Kind]:
    text = UNION_TEXT if in_union else TEXT
    naive = st.datetimes(min_value=dt.datetime(1900, 1, 1), max_value=dt.datetime(2200, 1, 1))
    aware = naive.map(lambda d: d.replace(tzinfo=dt.UTC))
    return st.one_of(
        st.just(Kind(str, text, "str")),
        st.just(Kind(int, st.integers(-(10**12), 10**12), "int")),
        st.just(Kind(float, st.floats(allow_nan=False, allow_infinity=False), "float")),
        st.just(Kind(bool, st.booleans(), "bool")),
        st.just(Kind(dt.datetime, naive | aware, "datetime")),
        st.lists(_WORD, min_size=1, max_size=4, unique=True).map(_literal),
        st.lists(st.integers(-50, 50), min_size=1, max_size=4, unique=True).map(_literal),
        st.lists(_WORD, min_size=1, max_size=4, unique=True).map(_enum),
    )


def _literal(choices: list[Any]) -> Kind:
    return Kind(Literal[tuple(choices)], st.sampled_from(choices), f"Literal{choices}")


def _enum(values: list[str]) -> Kind:
    # Member names are not values, so a reply may use either; values are what imp writes.
    made = enum.Enum(f"E{next(_ids)}", {f"M_{v.upper()}": v for v in values})  # type: ignore[misc]
    return Kind(made, st.sampled_from(list(made)), f"Enum{values}")


def _optional(kind: Kind) -> Kind:
    return Kind(Optional[kind.annotation], st.none() | kind.values, f"Optional[{kind.label}]")  # noqa: UP045


def _list(kind: Kind) -> Kind:
    return Kind(list[kind.annotation], st.lists(kind.values, max_size=3), f"list[{kind.label}]")


def _dict(kind: Kind, keys: st.SearchStrategy[str]) -> Kind:
    return Kind(dict[str, kind.annotation], st.dictionaries(keys, kind.values, max_size=3), f"dict[str, {kind.label}]")


def _typeddict(kinds: list[Kind]) -> Kind:
    names = [f"k{i}" for i in range(len(kinds))]
    made = TypedDict(f"TD{next(_ids)}", {n: k.annotation for n, k in zip(names, kinds, strict=True)})  # type: ignore[operator]
    values = st.fixed_dictionaries({n: k.values for n, k in zip(names, kinds, strict=True)})
    return Kind(made, values, f"TypedDict{[k.label for k in kinds]}")


def _model(kinds: list[Kind], aliased: bool) -> Kind:
    names = [f"m{i}" for i in range(len(kinds))]
    aliases = [f"{n} alias" if aliased else n for n in names]
    definitions: dict[str, Any] = {
        n: (k.annotation, pydantic.Field(alias=a)) for n, a, k in zip(names, aliases, kinds, strict=True)
    }
    made = pydantic.create_model(f"Model{next(_ids)}", **definitions)
    values = st.fixed_dictionaries({a: k.values for a, k in zip(aliases, kinds, strict=True)}).map(made.model_validate)
    return Kind(made, values, f"Model{[k.label for k in kinds]}{' aliased' if aliased else ''}")


def _nodes() -> st.SearchStrategy[Node]:
    return st.recursive(
        st.builds(Node, name=TEXT, children=st.just([])),
        lambda inner: st.builds(Node, name=TEXT, children=st.lists(inner, max_size=2)),
        max_leaves=5,
    )


def _union(left: Kind, right: Kind) -> Kind:
    return Kind(Union[left.annotation, right.annotation], left.values | right.values, f"{left.label} | {right.label}")  # noqa: UP007


KEYS = _WORD | st.sampled_from(["item", "a b", "1st", "x-y"])


def _families(inner: st.SearchStrategy[Kind]) -> dict[str, st.SearchStrategy[Kind]]:
    """Each family of types, over `inner` for the types they are made of."""
    scalar_pair = st.tuples(_scalar_kinds(in_union=True), _scalar_kinds(in_union=True)).filter(_distinct)
    return {
        "scalar": _scalar_kinds(),
        "optional": inner.map(_optional),
        "list": inner.map(_list),
        "dict": inner.map(lambda k: _dict(k, KEYS)),
        "typeddict": st.lists(inner, min_size=1, max_size=3).map(_typeddict),
        "model": st.lists(inner, min_size=1, max_size=3).map(lambda ks: _model(ks, aliased=False)),
        "aliased model": st.lists(inner, min_size=1, max_size=3).map(lambda ks: _model(ks, aliased=True)),
        "recursive model": st.just(Kind(Node, _nodes(), "Node")),
        "union": scalar_pair.map(lambda p: _union(*p)),
        "union with a list": st.tuples(_scalar_kinds(in_union=True), inner.map(_list)).map(lambda p: _union(*p)),
    }


def _kinds(depth: int = 2) -> st.SearchStrategy[Kind]:
    if depth == 0:
        return _scalar_kinds()
    return st.one_of(*_families(_kinds(depth - 1)).values())


def _reads_as(kind: Kind) -> str:
    """What text a scalar's values are written as: a string, a number, or true/false."""
    if kind.label.startswith("Literal[") and "'" not in kind.label:
        return "number"
    return {"int": "number", "float": "number", "bool": "bool"}.get(kind.label, "string")


def _distinct(pair: tuple[Kind, Kind]) -> bool:
    # Two members whose values are written alike (a str and an Enum of strings, an int and a
    # float) make the value's member a guess: not a round trip any dialect can promise.
    return _reads_as(pair[0]) != _reads_as(pair[1])


FAMILIES = _families(_kinds(1))


@st.composite
def signatures(draw: st.DrawFn, family: str) -> tuple[imp.Signature, dict[str, Any]]:
    """A signature with an output of the family's type and 0-2 more of any type, and values for them."""
    kinds = [draw(FAMILIES[family]), *draw(st.lists(_kinds(1), max_size=2))]
    outputs = [Field(f"out{i}", "output", k.annotation) for i, k in enumerate(kinds)]
    sig = imp.Signature([Field("question", "input")], outputs)
    values = {f.name: draw(k.values) for f, k in zip(outputs, kinds, strict=True)}
    return sig, values


def same(a: Any, b: Any) -> bool:
    """Equal, and of the same kind at every level (1 is not 1.0, True is not 1, "red" is not Colour.RED)."""
    if isinstance(a, pydantic.BaseModel) or isinstance(b, pydantic.BaseModel):
        return type(a) is type(b) and same(dict(a), dict(b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    return type(a) is type(b) and a == b


def _check(parsed: dict[str, Any], values: dict[str, Any], shown: str) -> None:
    for name, value in values.items():
        assert same(parsed[name], value), f"{name}: wrote {value!r}, read {parsed[name]!r}\n--- written ---\n{shown}"


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.name)
@SETTINGS
@given(data=st.data())
def test_a_demo_imp_writes_reads_back_equal(adapter: imp.Adapter, family: str, data: st.DataObject) -> None:
    sig, values = data.draw(signatures(family))
    messages = adapter.format(sig, {"question": "now?"}, demos=[{"question": "then?", **values}])
    written = messages[2]["content"]  # system, the demo's user message, the demo's answer
    assert messages[2]["role"] == "assistant"
    _check(adapter.parse(sig, written), values, written)


@pytest.mark.parametrize("family", FAMILIES)
@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.name)
@SETTINGS
@given(data=st.data())
def test_a_reply_written_as_the_system_message_asks_is_parsed(
    adapter: imp.Adapter, family: str, data: st.DataObject
) -> None:
    sig, values = data.draw(signatures(family))
    system = adapter.format(sig, {"question": "now?"})[0]["content"]
    for name in values:
        assert name in system  # every output is asked for
    reply = _reply_as_asked(adapter, sig, values)
    _check(adapter.parse(sig, reply), values, reply)


def _json_text(value: Any) -> str:
    return json.dumps(to_jsonable_python(value), ensure_ascii=False)


def _reply_as_asked(adapter: imp.Adapter, sig: imp.Signature, values: dict[str, Any]) -> str:
    """A reply a model following the system message writes: its own layout, values as the notes ask."""
    if isinstance(adapter, imp.JSONAdapter):
        body = json.dumps({n: to_jsonable_python(v) for n, v in values.items()}, ensure_ascii=False)
        return f"```json\n{body}\n```"
    parts = []
    for name, value in values.items():
        field = sig.outputs[name]
        # A structured value as the `# note:` asks: JSON that adheres to the schema (XML also takes tags).
        text = _json_text(value) if isinstance(to_jsonable_python(value), dict | list) else render_value(value, field)
        if isinstance(adapter, imp.XMLAdapter):
            text = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            parts.append(f"<{name}>{text}</{name}>")
        else:
            parts.append(f"[[ ## {name} ## ]]\n{text}\n")
    tail = "" if isinstance(adapter, imp.XMLAdapter) else "[[ ## completed ## ]]"
    return "\n".join(parts) + tail


@pytest.mark.parametrize("family", FAMILIES)
@SETTINGS
@given(data=st.data())
def test_a_prompt_value_imp_writes_reads_back_as_the_field_s_type(family: str, data: st.DataObject) -> None:
    kind = data.draw(FAMILIES[family])
    value = data.draw(kind.values)
    field = Field("value", "input", kind.annotation)
    written = render_value(value, field)
    for adapter in ADAPTERS:
        assert written in adapter.format(imp.Signature([field], [Field("answer", "output")]), {"value": value})[-1][
            "content"
        ] or (value is None)
    if value is None:
        return
    assert same(coerce_text(Field("value", "output", kind.annotation), written), value), written


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.name)
@SETTINGS
@given(name=st.sampled_from(["RED", "BLUE"]), quoted=st.booleans())
def test_an_enum_output_given_the_member_name_is_read_as_that_member(
    adapter: imp.Adapter, name: str, quoted: bool
) -> None:
    colour = enum.Enum("Colour", {"RED": "red", "BLUE": "blue"})  # type: ignore[misc]
    sig = imp.Signature([Field("q", "input")], [Field("c", "output", colour)])
    text = f'"{name}"' if quoted else name
    reply = {
        "ChatAdapter": f"[[ ## c ## ]]\n{text}\n\n[[ ## completed ## ]]",
        "JSONAdapter": json.dumps({"c": name}),
        "XMLAdapter": f"<c>{text}</c>",
    }[adapter.name]
    assert adapter.parse(sig, reply)["c"] is colour[name]


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.name)
@SETTINGS
@given(number=st.integers(-(10**9), 10**9))
def test_a_quoted_number_for_an_int_field_is_the_number(adapter: imp.Adapter, number: int) -> None:
    sig = imp.Signature([Field("q", "input")], [Field("n", "output", int)])
    reply = {
        "ChatAdapter": f'[[ ## n ## ]]\n"{number}"\n\n[[ ## completed ## ]]',
        "JSONAdapter": json.dumps({"n": str(number)}),
        "XMLAdapter": f"<n>'{number}'</n>",
    }[adapter.name]
    assert same(adapter.parse(sig, reply)["n"], number)
