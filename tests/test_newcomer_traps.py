"""The habits a newcomer brings (from DSPy, pydantic-ai, or plain Python) each meet an error or a warning
that names the fix, before anything is sent: calling a program, field names a Prediction already
answers to, a misspelt key, `max_iters=0` on a program, tools the model cannot read."""

from __future__ import annotations

import warnings
from typing import Any

import pydantic
import pytest

import imp
from imp.signature import RESERVED_INPUT_NAMES, RESERVED_OUTPUT_NAMES

QA = imp.signature("question -> answer")


@imp.tool
def look(query: str) -> str:
    """Look something up."""
    return query


class Ask(imp.Program):
    """A program of the user's own."""

    signature = QA

    async def acall(self, inputs: dict[str, Any], **call_options: Any) -> imp.Prediction:
        return imp.Prediction({"answer": inputs["question"]})


PROGRAMS = {
    "predict": lambda: imp.predict(QA, lm=imp.ScriptedLM([{"answer": "a"}])),
    "chain_of_thought": lambda: imp.chain_of_thought(QA),
    "react": lambda: imp.react(QA, [look]),
    "react_trajectory": lambda: imp.react_trajectory(QA, [look]),
    "a Program subclass": Ask,
}


# --- calling a program as DSPy calls a module ---------------------------------------------------


@pytest.mark.parametrize("kind", list(PROGRAMS))
def test_calling_a_program_says_how_to_run_it(kind: str) -> None:
    program = PROGRAMS[kind]()
    with pytest.raises(TypeError) as info:
        program(question="x")
    message = str(info.value)
    assert "imp.call_sync(program, question=...)" in message
    assert "await imp.call(program, question=...)" in message
    with pytest.raises(TypeError, match=r"imp\.call_sync\(program, question=\.\.\.\)"):
        program()  # no inputs given: the signature's are named


def test_a_function_program_is_still_called_like_its_function() -> None:
    @imp.fn(lm=imp.ScriptedLM([{"result": "HI"}]))
    def shout(text: str) -> str:
        """Shout the text."""

    assert shout("hi") == "HI"


@pytest.mark.parametrize("taker", ["react", "react_trajectory", "tool"])
def test_a_program_given_as_a_tool_is_refused_naming_the_fix(taker: str) -> None:
    program = imp.predict(QA)
    build = {
        "react": lambda: imp.react(QA, [program]),
        "react_trajectory": lambda: imp.react_trajectory(QA, [program]),
        "tool": lambda: imp.tool(program),
    }[taker]
    with pytest.raises(TypeError, match=r"got a Predict program: give it a function that runs the program"):
        build()


# --- field names a Prediction (or imp.call) already answers to ---------------------------------


def test_the_reserved_output_names_are_exactly_the_predictions_own_attributes() -> None:
    own = {n for n in dir(imp.Prediction) if not (n.startswith("__") and n.endswith("__"))}
    assert own == set(RESERVED_OUTPUT_NAMES)


def test_the_reserved_input_names_are_exactly_imp_calls_own_keywords() -> None:
    import inspect

    keywords = {
        n for n, p in inspect.signature(imp.call).parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY
    }
    assert keywords == set(RESERVED_INPUT_NAMES)


def _class_form(name: str, kind: str) -> imp.Signature:
    namespace: dict[str, Any] = {"__annotations__": {"question": str, name: str}, "__module__": __name__}
    namespace["question"] = imp.InputField()
    namespace[name] = imp.OutputField() if kind == "output" else imp.InputField()
    if kind == "input":
        namespace["__annotations__"]["answer"] = str
        namespace["answer"] = imp.OutputField()
    return type(imp.Signature)("Made", (imp.Signature,), namespace)  # type: ignore[no-any-return]


def _every_way(name: str, kind: str) -> list[Any]:
    """Every way a field gets its name: the string form, the class form, the constructor, the helpers."""
    field = imp.Field(name, kind, str)  # type: ignore[arg-type]
    ways: list[Any] = [
        lambda: imp.signature(f"question -> {name}" if kind == "output" else f"{name} -> answer"),
        lambda: _class_form(name, kind),
        lambda: (
            imp.Signature([imp.Field("question", "input")], [field])
            if kind == "output"
            else imp.Signature([field], [imp.Field("answer", "output")])
        ),
    ]
    if kind == "output":
        ways += [lambda: QA.append_output(name), lambda: QA.prepend_output(name)]
    return ways


