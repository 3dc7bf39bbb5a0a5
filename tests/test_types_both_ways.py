"""Each class of parsing defect, as one named test: unions with str, undeclared annotations, XML's
own output, Enum names, quoted numbers, and DSPy's wording of the hints."""

import datetime as dt
import enum
import json
from typing import Any, Literal, Optional, TypedDict

import pydantic
import pytest

import imp
from imp.signature import Field
from imp.values import coerce_text, coerce_value, value_note

ADAPTERS = [imp.ChatAdapter(), imp.JSONAdapter(), imp.XMLAdapter()]


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Person(pydantic.BaseModel):
    full_name: str = pydantic.Field(alias="full name")
    age: int


class Box(TypedDict):
    label: str
    sizes: list[int]


def _out(annotation: Any) -> Field:
    return Field("f", "output", annotation)


def _reply(adapter: imp.Adapter, text: str) -> str:
    if isinstance(adapter, imp.JSONAdapter):
        return json.dumps({"f": text})
    if isinstance(adapter, imp.XMLAdapter):
        return f"<f>{text}</f>"
    return f"[[ ## f ## ]]\n{text}\n\n[[ ## completed ## ]]"


# --- a union that includes str keeps the model's text ---------------------------------------


@pytest.mark.parametrize("annotation", [int | str, str | int, float | str | None, list[int] | str, bool | str])
@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.name)
def test_a_union_with_str_keeps_the_text(adapter: imp.Adapter, annotation: Any) -> None:
    sig = imp.Signature([Field("q", "input")], [_out(annotation)])
    assert adapter.parse(sig, _reply(adapter, "the blue one"))["f"] == "the blue one"


@pytest.mark.parametrize(("annotation", "text", "value"), [(int | str, "5", 5), (list[int] | str, "[1, 2]", [1, 2])])
def test_a_union_reads_the_other_member_when_the_text_is_one(annotation: Any, text: str, value: Any) -> None:
    assert coerce_text(_out(annotation), text) == value


# --- a class-form field without an annotation is a string field -----------------------------


def test_a_class_field_without_an_annotation_is_a_string_field_in_its_place() -> None:
    class Sig(imp.Signature):
        """Answer."""

        context = imp.InputField(desc="what we know")
        question: int = imp.InputField()
        answer = imp.OutputField()
        score: float = imp.OutputField()

    assert list(Sig.inputs) == ["context", "question"] and list(Sig.outputs) == ["answer", "score"]
    assert Sig.inputs["context"].annotation is str and Sig.inputs["context"].desc == "what we know"
    assert Sig.outputs["answer"].annotation is str
    pred = imp.call_sync(
        imp.predict(Sig, lm=imp.ScriptedLM(["[[ ## answer ## ]]\nyes\n\n[[ ## score ## ]]\n0.5"])),
        {"context": "c", "question": 1},
    )
    assert (pred.answer, pred.score) == ("yes", 0.5)


def test_an_annotation_without_a_field_declaration_is_still_refused() -> None:
    with pytest.raises(imp.SignatureError, match=r"needs `= imp\.InputField"):

        class Sig(imp.Signature):
            question: str
            answer: str = imp.OutputField()


# --- XML reads back what it writes ------------------------------------------------------------


@pytest.mark.parametrize("empty", ["<f />", "<f/>", "<f></f>", "<f>\n</f>", "<f>[]</f>"])
def test_xml_reads_an_empty_list_in_every_spelling(empty: str) -> None:
    sig = imp.Signature([Field("q", "input")], [_out(list[str])])
    assert imp.XMLAdapter().parse(sig, empty) == {"f": []}


def test_xml_reads_nested_objects_with_empty_children_and_typed_dicts() -> None:
    class Holder(pydantic.BaseModel):
        boxes: list[Box]
        tags: dict[str, list[int]]

    sig = imp.Signature([Field("q", "input")], [Field("h", "output", Holder), Field("b", "output", Box)])
    value = {
        "h": Holder(boxes=[{"label": "x", "sizes": []}], tags={"item": [], "k": [1]}),
        "b": {"label": "", "sizes": [2]},
    }
    written = imp.XMLAdapter().default_outputs(sig, value, "")
    assert imp.XMLAdapter().parse(sig, written) == value
    reply = "<h><boxes><item><label>y</label><sizes/></item></boxes><tags></tags></h><b><label>z</label><sizes><item>3</item></sizes></b>"
    assert imp.XMLAdapter().parse(sig, reply) == {
        "h": Holder(boxes=[{"label": "y", "sizes": []}], tags={}),
        "b": {"label": "z", "sizes": [3]},
    }


