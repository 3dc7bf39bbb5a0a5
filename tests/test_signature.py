"""Signatures: the string forms, the class form, errors with positions, immutability, dump/load."""

import datetime as dt
from typing import Any, Literal, Optional

import pydantic
import pytest

import imp
from imp.signature import MISSING


def test_plain_words_and_python_spelling_give_the_same_types() -> None:
    plain = imp.signature(
        "a: string, b: integer, c: float, d: boolean, e: datetime, f: object, g: array[integer], h: enum[x,y] -> out"
    )
    python = imp.signature(
        "a: str, b: int, c: float, d: bool, e: datetime, f: dict, g: list[int], h: Literal['x', 'y'] -> out"
    )
    assert [f.annotation for f in plain.inputs.values()] == [f.annotation for f in python.inputs.values()]
    assert plain.inputs["g"].annotation == list[int]
    assert plain.inputs["h"].annotation == Literal["x", "y"]
    assert plain.inputs["e"].annotation is dt.datetime


def test_enum_with_bars_number_optional_and_union_spellings() -> None:
    sig = imp.signature("q -> a: enum[atlas|harbor], n: number, o: Optional[int], u: str | None, m: dict[str, int]")
    assert sig.outputs["a"].annotation == Literal["atlas", "harbor"]
    assert sig.outputs["n"].annotation is float
    assert sig.outputs["o"].optional and sig.outputs["u"].optional
    assert not sig.outputs["a"].optional
    assert sig.outputs["m"].annotation == dict[str, int]


def test_untyped_fields_are_strings_and_descriptions_are_kept() -> None:
    sig = imp.signature('ticket, context -> team: enum[atlas,harbor] "the owning squad", contact')
    assert list(sig.inputs) == ["ticket", "context"]
    assert sig.inputs["ticket"].annotation is str
    assert sig.outputs["team"].desc == "the owning squad"
    assert sig.outputs["contact"].annotation is str


def test_default_instructions_name_the_fields() -> None:
    sig = imp.signature("question, context -> answer")
    assert sig.instructions == "Given the fields `question`, `context`, produce the fields `answer`."
    assert imp.signature("q -> a", "Be brief.").instructions == "Be brief."


def test_no_arrow_is_an_error_with_a_caret() -> None:
    with pytest.raises(imp.SignatureError) as info:
        imp.signature("question answer")
    message = str(info.value)
    assert "exactly one `->`" in message
    assert "question answer\n" in message and message.rstrip().endswith("^")


def test_two_arrows_point_at_the_second() -> None:
    with pytest.raises(imp.SignatureError) as info:
        imp.signature("a -> b -> c")
    assert info.value.position == 7
    assert "  a -> b -> c\n         ^" in str(info.value)


def test_unknown_type_names_position_and_suggests_list() -> None:
    with pytest.raises(imp.SignatureError) as info:
        imp.signature("q -> a: lst[str]")
    err = info.value
    assert err.position == 8
    assert "unknown type `lst`" in str(err)
    assert "did you mean `list[str]`?" in str(err)
    assert "  q -> a: lst[str]\n          ^" in str(err)


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ("q -> q", "distinct names"),
        ("q, q -> a", "declared twice"),
        ("q -> a, a", "declared twice"),
        ("-> a", "at least one input"),
        ("q ->", "at least one output"),
        ("q -> a: enum[]", "enum value is empty"),
        ("q -> a: list[int", "expected `]`"),
        ("q -> 1a", "expected `name`"),
        ('q -> a: str "unclosed', "never closed"),
    ],
)
def test_malformed_signatures_say_what_is_wrong(spec: str, needle: str) -> None:
    with pytest.raises(imp.SignatureError) as info:
        imp.signature(spec)
    assert needle in str(info.value)
    assert info.value.position is not None


class Ticket(pydantic.BaseModel):
    title: str
    priority: int = 3


class Escalation(imp.Signature):
    """Find the squad that owns the ticket and its on-call engineer."""

    ticket: str = imp.InputField()
    team: Literal["atlas", "harbor", "beacon", "quill"] = imp.OutputField(desc="atlas owns money")
    contact: str = imp.OutputField()
    urgency: int = imp.OutputField(ge=1, le=4, default=2)
    related: Optional[Ticket] = imp.OutputField()  # noqa: UP045 - the spelling users write


def test_class_form_is_a_signature_value() -> None:
    assert isinstance(Escalation, imp.Signature)
    assert Escalation.instructions == "Find the squad that owns the ticket and its on-call engineer."
    assert list(Escalation.inputs) == ["ticket"]
    assert list(Escalation.outputs) == ["team", "contact", "urgency", "related"]
    assert Escalation.outputs["team"].desc == "atlas owns money"
    assert dict(Escalation.outputs["urgency"].constraints) == {"ge": 1, "le": 4}
    assert Escalation.outputs["urgency"].default == 2
    assert Escalation.outputs["related"].optional
    assert Escalation.outputs["contact"].default is MISSING


def test_class_form_needs_field_markers() -> None:
    with pytest.raises(imp.SignatureError, match="InputField"):

        class Bad(imp.Signature):
            q: str


def test_signatures_are_immutable_and_derive_new_values() -> None:
    sig = imp.signature("q -> a")
    with pytest.raises(AttributeError):
        sig.instructions = "x"  # type: ignore[misc]
    with pytest.raises(TypeError):
        sig.inputs["z"] = sig.inputs["q"]  # type: ignore[index]
    other = sig.with_instructions("New.")
    assert other.instructions == "New." and sig.instructions != "New."
    cot = sig.prepend_output("reasoning")
    assert list(cot.outputs) == ["reasoning", "a"] and list(sig.outputs) == ["a"]
    assert sig.metadata == {}
    with pytest.raises(TypeError):
        sig.metadata["k"] = 1  # type: ignore[index]
    assert sig.with_metadata(text_field="a").metadata["text_field"] == "a"


def test_json_schema_describes_the_outputs() -> None:
    schema = Escalation.json_schema()
    assert schema["type"] == "object"
    assert schema["additionalProperties"] is False
    assert schema["properties"]["team"]["enum"] == ["atlas", "harbor", "beacon", "quill"]
    assert schema["properties"]["urgency"]["minimum"] == 1
    assert set(schema["required"]) == {"team", "contact"}
    assert "Ticket" in schema["$defs"]


def test_dump_and_load_round_trip() -> None:
    sig = imp.signature('q: str, n: int -> a: enum[x,y] "pick one", entries: list[str], o: int | None', "Do it.")
    data = sig.dump()
    again = imp.Signature.load(data)
    assert again == sig
    assert data["outputs"][0]["type"] == "Literal['x', 'y']"
    loaded = imp.Signature.load(Escalation.dump(), types={"Ticket": Ticket})
    assert loaded.outputs["related"].optional
    assert loaded == Escalation


def test_history_inputs_are_recognised() -> None:
    sig = imp.signature("question, history: History -> answer")
    assert sig.history_field == "history"
    assert sig.inputs["history"].annotation is imp.History


def test_field_annotation_any() -> None:
    sig = imp.signature("q: Any -> a")
    assert sig.inputs["q"].annotation is Any
