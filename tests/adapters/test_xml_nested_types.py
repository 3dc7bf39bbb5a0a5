"""Nested types as nested XML tags, as DSPy's XML adapter tests expect (tests/adapters/test_xml_adapter.py,
DSPy 3.3): a pydantic model whose aliases are not XML names is written and read by its field names,
and a TypedDict with a nested model and a list is read back from nested tags, leniently; then the
same for the class of nested types (models, TypedDicts, dataclasses, lists, optionals, unions,
recursion), written by imp and read back equal, and as a program's reply."""

from __future__ import annotations

import dataclasses
import re
from typing import Any, TypedDict

import pydantic
import pytest

import imp
from imp.signature import Field

XML = imp.XMLAdapter()


def flat(xml: str) -> str:
    """The tags without the whitespace between them (imp indents; DSPy writes one line)."""
    return re.sub(r">\s+<", "><", xml.strip())


def out(name: str, annotation: Any) -> Field:
    return Field(name, "output", annotation)


def signature(*outputs: Field) -> imp.Signature:
    return imp.Signature([Field("question", "input")], list(outputs))


# --- DSPy's case 1: a model whose aliases are not XML names --------------------------------------


class Address(pydantic.BaseModel):
    postal_code: str = pydantic.Field(alias="postal code")
    country_code: str = pydantic.Field(alias="country-code")


ADDRESS = signature(out("address", Address))


def test_a_model_with_non_xml_aliases_is_written_as_tags_by_field_name() -> None:
    address = Address.model_validate({"postal code": "94305", "country-code": "US"})
    written = XML.reply_text(ADDRESS, {"address": address})
    assert flat(written) == "<address><postal_code>94305</postal_code><country_code>US</country_code></address>"
    assert XML.parse(ADDRESS, written) == {"address": address}


def test_the_system_message_shows_the_nested_tags_by_field_name() -> None:
    system, user = XML.format(ADDRESS, {"question": "Where?"})
    layout = "<address>\n<postal_code>...</postal_code><country_code>...</country_code>"
    assert layout in system["content"]
    assert '"postal_code"' in system["content"] and '"postal code"' not in system["content"]
    assert "<address><postal_code>...</postal_code><country_code>...</country_code></address>" in user["content"]


@pytest.mark.parametrize(
    "reply",
    [
        "<address><postal_code>94305</postal_code><country_code>US</country_code></address>",
        "<address>\n  <postal_code>94305</postal_code>\n  <country-code>US</country-code>\n</address>",  # an XML alias
        '<address>{"postal_code": "94305", "country_code": "US"}</address>',  # JSON by field names, as the note
        '<address>{"postal code": "94305", "country-code": "US"}</address>',  # JSON by alias
    ],
)
def test_a_model_with_aliases_is_read_back_whichever_way_the_model_wrote_it(reply: str) -> None:
    assert XML.parse(ADDRESS, reply) == {
        "address": Address.model_validate({"postal code": "94305", "country-code": "US"})
    }


# --- DSPy's case 2: a TypedDict with a nested model and a list --------------------------------


class City(TypedDict):
    city: str


class Order(TypedDict):
    order_id: int
    address: City | None
    labels: list[str]


ORDERS = signature(out("order", Order), out("orders", list[Order]))


def test_a_typed_dict_with_a_nested_object_and_a_list_shows_its_tags() -> None:
    order = "<order_id>...</order_id><address><city>...</city></address><labels><item>...</item></labels>"
    system, user = XML.format(ORDERS, {"question": "Which?"})
    assert f"<order>\n{order}" in system["content"]
    assert f"<orders>\n<item>{order}</item>" in system["content"]
    assert f"<order>{order}</order> <orders><item>{order}</item></orders>" in user["content"]


