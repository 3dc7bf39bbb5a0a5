"""Behaviours DSPy's adapter and Predict tests check, in meaning, for every imp adapter.

DSPy's tests (tests/adapters/test_chat_adapter.py, test_json_adapter.py, test_xml_adapter.py,
tests/predict/test_predict.py) check that a reply is read into typed fields whatever the dialect:
missing fields are an AdapterParseError, unknown sections are ignored, optional and defaulted
outputs may be left out, pydantic models, enums and literals are read back, and a Chat reply that
cannot be parsed is asked again as JSON.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import json
from typing import Any, Literal

import pydantic
import pytest

import imp

ADAPTERS = ["chat", "json", "xml"]


def reply(adapter: str, values: dict[str, Any], *, extra: str = "") -> str:
    """A reply in the adapter's dialect holding `values` (structured values written as JSON)."""

    def text(value: Any) -> str:
        return value if isinstance(value, str) else json.dumps(value)

    if adapter == "json":
        return json.dumps(values)
    if adapter == "xml":
        return extra + "".join(f"<{k}>{text(v)}</{k}>" for k, v in values.items())
    return extra + "".join(f"[[ ## {k} ## ]]\n{text(v)}\n\n" for k, v in values.items()) + "[[ ## completed ## ]]"


def ask(signature: Any, adapter: str, *replies: str, **inputs: Any) -> imp.Prediction:
    program = imp.predict(signature, lm=imp.ScriptedLM(list(replies)), adapter=adapter, json_fallback=False)
    return imp.call_sync(program, **inputs)


class Point(pydantic.BaseModel):
    x: int
    y: int


class Color(enum.Enum):
    RED = "red"
    GREEN = "green"


class Priority(enum.IntEnum):
    LOW = 1
    HIGH = 2


class Typed(imp.Signature):
    """Read everything."""

    text: str = imp.InputField()
    point: Point = imp.OutputField()
    points: list[Point] = imp.OutputField()
    color: Color = imp.OutputField()
    priority: Priority = imp.OutputField()
    choice: Literal[1, 2, 3] = imp.OutputField()
    when: datetime.date = imp.OutputField()
    scores: dict[str, float] = imp.OutputField()


TYPED_VALUES = {
    "point": {"x": 1, "y": 2},
    "points": [{"x": 3, "y": 4}],
    "color": "green",
    "priority": 2,
    "choice": 3,
    "when": "2024-05-01",
    "scores": {"a": 0.5},
}


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_every_adapter_reads_models_enums_literals_dates_and_maps(adapter: str) -> None:
    prediction = ask(Typed, adapter, reply(adapter, TYPED_VALUES), text="x")
    assert prediction.point == Point(x=1, y=2) and prediction.points == [Point(x=3, y=4)]
    assert prediction.color is Color.GREEN and prediction.priority is Priority.HIGH
    assert prediction.choice == 3 and prediction.when == datetime.date(2024, 5, 1)
    assert prediction.scores == {"a": 0.5}


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_an_enum_is_read_by_its_value_or_its_member_name(adapter: str) -> None:
    for written in ("green", "GREEN"):
        prediction = ask(Typed, adapter, reply(adapter, {**TYPED_VALUES, "color": written}), text="x")
        assert prediction.color is Color.GREEN


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_reply_without_the_signature_s_field_is_a_parse_error_naming_it(adapter: str) -> None:
    completion = reply(adapter, {"answer1": "Paris"})
    with pytest.raises(imp.AdapterParseError, match="`answer`") as info:
        ask("question -> answer", adapter, completion, question="Capital of France?")
    assert info.value.completion == completion  # the reply is kept for whoever reads the error


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_reply_missing_one_of_two_fields_names_the_missing_one(adapter: str) -> None:
    with pytest.raises(imp.AdapterParseError, match=r"missing output field.*`answer2`"):
        ask("question -> answer1, answer2", adapter, reply(adapter, {"answer1": "a"}), question="q")


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_sections_and_keys_the_signature_does_not_name_are_ignored(adapter: str) -> None:
    prediction = ask("question -> answer", adapter, reply(adapter, {"notes": "n", "answer": "Paris"}), question="q")
    assert dict(prediction) == {"answer": "Paris"}


@pytest.mark.parametrize("adapter", ["chat", "xml"])
def test_text_before_the_first_section_is_ignored(adapter: str) -> None:
    completion = reply(adapter, {"answer": "Paris"}, extra="Sure, here is my answer.\n")
    assert ask("question -> answer", adapter, completion, question="q").answer == "Paris"


def test_chat_keeps_the_first_of_two_sections_of_one_field() -> None:
    completion = "[[ ## answer ## ]]\nParis\n\n[[ ## answer ## ]]\nLyon\n\n[[ ## completed ## ]]"
    assert ask("question -> answer", "chat", completion, question="q").answer == "Paris"


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_optional_and_defaulted_outputs_may_be_left_out(adapter: str) -> None:
    class Maybe(imp.Signature):
        question: str = imp.InputField()
        answer: str = imp.OutputField()
        source: str | None = imp.OutputField()
        pages: int = imp.OutputField(default=5)

    prediction = ask(Maybe, adapter, reply(adapter, {"answer": "Paris"}), question="q")
    assert (prediction.answer, prediction.source, prediction.pages) == ("Paris", None, 5)


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_a_value_that_does_not_fit_names_the_field_and_the_value(adapter: str) -> None:
    with pytest.raises(imp.AdapterParseError, match=r"`n`.*forty"):
        ask("question -> n: int", adapter, reply(adapter, {"n": "forty"}), question="q")


def test_a_chat_reply_that_cannot_be_parsed_is_asked_again_as_json() -> None:
    lm = imp.ScriptedLM(["I think it is Paris.", '{"answer": "Paris"}'])
    prediction = imp.call_sync(imp.predict("question -> answer", lm=lm), question="Capital of France?")
    assert prediction.answer == "Paris" and prediction.metadata.json_fallback
    assert len(lm.requests) == 2
    assert "Respond with a JSON object" in str(lm.requests[1].messages[-1]["content"])


@dataclasses.dataclass
class Box:
    width: int


class Inputs(imp.Signature):
    point: Point = imp.InputField()
    box: Box = imp.InputField()
    color: Color = imp.InputField()
    when: datetime.datetime = imp.InputField()
    answer: str = imp.OutputField()


@pytest.mark.parametrize("adapter", ADAPTERS)
def test_structured_inputs_are_written_as_compact_json_and_iso_dates(adapter: str) -> None:
    inputs = {"point": Point(x=1, y=2), "box": Box(3), "color": Color.RED, "when": datetime.datetime(2024, 1, 1)}
    content = str(imp.predict(Inputs, lm=imp.ScriptedLM([]), adapter=adapter).render(inputs).messages[-1]["content"])
    for written in ('{"x": 1, "y": 2}', '{"width": 3}', "red", "2024-01-01T00:00:00"):
        assert written in content


def test_inputs_given_as_plain_data_are_validated_into_the_field_types() -> None:
    program = imp.predict(Inputs, lm=imp.ScriptedLM([]))
    data = {"point": {"x": 1, "y": 2}, "box": {"width": 3}, "color": "red", "when": "2024-01-01T00:00:00"}
    assert '{"x": 1, "y": 2}' in str(program.render(data).messages[-1]["content"])
    with pytest.raises(imp.InvalidInputError, match="input field `point`"):
        program.render({**data, "point": {"x": "a", "y": 2}})