def test_xml_never_writes_an_alias_with_a_space_as_a_tag() -> None:
    sig = imp.Signature([Field("q", "input")], [Field("p", "output", list[Person])])
    people = [Person.model_validate({"full name": "Ada Lovelace", "age": 36})]
    written = imp.XMLAdapter().default_outputs(sig, {"p": people}, "")
    assert "<full name>" not in written and "<full_name>Ada Lovelace</full_name>" in written  # as DSPy writes it
    assert imp.XMLAdapter().parse(sig, written) == {"p": people}


# --- Enum names and quoted numbers -------------------------------------------------------------


@pytest.mark.parametrize("adapter", ADAPTERS, ids=lambda a: a.name)
def test_an_enum_output_given_the_member_name(adapter: imp.Adapter) -> None:
    sig = imp.Signature([Field("q", "input")], [_out(Colour)])
    assert adapter.parse(sig, _reply(adapter, "BLUE"))["f"] is Colour.BLUE
    assert adapter.parse(sig, _reply(adapter, "blue"))["f"] is Colour.BLUE
    with pytest.raises(imp.AdapterParseError):
        adapter.parse(sig, _reply(adapter, "Blue"))


@pytest.mark.parametrize(
    ("annotation", "text", "value"),
    [(int, '"42"', 42), (int, "'-7'", -7), (float, '"2.5"', 2.5), (bool, '"true"', True), (Optional[int], '"3"', 3)],  # noqa: UP045
)
def test_a_quoted_scalar_is_read_as_its_type(annotation: Any, text: str, value: Any) -> None:
    assert coerce_text(_out(annotation), text) == value
    assert coerce_value(_out(annotation), text.strip("'\"")) == value


# --- DSPy's wording of the hints ----------------------------------------------------------------


class Inner(pydantic.BaseModel):
    b: int
    a: str


@pytest.mark.parametrize(
    ("annotation", "note"),
    [
        (str, ""),
        (bool, "must be True or False"),
        (int, "must be a single int value"),
        (float, "must be a single float value"),
        (Colour, "must be one of: red; blue"),
        (Literal["x", "y"], "must exactly match (no extra characters) one of: x; y"),
        (list[str], 'must adhere to the JSON schema: {"type": "array", "items": {"type": "string"}}'),
        (dt.datetime, 'must adhere to the JSON schema: {"type": "string", "format": "date-time"}'),
        (int | None, 'must adhere to the JSON schema: {"anyOf": [{"type": "integer"}, {"type": "null"}]}'),
        (
            Inner,
            'must adhere to the JSON schema: {"type": "object", "properties": {"a": {"type": "string", "title": "A"}, '
            '"b": {"type": "integer", "title": "B"}}, "required": ["b", "a"], "title": "Inner"}',
        ),
    ],
)
def test_the_note_on_each_type_is_dspy_s_with_type_first_at_every_level(annotation: Any, note: str) -> None:
    assert value_note(_out(annotation)) == note
    assert value_note(Field("f", "input", annotation)) == ""


def test_constraints_are_listed_in_dspy_s_words_in_the_declared_order() -> None:
    class Rated(imp.Signature):
        review: str = imp.InputField(max_length=500, min_length=1)
        stars: float = imp.OutputField(le=5, multiple_of=0.5, gt=0)

    system = imp.ChatAdapter().format(Rated, {"review": "ok"})[0]["content"]
    assert "Constraints: maximum length: 500, minimum length: 1\n" in system
    assert "Constraints: less than or equal to: 5, a multiple of the given number: 0.5, greater than: 0\n" in system


def test_a_union_reads_a_literal_choice_as_itself_and_a_bool_as_a_bool() -> None:
    from typing import Literal

    from imp.signature import Field
    from imp.values import coerce_text

    choice = Field("x", "output", int | Literal["true"])
    assert coerce_text(choice, "true") == "true" and coerce_text(choice, "5") == 5
    flag = Field("x", "output", int | bool)
    assert coerce_text(flag, "true") is True and coerce_text(flag, "3") == 3