def test_a_typed_dict_with_a_nested_object_and_a_list_is_read_back_from_nested_tags() -> None:
    reply = (
        "<order><order_id>1</order_id><address><city>London</city></address><labels>new</labels></order>"
        "<orders><order_id>2</order_id><address><city>Paris</city></address><labels>paid</labels></orders>"
    )
    assert XML.parse(ORDERS, reply) == {
        "order": {"order_id": 1, "address": {"city": "London"}, "labels": ["new"]},
        "orders": [{"order_id": 2, "address": {"city": "Paris"}, "labels": ["paid"]}],
    }


def test_a_typed_dict_is_read_back_as_imp_writes_it() -> None:
    values = {
        "order": {"order_id": 1, "address": None, "labels": ["a", "b"]},
        "orders": [
            {"order_id": 2, "address": {"city": "Paris"}, "labels": []},
            {"order_id": 3, "address": {"city": "Lyon"}, "labels": ["x"]},
        ],
    }
    assert XML.parse(ORDERS, XML.reply_text(ORDERS, values)) == values


# --- the class: every nested kind, both ways -------------------------------------------------


class Tag(pydantic.BaseModel):
    label: str = pydantic.Field(alias="the label")
    weight: float = 1.0


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Shape(pydantic.BaseModel):
    name: str
    points: list[Point]
    tags: list[Tag]
    home: Address | None = None


class Node(pydantic.BaseModel):
    value: str
    children: list[Node]


class Holder(TypedDict):
    shape: Shape
    counts: dict[str, list[int]]


ADDR = Address.model_validate({"postal code": "1", "country-code": "FR"})
NESTED_VALUES: dict[str, tuple[Any, Any]] = {
    "a model with a list of dataclasses and of aliased models": (
        Shape,
        Shape(name="tri", points=[Point(0, 0), Point(1, 2)], tags=[Tag.model_validate({"the label": "big"})]),
    ),
    "an optional nested model, given": (Shape, Shape(name="s", points=[], tags=[], home=ADDR)),
    "a list of aliased models": (list[Address], [ADDR, ADDR]),
    "a typed dict holding a model and a dict of lists": (
        Holder,
        {"shape": Shape(name="s", points=[Point(3, 4)], tags=[]), "counts": {"a": [1, 2], "b": []}},
    ),
    "a recursive model": (Node, Node(value="root", children=[Node(value="leaf", children=[])])),
    "an optional model, absent": (Address | None, None),
    "a dataclass": (Point, Point(5, 6)),
    "a list of lists": (list[list[int]], [[1, 2], [], [3]]),
}


@pytest.mark.parametrize("kind", list(NESTED_VALUES))
def test_every_nested_kind_imp_writes_is_read_back_equal(kind: str) -> None:
    annotation, value = NESTED_VALUES[kind]
    sig = signature(out("value", annotation), out("note", str))
    written = XML.reply_text(sig, {"value": value, "note": "done"})
    assert not re.search(r"<[^>/]*\s[^>]*>", written)  # no tag that is not an XML name
    assert XML.parse(sig, written) == {"value": value, "note": "done"}


@pytest.mark.parametrize("kind", list(NESTED_VALUES))
def test_every_nested_kind_is_read_from_a_programs_reply(kind: str) -> None:
    annotation, value = NESTED_VALUES[kind]
    sig = signature(out("value", annotation))
    lm = imp.ScriptedLM([XML.reply_text(sig, {"value": value})])
    prediction = imp.call_sync(imp.predict(sig, lm=lm, adapter=XML), question="?")
    assert prediction.value == value and lm.requests  # read by the XML adapter, no fallback
    assert prediction.metadata.json_fallback is False


def test_a_list_members_repeated_tags_add_up_as_dspy_reads_them() -> None:
    sig = signature(out("counts", dict[str, list[int]]), out("shape", Shape))
    reply = (
        "<counts><first>3</first><first>4</first><second>5</second></counts>"
        "<shape><name>n</name><points><x>1</x><y>2</y></points><tags /></shape>"
    )
    assert XML.parse(sig, reply) == {
        "counts": {"first": [3, 4], "second": [5]},
        "shape": Shape(name="n", points=[Point(1, 2)], tags=[]),
    }


