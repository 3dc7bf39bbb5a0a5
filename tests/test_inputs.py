"""Inputs are checked before any request, and common mistakes are refused when a program is built."""

import datetime as dt
import enum
from typing import Any

import pydantic
import pytest

import imp
from imp.tools import tool

REPLY = "[[ ## answer ## ]]\nok\n\n[[ ## completed ## ]]"
REASONED = "[[ ## reasoning ## ]]\nbecause\n\n[[ ## answer ## ]]\nok\n\n[[ ## completed ## ]]"


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


class Point(pydantic.BaseModel):
    x: int
    y: int


def _lookup(query: str) -> str:
    return query


lookup = tool(_lookup, name="lookup", description="Look something up.")


def _programs(sig: imp.Signature) -> list[tuple[str, Any, imp.ScriptedLM]]:
    """Every program kind over the same signature, each with its own scripted LM."""
    made = []
    for kind in ("predict", "chain_of_thought", "react"):
        lm = imp.ScriptedLM([REASONED if kind == "chain_of_thought" else REPLY] * 3)
        if kind == "predict":
            program: Any = imp.predict(sig, lm=lm)
        elif kind == "chain_of_thought":
            program = imp.chain_of_thought(sig, lm=lm)
        else:
            program = imp.react(sig, [lookup], lm=lm)
        made.append((kind, program, lm))
    return made


# --- None for a required input ------------------------------------------------------------


@pytest.mark.parametrize("kind", ["predict", "chain_of_thought", "react"])
def test_none_for_a_required_input_is_refused_before_any_request(kind: str) -> None:
    sig = imp.signature("question, context -> answer")
    _, program, lm = next(p for p in _programs(sig) if p[0] == kind)
    with pytest.raises(imp.InvalidInputError, match="`question`") as caught:
        imp.call_sync(program, {"question": None, "context": "c"})
    assert isinstance(caught.value, imp.ImpError) and isinstance(caught.value, ValueError)
    assert caught.value.field == "question"
    assert lm.requests == []


def test_none_for_an_optional_input_is_fine_and_a_defaulted_input_takes_its_default() -> None:
    class Sig(imp.Signature):
        question: str = imp.InputField()
        hint: str | None = imp.InputField()
        tone: str = imp.InputField(default="plain")
        answer: str = imp.OutputField()

    lm = imp.ScriptedLM([REPLY])
    imp.call_sync(imp.predict(Sig, lm=lm), {"question": "q", "hint": None, "tone": None})
    sent = lm.requests[0].messages[-1]["content"]
    assert "[[ ## tone ## ]]\nplain" in sent and "[[ ## hint ## ]]" not in sent


# --- values checked against their annotation and constraints --------------------------------

WRONG: list[tuple[str, Any, Any]] = [
    # (type in the string form or an annotation, a value that does not fit, one that does)
    ("int", "five", "5"),
    ("int", 2.5, 7),
    ("float", "many", "2.5"),
    ("bool", "perhaps", "true"),
    ("datetime", object(), "2024-05-01T10:00:00"),
    ("datetime", "tomorrow", dt.datetime(2024, 5, 1)),
    ("Literal['a', 'b']", "c", "a"),
    ("list[int]", ["one"], ["1", 2]),
    ("list[str]", "not a list", ["a"]),
    ("dict[str, int]", {"a": "x"}, {"a": 1}),
    ("dict[str, int]", ["a"], {}),
    (Colour, "green", "red"),
    (Colour, 3, Colour.BLUE),
    (Point, {"x": 1}, {"x": 1, "y": "2"}),
    (Point, "a point", Point(x=1, y=2)),
    (list[Point], [{"x": "a", "y": 1}], [{"x": 1, "y": 1}]),
    (int | None, "n/a", None),
]


def _sig(annotation: Any, **constraints: Any) -> imp.Signature:
    if isinstance(annotation, str):
        base = imp.signature(f"value: {annotation} -> answer")
        annotation = base.inputs["value"].annotation
    return imp.Signature(
        [imp.Field("value", "input", annotation, constraints=constraints)], [imp.Field("answer", "output")]
    )


