"""What `with_parameters` wrote survives every way a program is made again: for every program kind,
random edits of instructions, demos and tool descriptions outlive rebuilding, saving and loading, and new demos."""

from __future__ import annotations

import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import imp
from imp.programs.base import Program
from imp.programs.react._last import EXTRACT_INSTRUCTIONS


def look(where: str) -> str:
    """Look somewhere."""
    return "a key"


def peek(where: str) -> str:
    """Peek somewhere."""
    return "a lock"


def _answer(messages: list[Any], options: dict[str, Any]) -> dict[str, Any]:
    return {"answer": "x"}


LM = imp.StaticLM(_answer)


@imp.fn(lm=LM)
def ask(question: str) -> str:
    """Answer the question."""


@imp.fn(lm=LM, tools=[look, peek])
def ask_with_tools(question: str) -> str:
    """Answer the question, looking first."""


class Pair(imp.Program):
    """A user's program holding two predictors."""

    def __init__(self, lm: imp.LM) -> None:
        self.draft = imp.predict("question -> answer", lm=lm)
        self.check = imp.chain_of_thought("question -> answer", lm=lm)
        self.signature = imp.signature("question -> answer")

    async def acall(self, inputs: dict[str, Any], **call_options: Any) -> imp.Prediction:
        return await self.check.acall({"question": (await self.draft.acall(inputs)).answer})


KINDS: dict[str, Callable[[], Program]] = {
    "predict": lambda: imp.predict("question -> answer", lm=LM),
    "chain_of_thought": lambda: imp.chain_of_thought("question -> answer", lm=LM),
    "react": lambda: imp.react("question -> answer", [look, peek], lm=LM),
    "react_trajectory": lambda: imp.react_trajectory("question -> answer", [look, peek], lm=LM),
    "function": lambda: ask,
    "function_with_tools": lambda: ask_with_tools,
    "user_program": lambda: Pair(LM),
}
REGISTRY = {"look": look, "peek": peek, "ask": ask.fn, "ask_with_tools": ask_with_tools.fn}

# instructions are kept stripped of surrounding whitespace: texts here start and end with a visible character
text = st.from_regex(r"[A-Za-z0-9é\"{][A-Za-z0-9 .,:!?é\"{}\n-]{0,28}[A-Za-z0-9.}]", fullmatch=True)
demo = st.fixed_dictionaries({"question": text, "answer": text})


@st.composite
def edits(draw: st.DrawFn, program: Program) -> dict[str, Any]:
    """Random changes to some of the program's instructions, demos and tool descriptions."""
    params = program.parameters()
    instructions = {p.name: draw(text) for p in params.predictors if draw(st.booleans())}
    demos = {
        p.name: draw(st.lists(demo, max_size=2)) for p in params.predictors if p.takes_demos and draw(st.booleans())
    }
    tools = {t.name: draw(text) for t in params.tools if draw(st.booleans())}
    return {"instructions": instructions, "demos": demos, "tool_descriptions": tools}


def seen(program: Program) -> dict[str, Any]:
    """Every parameter of the program, as plain values."""
    params = program.parameters()
    return {
        "instructions": params.instructions,
        "demos": {p.name: [dict(d) for d in p.demos] for p in params.predictors},
        "tools": {t.name: t.description for t in params.tools},
    }


def expected(program: Program, change: dict[str, Any], rewritten: set[str]) -> dict[str, Any]:
    """The parameters after the change; `rewritten` collects the names whose instructions were given."""
    want = seen(program)
    want["instructions"].update(change["instructions"])
    rewritten.update(change["instructions"])
    if "extract" in want["instructions"] and "extract" not in rewritten:
        # the loop's extractor reads the task's instructions and a fixed paragraph until it is rewritten itself
        want["instructions"]["extract"] = f"{want['instructions']['react']}\n\n{EXTRACT_INSTRUCTIONS}"
    want["demos"].update({k: [dict(d) for d in v] for k, v in change["demos"].items()})
    want["tools"].update(change["tool_descriptions"])
    return want


def rebuilt(program: Program) -> list[Program]:
    """The program made again each way its kind offers: with other options, another LM."""
    other = imp.StaticLM(_answer)
    made: list[Program] = []
    if isinstance(program, imp.FunctionProgram):
        made += [program.using(lm=other), program.using(config={"temperature": 0.5})]
    if hasattr(program, "with_lm"):
        made.append(program.with_lm(other))
    return made


def saved_and_loaded(program: Program) -> Program:
    if isinstance(program, Pair):  # a user's own class is saved by a kind its author registers
        return program
    with tempfile.TemporaryDirectory() as folder:
        path = imp.save(program, Path(folder) / "p.json", include_lm=False, registry=REGISTRY)
        return imp.load(path, lm=LM, registry=REGISTRY)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data(), kind=st.sampled_from(sorted(KINDS)))
def test_parameters_survive_rebuilding_saving_and_new_demos(data: st.DataObject, kind: str) -> None:
    program = KINDS[kind]()
    change = data.draw(edits(program))
    made = program.with_parameters(**change)
    rewritten: set[str] = set()
    want = expected(program, change, rewritten)
    assert seen(made) == want
    for again in rebuilt(made):
        assert seen(again) == want, kind
    assert seen(saved_and_loaded(made)) == want, kind
    new_demos = data.draw(st.lists(demo, min_size=1, max_size=2))
    if hasattr(made, "with_demos"):  # new demos for the program's demo-taking predictor; all else stays
        shown = made.with_demos(new_demos)
        after = seen(shown)
        assert {k: v for k, v in after.items() if k != "demos"} == {k: v for k, v in want.items() if k != "demos"}
        takes = [p.name for p in made.parameters().predictors if p.takes_demos]
        assert after["demos"][takes[0]] == new_demos
        assert seen(saved_and_loaded(shown)) == after
    # a later edit of other parameters keeps the earlier ones
    first = made.parameters().predictors[0].name
    later = {"instructions": {first: "Later."}, "demos": {}, "tool_descriptions": {}}
    assert seen(made.with_parameters(**later)) == expected(made, later, rewritten)


def test_a_function_program_with_tools_keeps_a_rewritten_extractor_instruction() -> None:
    made = ask_with_tools.with_parameters(instructions={"extract": "Read the history, then answer."})
    for again in [made.using(lm=imp.StaticLM(_answer)), saved_and_loaded(made), made.with_demos([])]:
        assert again.parameters()["extract"].instructions == "Read the history, then answer."
    assert ask_with_tools.parameters()["extract"].instructions != "Read the history, then answer."


def test_the_trajectory_loop_takes_another_lm_and_new_demos_and_refuses_what_is_not_demos() -> None:
    loop = imp.react_trajectory("question -> answer", [look], lm=LM)
    other = imp.StaticLM(_answer)
    assert loop.with_lm(other).lm is other and loop.with_lm(other).step.lm is other
    shown = loop.with_demos([{"question": "q", "answer": "a"}])
    assert [dict(d) for d in shown.extract.demos] == [{"question": "q", "answer": "a"}]
    with pytest.raises(TypeError, match="demos are a list"):
        loop.with_demos("q -> a")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"demos\[0\]"):
        loop.with_demos(["q"])  # type: ignore[list-item]
