"""Every program exposes its parameters; with_parameters returns a new program and refuses a changed runner."""

from __future__ import annotations

from typing import Any

import pytest

import imp


def look(where: str) -> str:
    """Look somewhere."""
    return f"a key in the {where}"


def other(where: str) -> str:
    """Look somewhere."""
    return "nothing"


def test_predict_and_chain_of_thought_expose_one_predictor() -> None:
    for made in (imp.predict("q -> a", demos=[{"q": "1", "a": "2"}]), imp.chain_of_thought("q -> a")):
        params = made.parameters()
        assert params.names == ["predict"]
        assert params["predict"].instructions == made.signature.instructions
        new = made.with_parameters(instructions={"predict": "Be brief."}, demos={"predict": [{"q": "x", "a": "y"}]})
        assert type(new) is type(made) and new is not made
        assert new.signature.instructions == "Be brief."
        assert [dict(d) for d in new.demos] == [{"q": "x", "a": "y"}]
        assert made.signature.instructions != "Be brief."  # the old value is unchanged
        assert list(new.signature.outputs) == list(made.signature.outputs)


def test_react_exposes_step_extractor_and_tools() -> None:
    agent = imp.react("question -> answer", [look])
    params = agent.parameters()
    assert params.names == ["react", "extract"]
    assert [t.name for t in params.tools] == ["look"]
    assert params["extract"].takes_demos is False
    new = agent.with_parameters(
        instructions={"react": "Look first.", "extract": "Read it."}, tool_descriptions={"look": "Look in a place."}
    )
    assert isinstance(new, imp.ReAct)
    assert new.signature.instructions == "Look first."
    assert new.extractor_instructions == "Read it."
    assert new.tools[0].description == "Look in a place."
    assert new.tools[0].runner is agent.tools[0].runner
    assert agent.tools[0].description == "Look somewhere."


def test_a_changed_runner_is_refused() -> None:
    agent = imp.react("question -> answer", [look])
    changed = agent.tools[0].with_runner(other)
    with pytest.raises(ValueError, match="never what the tool does"):
        agent.with_parameters(tools=[changed])
    import dataclasses

    reworded = dataclasses.replace(agent.tools[0], description="Look around.")
    assert agent.with_parameters(tools=[reworded]).tools[0].description == "Look around."


def test_unknown_names_and_bad_values_are_refused() -> None:
    agent = imp.react("question -> answer", [look])
    with pytest.raises(ValueError, match="predictors are"):
        agent.with_parameters(instructions={"nope": "x"})
    with pytest.raises(ValueError, match="shows no demos"):
        agent.with_parameters(demos={"extract": [{"question": "q"}]})
    with pytest.raises(ValueError, match="tools are"):
        agent.with_parameters(tool_descriptions={"nope": "x"})
    with pytest.raises(TypeError, match="string"):
        agent.with_parameters(instructions={"react": 3})  # type: ignore[dict-item]


def test_trajectory_react_exposes_its_parameters() -> None:
    agent = imp.react_trajectory("question -> answer", [look])
    assert agent.parameters().names == ["react"]
    new = agent.with_parameters(instructions={"react": "Look first."}, tool_descriptions={"look": "Peek."})
    assert new.signature.instructions == "Look first."
    assert "Look first." in new.step.signature.instructions
    assert new.tools[0].description == "Peek."


def test_function_programs_expose_their_parameters() -> None:
    @imp.fn
    def rate(text: str) -> int:
        """Rate the text from 1 to 5."""

    assert rate.parameters().names == ["predict"]
    assert rate.parameters()["predict"].instructions == "Rate the text from 1 to 5."
    new = rate.with_parameters(
        instructions={"predict": "Rate kindly."}, demos={"predict": [{"text": "hi", "result": 4}]}
    )
    assert isinstance(new, imp.FunctionProgram)
    assert new.signature.instructions == "Rate kindly." and new.program.signature.instructions == "Rate kindly."
    assert [dict(d) for d in new.demos] == [{"text": "hi", "result": 4}]
    assert new.using(config={"temperature": 0}).signature.instructions == "Rate kindly."

    @imp.fn(tools=[look])
    def find(question: str) -> str:
        """Find it."""

    assert find.parameters().names == ["react", "extract"]
    assert [t.name for t in find.parameters().tools] == ["look"]


class Pipeline(imp.Program):
    """A user's program that calls two predictors."""

    def __init__(self) -> None:
        self.draft = imp.predict("q -> a")
        self.check = imp.chain_of_thought("a -> ok: bool")
        self.signature = imp.signature("q -> ok: bool")

    async def acall(self, inputs: dict[str, Any], **call_options: Any) -> imp.Prediction:
        drafted = await self.draft.acall(inputs)
        return await self.check.acall({"a": drafted.a})


def test_a_composite_program_exposes_its_predictors_by_attribute() -> None:
    pipe = Pipeline()
    assert pipe.parameters().names == ["draft.predict", "check.predict"]
    new = pipe.with_parameters(instructions={"check.predict": "Say yes."})
    assert isinstance(new, Pipeline) and new is not pipe
    assert new.check.signature.instructions == "Say yes."
    assert new.draft is pipe.draft
    assert pipe.check.signature.instructions != "Say yes."


def test_rewritten_parameters_save_and_load(tmp_path: Any) -> None:
    agent = imp.react("question -> answer", [look]).with_parameters(
        instructions={"react": "Look first.", "extract": "Read it."},
        demos={"react": [{"question": "q", "answer": "a"}]},
        tool_descriptions={"look": "Peek."},
    )
    loaded = imp.load(imp.save(agent, tmp_path / "a.json"), registry={"look": look})
    assert isinstance(loaded, imp.ReAct)
    assert loaded.parameters().instructions == {"react": "Look first.", "extract": "Read it."}
    assert loaded.tools[0].description == "Peek." and [dict(d) for d in loaded.demos] == [
        {"question": "q", "answer": "a"}
    ]