def test_an_empty_element_of_an_optional_object_or_list_is_none() -> None:
    sig = signature(out("home", Address | None), out("labels", list[str] | None), out("city", City | None))
    assert XML.parse(sig, "<home /><labels></labels><city/>") == {"home": None, "labels": None, "city": None}


class First(pydantic.BaseModel):
    count: int


class Second(pydantic.BaseModel):
    labels: list[str]


class NumberList(pydantic.BaseModel):
    value: list[int]


class TextValue(pydantic.BaseModel):
    value: str


class ScalarLabels(pydantic.BaseModel):
    labels: str


class ListLabels(pydantic.BaseModel):
    labels: list[str]


class Envelope(pydantic.BaseModel):
    choice: ScalarLabels | ListLabels


def test_a_unions_member_is_the_one_whose_tags_fit() -> None:
    sig = signature(
        out("model", First | Second),
        out("tied", NumberList | TextValue),
        out("nested", Envelope),
        out("text_first", str | ListLabels),
    )
    reply = (
        "<model><labels>one</labels><labels>two</labels></model>"
        "<tied><value>later-branch-text</value></tied>"
        "<nested><choice><labels>first</labels><labels>second</labels></choice></nested>"
        "<text_first><labels>one</labels><labels>two</labels></text_first>"
    )
    assert XML.parse(sig, reply) == {
        "model": Second(labels=["one", "two"]),
        "tied": TextValue(value="later-branch-text"),
        "nested": Envelope(choice=ListLabels(labels=["first", "second"])),
        "text_first": ListLabels(labels=["one", "two"]),
    }


def test_a_recursive_models_layout_stops_at_the_recursion() -> None:
    system, _ = XML.format(signature(out("root", Node)), {"question": "?"})
    assert "<root>\n<value>...</value><children><item>...</item></children>" in system["content"]


# --- character references ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("written", "read"),
    [
        ("./data.json&#34;", './data.json"'),  # as SmolLM2 writes it after an HTML-escaped prompt
        ("it&#39;s &#x22;fine&#x22;", 'it\'s "fine"'),
        ("&amp;#34; stays", "&#34; stays"),  # an escaped reference is text, decoded once
        ("&#0;&#xD800;&#1114112;", "&#0;&#xD800;&#1114112;"),  # not XML characters: kept as written
    ],
)
def test_character_references_are_read_as_xml_defines_them(written: str, read: str) -> None:
    sig = signature(out("path", str), out("tags", list[str]))
    parsed = XML.parse(sig, f"<path>{written}</path><tags><item>{written}</item></tags>")
    assert parsed == {"path": read, "tags": [read]}


def test_text_that_looks_like_a_reference_round_trips() -> None:
    sig = signature(out("note", str))
    for text in ["&#34;", "a &#x41; b", "&amp;"]:
        assert XML.parse(sig, XML.reply_text(sig, {"note": text})) == {"note": text}


def test_list_items_under_a_tag_of_the_models_own_choosing_are_items() -> None:
    """`<item>` is what imp asks for; a model that names its items otherwise still gives a list."""
    sig = signature(out("tags", list[str]), out("orders", list[Order]))
    reply = (
        "<tags><tag>a</tag><tag>b</tag></tags>"
        "<orders><order><order_id>1</order_id><address /><labels /></order>"
        "<order><order_id>2</order_id><address><city>Oslo</city></address><labels>x</labels></order></orders>"
    )
    assert XML.parse(sig, reply) == {
        "tags": ["a", "b"],
        "orders": [
            {"order_id": 1, "address": None, "labels": []},
            {"order_id": 2, "address": {"city": "Oslo"}, "labels": ["x"]},
        ],
    }