@pytest.mark.parametrize("name", sorted(n for n in RESERVED_OUTPUT_NAMES if not n.startswith("_")))
def test_an_output_named_like_a_prediction_attribute_is_refused_every_way(name: str) -> None:
    for way in _every_way(name, "output"):
        with pytest.raises(imp.SignatureError) as info:
            way()
        message = str(info.value)
        assert f"`{name}`" in message and f"imp.Prediction's own `.{name}`" in message
        assert "rename the field" in message


@pytest.mark.parametrize("name", sorted(RESERVED_INPUT_NAMES))
def test_an_input_named_like_an_imp_call_keyword_is_refused_every_way(name: str) -> None:
    for way in _every_way(name, "input"):
        with pytest.raises(imp.SignatureError, match=rf"`{name}` would be taken by imp.call's own `{name}=`"):
            way()


def test_private_and_special_names_are_refused_too() -> None:
    for name in ["_fields", "_metadata", "__class__", "__dict__"]:
        with pytest.raises(imp.SignatureError, match=f"`{name}`"):
            imp.signature(f"question -> {name}")


def test_the_names_are_reserved_only_where_they_collide() -> None:
    """An input may be named `metadata` (no Prediction attribute is read for it); an output `authorize`."""
    sig = imp.signature("metadata, keys -> authorize, on_event, summary")
    lm = imp.ScriptedLM([{"authorize": "yes", "on_event": "no", "summary": "s"}])
    prediction = imp.call_sync(imp.predict(sig, lm=lm), metadata="m", keys="k")
    assert (prediction.authorize, prediction.on_event) == ("yes", "no")


def test_a_function_program_returning_a_reserved_name_is_refused_naming_it() -> None:
    with pytest.raises(imp.ImpError, match="the output field `metadata` would be hidden"):

        @imp.fn
        def describe(text: str) -> str:
            """Describe the text."""
            metadata: str = imp.out("What the text is about.")
            return metadata


def test_a_signature_string_points_at_the_reserved_name() -> None:
    with pytest.raises(imp.SignatureError) as info:
        imp.signature("question -> answer, metadata: dict")
    assert str(info.value).endswith("  question -> answer, metadata: dict\n" + " " * 22 + "^")


# --- a misspelt key --------------------------------------------------------------------------


def test_a_missing_item_lists_the_fields_as_a_missing_attribute_does() -> None:
    prediction = imp.Prediction({"answer": "Paris", "confidence": 0.9})
    with pytest.raises(KeyError) as by_item:
        prediction["answr"]
    with pytest.raises(AttributeError) as by_attribute:
        _ = prediction.answr
    assert by_item.value.args[0] == str(by_attribute.value)
    assert "'answr'" in by_item.value.args[0] and "fields: answer, confidence" in by_item.value.args[0]
    assert prediction.get("answr") is None and "answr" not in prediction


def test_an_example_and_the_metadata_list_their_keys_too() -> None:
    example = imp.Example(question="q", answer="a")
    with pytest.raises(KeyError, match="fields: question, answer"):
        example["answr"]
    metadata = imp.Prediction({"answer": "a"}).metadata
    with pytest.raises(KeyError, match=r"no key 'termination'.*termination_reason"):
        metadata["termination"]
    assert metadata.get("termination") is None


# --- max_iters=0 -----------------------------------------------------------------------------


