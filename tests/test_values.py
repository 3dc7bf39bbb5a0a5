"""values.py: coercing reply text into each field type, and writing values into prompts."""

import datetime as dt
import enum
from typing import Any, Literal

import pydantic
import pytest

import imp
from imp.signature import Field
from imp.values import CoercionError, coerce_text, coerce_value, render_value, type_name


def out(annotation: Any, **kw: Any) -> Field:
    return Field("f", "output", annotation, **kw)


def test_integers_and_floats_from_text() -> None:
    assert coerce_text(out(int), " 42 ") == 42
    assert coerce_text(out(int), "-7") == -7
    assert coerce_text(out(float), " 2.5") == 2.5
    assert coerce_text(out(float), "3") == 3.0
    with pytest.raises(CoercionError, match="expected an integer"):
        coerce_text(out(int), "forty-two")
    with pytest.raises(CoercionError):
        coerce_text(out(int), "4.2")
    with pytest.raises(CoercionError, match="expected a number"):
        coerce_text(out(float), "lots")


@pytest.mark.parametrize(
    ("text", "value"), [("true", True), ("Yes", True), ("1", True), ("FALSE", False), ("no", False), (" 0 ", False)]
)
def test_booleans_in_any_case(text: str, value: bool) -> None:
    assert coerce_text(out(bool), text) is value


def test_boolean_refuses_other_words() -> None:
    with pytest.raises(CoercionError, match="true or false"):
        coerce_text(out(bool), "maybe")


class Color(enum.Enum):
    RED = "red"
    BLUE = "blue"


def test_literal_accepts_one_layer_of_quotes_and_a_literal_wrapper() -> None:
    team = out(Literal["atlas", "harbor"])
    assert coerce_text(team, "atlas") == "atlas"
    assert coerce_text(team, "'atlas'") == "atlas"
    assert coerce_text(team, '"harbor"') == "harbor"
    assert coerce_text(team, "Literal['atlas']") == "atlas"
    with pytest.raises(CoercionError, match="one of: atlas, harbor"):
        coerce_text(team, "Atlas")
    with pytest.raises(CoercionError):
        coerce_text(team, "''atlas''")


def test_enum_classes_by_value_then_by_member_name() -> None:
    assert coerce_text(out(Color), "red") is Color.RED
    assert coerce_text(out(Color), "'blue'") is Color.BLUE
    # A member's name is read as that member (as DSPy reads it); anything else is refused.
    assert coerce_text(out(Color), "RED") is Color.RED
    assert coerce_text(out(Color), '"BLUE"') is Color.BLUE
    with pytest.raises(CoercionError):
        coerce_text(out(Color), "Red")
    with pytest.raises(CoercionError):
        coerce_text(out(Color), "GREEN")


def test_lists_and_objects_through_json_repair() -> None:
    assert coerce_text(out(list[str]), '["a", "b"]') == ["a", "b"]
    assert coerce_text(out(list[int]), "```json\n[1, 2, 3]\n```") == [1, 2, 3]
    assert coerce_text(out(dict[str, Any]), "{'a': 1, 'b': 'x'}") == {"a": 1, "b": "x"}
    assert coerce_text(out(dict[str, int]), '{"a": 1,}') == {"a": 1}
    with pytest.raises(CoercionError):
        coerce_text(out(list[int]), '["a", "b"]')


class Ticket(pydantic.BaseModel):
    title: str
    tags: list[str] = []


def test_nested_models() -> None:
    ticket = coerce_text(out(Ticket), '{"title": "Double charge", "tags": ["money"]}')
    assert ticket == Ticket(title="Double charge", tags=["money"])
    with pytest.raises(CoercionError, match="title"):
        coerce_text(out(Ticket), '{"tags": []}')


def test_datetimes_in_iso_8601() -> None:
    assert coerce_text(out(dt.datetime), "2026-11-30T12:00:00Z") == dt.datetime(2026, 11, 30, 12, tzinfo=dt.UTC)
    with pytest.raises(CoercionError, match="ISO 8601"):
        coerce_text(out(dt.datetime), "yesterday")


@pytest.mark.parametrize(
    "annotation", [int | None, list[str] | None, Literal["a", "b"] | None, bool | None, Ticket | None]
)
def test_null_and_none_mean_none_for_optional_fields(annotation: Any) -> None:
    assert coerce_text(out(annotation), "null") is None
    assert coerce_text(out(annotation), "None") is None


def test_null_is_text_for_a_required_string() -> None:
    assert coerce_text(out(str), "null") == "null"
    with pytest.raises(CoercionError):
        coerce_text(out(int), "null")