@pytest.mark.parametrize(("annotation", "bad", "good"), WRONG, ids=[f"{a}-{b!r}" for a, b, _ in WRONG])
@pytest.mark.parametrize("kind", ["predict", "chain_of_thought", "react"])
def test_a_value_that_does_not_fit_its_annotation_is_refused_before_any_request(
    kind: str, annotation: Any, bad: Any, good: Any
) -> None:
    _, program, lm = next(p for p in _programs(_sig(annotation)) if p[0] == kind)
    with pytest.raises(imp.InvalidInputError, match="`value`") as caught:
        imp.call_sync(program, {"value": bad})
    assert lm.requests == []
    assert caught.value.field == "value" and caught.value.value is bad
    # The lax reading pydantic allows is accepted, and the request goes out.
    assert imp.call_sync(program, {"value": good}).answer == "ok"
    assert len(lm.requests) == 1


@pytest.mark.parametrize(
    ("annotation", "constraints", "bad", "good"),
    [
        (str, {"min_length": 3}, "ab", "abc"),
        (str, {"max_length": 2}, "abc", "ab"),
        (str, {"pattern": r"^\d+$"}, "12a", "12"),
        (int, {"gt": 0}, 0, 1),
        (int, {"le": 10}, 11, 10),
        (float, {"multiple_of": 0.5}, 0.3, 1.5),
        (list[int], {"max_length": 1}, [1, 2], [1]),
    ],
)
def test_constraints_are_checked_before_any_request(annotation: Any, constraints: Any, bad: Any, good: Any) -> None:
    lm = imp.ScriptedLM([REPLY])
    program = imp.predict(_sig(annotation, **constraints), lm=lm)
    with pytest.raises(imp.InvalidInputError, match="`value`"):
        imp.call_sync(program, {"value": bad})
    assert lm.requests == []
    assert imp.call_sync(program, {"value": good}).answer == "ok"


def test_a_text_field_takes_any_value_and_the_prompt_shows_the_value_as_given() -> None:
    lm = imp.ScriptedLM([REPLY, REPLY, REPLY])
    program = imp.predict("passages, n: int -> answer", lm=lm)
    imp.call_sync(program, {"passages": ["one", "two"], "n": "5"})
    imp.call_sync(program, {"passages": {"a": 1}, "n": 5})
    imp.call_sync(program, {"passages": 3, "n": 5.0})
    first = lm.requests[0].messages[-1]["content"]
    assert "[1] «one»\n[2] «two»" in first and "[[ ## n ## ]]\n5" in first


def test_a_history_input_must_be_a_history_or_a_list_of_turns() -> None:
    lm = imp.ScriptedLM([REPLY, REPLY])
    program = imp.predict("history: History, question -> answer", lm=lm)
    with pytest.raises(imp.InvalidInputError, match="`history`"):
        imp.call_sync(program, {"history": "we talked", "question": "q"})
    assert lm.requests == []
    imp.call_sync(program, {"history": [{"question": "a", "answer": "b"}], "question": "q"})
    imp.call_sync(program, {"history": imp.History([]), "question": "q"})
    assert len(lm.requests) == 2


def test_the_error_names_the_field_and_the_type_never_the_value() -> None:
    program = imp.predict("when: datetime, key: int -> answer", lm=imp.ScriptedLM([REPLY]))
    secret = "sk-live-abcdefghijklmnopqrstuvwxyz0123"
    with pytest.raises(imp.InvalidInputError) as caught:
        imp.call_sync(program, {"when": "2024-05-01", "key": secret})
    text = f"{caught.value} {caught.value!r}"
    assert "`key`" in text and "int" in text and "str" in text
    assert secret not in text


# --- mistakes refused (or accepted) when the program is built ---------------------------------


@pytest.mark.parametrize("build", [imp.predict, imp.chain_of_thought])
@pytest.mark.parametrize(
    ("given", "expected"),
    [
        (imp.JSONAdapter, imp.JSONAdapter),
        (imp.XMLAdapter, imp.XMLAdapter),
        ("json", imp.JSONAdapter),
        ("XML", imp.XMLAdapter),
        ("chat", imp.ChatAdapter),
        ("JSONAdapter", imp.JSONAdapter),
        (imp.JSONAdapter(), imp.JSONAdapter),
    ],
)
def test_an_adapter_class_or_name_is_accepted(build: Any, given: Any, expected: type) -> None:
    program = build("question -> answer", adapter=given)
    assert type(program.adapter) is expected