def test_max_iters_zero_on_a_program_is_refused_naming_the_per_call_form() -> None:
    with pytest.raises(ValueError, match=r"imp.react\(max_iters=0\).*give max_iters=0 to that call"):
        imp.react(QA, [look], max_iters=0)
    with pytest.raises(ValueError, match=r"imp.react_trajectory\(max_iters=0\).*gives its own max_iters=0"):
        imp.react_trajectory(QA, [look], max_iters=0)
    with pytest.raises(ValueError, match=r"max_iters=0"):

        @imp.fn(tools=[look], max_iters=0)
        def answer(question: str) -> str:
            """Answer."""


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_max_iters_that_is_not_a_count_is_refused_on_the_program_and_on_the_call(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_iters is a whole number"):
        imp.react(QA, [look], max_iters=bad)
    program = imp.react(QA, [look], lm=imp.ScriptedLM([]))
    with pytest.raises(ValueError, match="max_iters is a whole number"):
        imp.call_sync(program, question="q", max_iters=bad)


def test_max_iters_zero_on_a_call_with_a_history_and_a_note_is_one_last_request() -> None:
    """Seed 001's "one more request on a history you hold": the summary of a conversation."""
    lm = imp.ScriptedLM(
        [
            {"tool_calls": [{"name": "look", "arguments": {"query": "atlas"}}]},
            {"answer": "atlas", "tool_calls": []},
            {"answer": "Looked up atlas.", "tool_calls": []},
        ]
    )
    program = imp.react(QA, [look], lm=lm)
    first = imp.call_sync(program, question="Who owns money?")
    summary = imp.call_sync(
        program, history=first.metadata.history, max_iters=0, last_request_note="Summarise this for the next shift."
    )
    assert summary.answer == "Looked up atlas."
    assert summary.metadata.termination_reason == "last_text" and len(lm.requests) == 3


def test_max_iters_zero_on_a_react_trajectory_call_goes_straight_to_the_extraction() -> None:
    lm = imp.ScriptedLM([{"reasoning": "r", "answer": "Paris"}])
    prediction = imp.call_sync(imp.react_trajectory(QA, [look], lm=lm), question="q", max_iters=0)
    assert prediction.answer == "Paris" and len(lm.requests) == 1


# --- tools the model cannot read ---------------------------------------------------------------


def undocumented(team):  # type: ignore[no-untyped-def]
    return team


def untyped(team, limit=3):  # type: ignore[no-untyped-def]
    """Find the on-call engineer of a team."""
    return team


def undescribed(team: str) -> str:
    return team


class Lookup:
    def __call__(self, team):  # type: ignore[no-untyped-def]
        return team


def _warned(build: Any) -> list[str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        build()
    return [str(w.message) for w in caught if issubclass(w.category, UserWarning)]


@pytest.mark.parametrize(
    ("build", "expected"),
    [
        (lambda: imp.tool(undocumented), ["no description: add a docstring", "no type hint on `team`"]),
        (lambda: imp.tool(untyped), ["no type hint on `team`, `limit`: annotate them (e.g. `team: str`"]),
        (lambda: imp.tool(undescribed), ["tool `undescribed` has no description"]),
        (lambda: imp.tool(Lookup(), name="lookup"), ["no description", "no type hint on `team`"]),
        (lambda: imp.tool(lambda team: team, name="echo"), ["no description", "no type hint on `team`"]),
        (lambda: imp.react(QA, [undocumented]), ["tool `undocumented` has no description", "`team`"]),
        (lambda: imp.react_trajectory(QA, [untyped]), ["no type hint on `team`, `limit`"]),
    ],
)
def test_a_tool_the_model_cannot_read_is_warned_about_naming_what_to_add(build: Any, expected: list[str]) -> None:
    (message,) = _warned(build)
    for part in expected:
        assert part in message


def test_the_warning_points_at_the_users_line() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        imp.react(QA, [undocumented])
    (warning,) = caught
    assert warning.filename == __file__


def test_a_described_typed_tool_and_an_explicit_any_or_schema_are_not_warned_about() -> None:
    def typed_any(team: Any) -> str:
        """Take anything."""
        return str(team)

    class Args(pydantic.BaseModel):
        team: str

    builds = [
        lambda: imp.tool(look.runner),
        lambda: imp.tool(typed_any),
        lambda: imp.tool(undescribed, description="Echo a team."),
        lambda: imp.tool(undocumented, name="echo", description="Echo.", schema=Args.model_json_schema()),
    ]
    for build in builds:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            build()


def test_a_warned_tool_still_works_as_before() -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        made = imp.tool(undocumented)
    assert (made.description, made.parameters["properties"]) == ("", {"team": {}})


# --- DSPy's module methods and copies ----------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "instead"),
    [
        ("forward", "imp.call_sync(program, ...)"),
        ("aforward", "await imp.call(program, ...)"),
        ("batch", "imp.parallel(program, inputs)"),
        ("named_predictors", "program.parameters()"),
        ("set_lm", "program.with_lm(lm)"),
        ("save", "imp.save(program, path)"),
        ("load_state", "imp.load(path)"),
        ("deepcopy", "immutable"),
    ],
)
@pytest.mark.parametrize("kind", list(PROGRAMS))
def test_a_dspy_module_method_says_what_imp_has_instead(kind: str, name: str, instead: str) -> None:
    program = PROGRAMS[kind]()
    with pytest.raises(AttributeError, match=f"no `.{name}\\(\\)` \\(a DSPy module's method\\)") as info:
        getattr(program, name)
    assert instead in str(info.value)
    assert not hasattr(program, name)


def test_other_missing_attributes_read_as_pythons_own_error() -> None:
    with pytest.raises(AttributeError, match=r"^'Predict' object has no attribute 'nothing'$"):
        _ = imp.predict(QA).nothing  # type: ignore[attr-defined]


@pytest.mark.parametrize("kind", list(PROGRAMS))
def test_a_program_deep_copies_sharing_its_immutable_signature(kind: str) -> None:
    import copy

    program = PROGRAMS[kind]()
    copied = copy.deepcopy(program)
    assert type(copied) is type(program) and copied.signature is program.signature