def test_constraints_are_checked() -> None:
    bounded = out(int, constraints={"ge": 1, "le": 4})
    assert coerce_text(bounded, "3") == 3
    with pytest.raises(CoercionError, match="less than or equal to 4"):
        coerce_text(bounded, "9")
    with pytest.raises(CoercionError):
        coerce_text(out(str, constraints={"pattern": r"^\d+$"}), "abc")


def test_values_given_directly() -> None:
    assert coerce_value(out(int), "12") == 12
    assert coerce_value(out(str), ["a", "b"]) == '["a", "b"]'
    assert coerce_value(out(str), 5) == "5"
    assert coerce_value(out(list[int]), [1, 2]) == [1, 2]
    with pytest.raises(CoercionError, match="must not be null"):
        coerce_value(out(int), None)


def test_a_bad_value_is_an_adapter_parse_error_naming_field_value_and_reason() -> None:
    sig = imp.signature("q -> n: int")
    for adapter, reply in [
        (imp.ChatAdapter(), "[[ ## n ## ]]\nforty-two"),
        (imp.JSONAdapter(), '{"n": "forty-two"}'),
        (imp.XMLAdapter(), "<n>forty-two</n>"),
    ]:
        with pytest.raises(imp.AdapterParseError) as info:
            adapter.parse(sig, reply)
        err = info.value
        assert err.fields == ("n",)
        assert err.value == "forty-two"
        assert err.reason == "expected an integer"
        assert "`n`" in str(err) and "forty-two" in str(err)
        assert not isinstance(err.__cause__, (pydantic.ValidationError, ValueError))


def test_values_in_prompts() -> None:
    assert render_value("plain text") == "plain text"
    assert render_value(None) == "null"
    assert render_value(True) == "true"
    assert render_value(False) == "false"
    assert render_value(3) == "3"
    assert render_value(2.5) == "2.5"
    assert render_value({"a": [1, 2], "b": None}) == '{"a": [1, 2], "b": null}'
    assert render_value(["x", "y"]) == '["x", "y"]'
    assert render_value(Ticket(title="t")) == '{"title": "t", "tags": []}'
    assert render_value(dt.datetime(2026, 1, 2, 3, 4)) == "2026-01-02T03:04:00"
    long_list = list(range(500))
    assert render_value(long_list).endswith("498, 499]")


def test_a_list_given_to_a_string_input_is_numbered() -> None:
    field = Field("passages", "input", str)
    assert render_value(["one", "two"], field) == "[1] «one»\n[2] «two»"
    assert render_value(["only"], field) == "«only»"
    assert render_value([], field) == "N/A"
    assert render_value(["a\nb", "c"], field) == "[1] «««\n    a\n    b\n»»»\n[2] «c»"


@pytest.mark.parametrize(
    ("annotation", "name"),
    [
        (str, "string"),
        (int, "integer"),
        (float, "number"),
        (bool, "true or false"),
        (dt.datetime, "ISO 8601 date and time"),
        (dict[str, Any], "object"),
        (list[str], "list of strings"),
        (list[list[int]], "list of lists of integers"),
        (Literal["atlas", "harbor"], "one of: atlas, harbor"),
        (Color, "one of: red, blue"),
        (int | None, "integer or null"),
        (Ticket, "object"),
    ],
)
def test_type_names_in_plain_words(annotation: Any, name: str) -> None:
    assert type_name(annotation) == name


class _Flag(enum.Enum):
    ON = "t"
    ONE = "1"


@pytest.mark.parametrize(
    ("annotation", "value", "expected"),
    [
        (bool | _Flag, "t", _Flag.ON),
        (int | _Flag, "1", _Flag.ONE),
        (list[bool | _Flag], ["t", True], [_Flag.ON, True]),
        (dict[str, bool | _Flag | None], {"a": "t", "b": None}, {"a": _Flag.ON, "b": None}),
        (tuple[bool | _Flag, ...], ["t", False], (_Flag.ON, False)),
        (bool | _Flag, True, True),
        (int | _Flag, 7, 7),
    ],
)
def test_an_enum_s_value_in_a_union_is_the_member_wherever_the_union_sits(
    annotation: Any, value: Any, expected: Any
) -> None:
    # pydantic alone reads "t" as True for `bool | _Flag`: imp writes the member as its value, so
    # that value must read back as the member (found by tests/test_roundtrip.py).
    assert coerce_value(Field("out", "output", annotation), value) == expected