@pytest.mark.parametrize("build", [imp.predict, imp.chain_of_thought])
def test_an_unknown_adapter_is_refused_naming_the_choices(build: Any) -> None:
    with pytest.raises(TypeError, match="'chat', 'json', 'xml'"):
        build("question -> answer", adapter="yaml")
    with pytest.raises(TypeError, match=r"adapter takes an imp\.Adapter"):
        build("question -> answer", adapter=3)


@pytest.mark.parametrize("build", [imp.predict, imp.chain_of_thought])
def test_a_model_string_for_lm_points_to_imp_lm(build: Any) -> None:
    with pytest.raises(TypeError, match=r"lm=imp\.lm\('openai:gpt-4o'\)"):
        build("question -> answer", lm="openai:gpt-4o")
    with pytest.raises(TypeError, match="LM client"):
        build("question -> answer", lm=object())


@pytest.mark.parametrize("build", [imp.predict, imp.chain_of_thought])
@pytest.mark.parametrize(
    "config",
    [{"timeout": "10"}, {"timeout": 0}, {"timeout": True}, {"temperature": "hot"}, {"max_tokens": 1.5}, {"n": "2"}],
)
def test_request_options_of_the_wrong_kind_are_refused(build: Any, config: dict[str, Any]) -> None:
    (key,) = config
    with pytest.raises(TypeError, match=f"config\\['{key}'\\]"):
        build("question -> answer", config=config)


def test_a_per_call_config_of_the_wrong_kind_is_refused_before_any_request() -> None:
    lm = imp.ScriptedLM([REPLY])
    with pytest.raises(TypeError, match="timeout"):
        imp.call_sync(imp.predict("question -> answer", lm=lm), {"question": "q", "config": {"timeout": "10"}})
    assert lm.requests == []
    assert imp.predict("q -> a", config={"timeout": 10, "temperature": 0, "max_tokens": 5}).config["timeout"] == 10


@pytest.mark.parametrize("build", [imp.predict, imp.chain_of_thought])
@pytest.mark.parametrize("demos", ["question: 1+1, answer: 2", ["q -> a"], {"question": "1", "answer": "2"}, 3])
def test_demos_that_are_not_a_list_of_mappings_are_refused(build: Any, demos: Any) -> None:
    with pytest.raises(TypeError, match="demos"):
        build("question -> answer", demos=demos)


@pytest.mark.parametrize("adapter", [imp.ChatAdapter(), imp.JSONAdapter(), imp.XMLAdapter()])
def test_an_adapter_refuses_demos_given_as_a_string(adapter: imp.Adapter) -> None:
    with pytest.raises(TypeError, match="demos"):
        adapter.format(imp.signature("q -> a"), {"q": "x"}, demos="q: 1, a: 2")


def test_demos_take_mappings_and_examples() -> None:
    example = imp.Example(question="1+1", answer="2").with_inputs("question")
    program = imp.predict("question -> answer", demos=[{"question": "2+2", "answer": "4"}, example])
    assert len(program.demos) == 2
    assert len(program.with_demos([example]).demos) == 1


def test_chain_of_thought_built_from_the_class_has_its_reasoning_output() -> None:
    sig = imp.signature("question -> answer")
    for program in (imp.ChainOfThought(sig), imp.chain_of_thought(sig), imp.ChainOfThought.build(sig)):
        assert list(program.signature.outputs) == ["reasoning", "answer"]
    lm = imp.ScriptedLM([REASONED])
    pred = imp.call_sync(imp.ChainOfThought(sig, lm=lm), {"question": "q"})
    assert (pred.reasoning, pred.answer) == ("because", "ok")
    # Copies do not add it twice, and a signature's own `reasoning` output is kept.
    again = imp.ChainOfThought(sig).with_demos([])
    assert list(again.signature.outputs) == ["reasoning", "answer"]
    own = imp.signature("question -> reasoning: int, answer")
    assert imp.ChainOfThought(own).signature.outputs["reasoning"].annotation is int


def test_predict_built_from_the_class_takes_a_string_signature() -> None:
    assert list(imp.Predict("question -> answer").signature.outputs) == ["answer"]  # type: ignore[arg-type]
