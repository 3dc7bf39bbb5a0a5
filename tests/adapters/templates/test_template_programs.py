"""Templates under every program: predict, chain_of_thought, react (native tools), the JSON fallback, saving."""

from __future__ import annotations

from pathlib import Path

import pytest

import imp

FORM = "{% for f in outputs %}{f.name}: {f.value}\n{% endfor %}"
TEMPLATE = imp.TemplateAdapter(
    [imp.system("{instruction}\n\nAnswer in this form:\n" + FORM), imp.turns(), imp.user("Question: {question}")]
)
PIRATE = imp.TemplateAdapter([imp.system("You are a helpful pirate. {instruction}"), imp.user("Q: {question}")])
QA = imp.signature("question -> answer", "Answer the question.")
RATED = imp.signature("question -> answer, confidence: float", "Answer and say how sure you are.")


async def test_predict_sends_the_template_and_reads_the_form() -> None:
    lm = imp.ScriptedLM(["answer: Paris\nconfidence: 0.9"])
    prediction = await imp.call(imp.predict(RATED, adapter=TEMPLATE, lm=lm), question="Capital of France?")
    assert prediction.fields == {"answer": "Paris", "confidence": 0.9}
    assert prediction.metadata.adapter == "TemplateAdapter" and not prediction.metadata.json_fallback
    assert lm.requests[0].messages[-1] == {"role": "user", "content": "Question: Capital of France?"}


async def test_the_configured_adapter_can_be_a_template() -> None:
    lm = imp.ScriptedLM(["Arr, Paris."])
    with imp.context(adapter=PIRATE, lm=lm):
        prediction = await imp.call(imp.predict(QA), question="Capital?")
    assert prediction.answer == "Arr, Paris."
    assert lm.requests[0].messages[0]["content"] == "You are a helpful pirate. Answer the question."


async def test_the_json_fallback_keeps_the_template() -> None:
    lm = imp.ScriptedLM(
        ["I think Paris, fairly sure.", '{"answer": "Paris", "confidence": 0.8}'], response_format="json_object"
    )
    prediction = await imp.call(imp.predict(RATED, adapter=TEMPLATE, lm=lm), question="Capital?")
    assert prediction.fields == {"answer": "Paris", "confidence": 0.8}
    assert prediction.metadata.json_fallback and prediction.metadata.adapter == "TemplateJSONAdapter"
    retry = lm.requests[1]
    assert retry.options["response_format"] == {"type": "json_object"}
    assert retry.messages[0]["content"].startswith("Answer and say how sure you are.")
    assert '{"answer": "...", "confidence": "(number)"}' in retry.messages[0]["content"]
    assert retry.messages[-1]["content"].startswith("Question: Capital?\n\nRespond with a JSON object")


async def test_a_failed_fallback_raises_the_first_parse_error() -> None:
    lm = imp.ScriptedLM(["no form here", "no json either"])
    with pytest.raises(imp.AdapterParseError) as caught:
        await imp.call(imp.predict(RATED, adapter=TEMPLATE, lm=lm), question="q")
    assert caught.value.adapter == "TemplateAdapter"
    assert len(lm.requests) == 2


async def test_chain_of_thought_reads_reasoning_through_the_form() -> None:
    lm = imp.ScriptedLM(["reasoning: France's capital.\nanswer: Paris"])
    prediction = await imp.call(imp.chain_of_thought(QA, adapter=TEMPLATE, lm=lm), question="Capital?")
    assert prediction.fields == {"reasoning": "France's capital.", "answer": "Paris"}
    assert "reasoning: ...\nanswer: ..." in lm.requests[0].messages[0]["content"]


def test_chain_of_thought_with_a_formless_template_is_refused_at_build() -> None:
    with pytest.raises(imp.TemplateError, match="2 outputs"):
        imp.chain_of_thought(QA, adapter=PIRATE, lm=imp.ScriptedLM([]))


def look(term: str) -> str:
    """Look a term up."""
    return f"{term}: the capital is Paris"


async def test_react_with_a_template_sends_tools_natively_and_ends_on_text() -> None:
    lm = imp.ScriptedLM([{"tool_calls": [{"name": "look", "arguments": {"term": "France"}}]}, "Arr, Paris it be."])
    prediction = await imp.call(imp.react(QA, [look], adapter=PIRATE, lm=lm), question="Capital of France?")
    assert prediction.answer == "Arr, Paris it be." and prediction.complete
    first, second = lm.requests
    assert [t["function"]["name"] for t in first.options["tools"]] == ["look"]
    assert first.messages[0]["content"].startswith(
        "You are a helpful pirate. Answer the question.\n\nYou are an Agent."
    )
    assert first.messages[1] == {"role": "user", "content": "Q: Capital of France?"}
    assert second.messages[2]["tool_calls"][0].name == "look"
    assert second.messages[3]["role"] == "tool"


async def test_react_with_several_outputs_submits_through_the_native_tool() -> None:
    lm = imp.ScriptedLM(
        [
            {"next_thought": "Look first.", "tool_calls": [{"name": "look", "arguments": {"term": "France"}}]},
            {"tool_calls": [{"name": "submit", "arguments": {"answer": "Paris", "confidence": 0.9}}]},
        ]
    )
    prediction = await imp.call(imp.react(RATED, [look], adapter=TEMPLATE, lm=lm), question="Capital?")
    assert prediction.fields == {"answer": "Paris", "confidence": 0.9}
    assert [t["function"]["name"] for t in lm.requests[0].options["tools"]] == ["look", "submit"]
    assert "next_thought: ..." in lm.requests[0].messages[0]["content"]
    assert lm.requests[1].messages[2]["content"] == "Look first."


async def test_a_react_step_that_answers_in_the_form_is_read_too() -> None:
    lm = imp.ScriptedLM(
        [
            "next_thought: I need nothing more.",
            {"tool_calls": [{"name": "submit", "arguments": {"answer": "Paris", "confidence": 1.0}}]},
        ]
    )
    prediction = await imp.call(imp.react(RATED, [look], adapter=TEMPLATE, lm=lm, max_iters=3), question="Capital?")
    assert prediction.answer == "Paris"
    assert prediction.metadata.history[0]["next_thought"] == "I need nothing more."


@pytest.mark.parametrize("kind", ["predict", "chain_of_thought", "react"])
def test_a_saved_program_keeps_its_template(tmp_path: Path, kind: str) -> None:
    if kind == "predict":
        program: imp.Program = imp.predict(
            RATED, adapter=TEMPLATE, demos=[{"question": "q", "answer": "a", "confidence": 0.5}]
        )
    elif kind == "chain_of_thought":
        program = imp.chain_of_thought(QA, adapter=TEMPLATE)
    else:
        program = imp.react(QA, [look], adapter=PIRATE)
    path = imp.save(program, tmp_path / "p.json", registry={"look": look})
    assert '"template"' in path.read_text()
    loaded = imp.load(path, registry={"look": look})
    assert type(loaded) is type(program)
    assert loaded.adapter == program.adapter  # type: ignore[attr-defined]
    assert loaded.render(question="Capital?") == program.render(question="Capital?")


def test_render_is_the_exact_request_not_sent() -> None:
    lm = imp.ScriptedLM(["answer: Paris\nconfidence: 0.9"], response_format="json_object")
    program = imp.predict(RATED, adapter=TEMPLATE, lm=lm, config={"temperature": 0})
    rendered = program.render(question="Capital?")
    assert lm.requests == []
    imp.call_sync(program, question="Capital?")
    assert list(rendered.messages) == lm.requests[0].messages
    assert dict(rendered.options) == lm.requests[0].options == {"temperature": 0}
    assert rendered.model == "scripted:scripted"
    json_program = imp.predict(RATED, adapter=imp.JSONAdapter(), lm=lm)
    assert json_program.render(question="q").options == {"response_format": {"type": "json_object"}}


def test_render_a_react_turn_gives_its_first_step() -> None:
    lm = imp.ScriptedLM([])
    rendered = imp.react(QA, [look], adapter=PIRATE, lm=lm).render(question="Capital?")
    assert rendered.options["tool_choice"] == "auto"
    assert [t["function"]["name"] for t in rendered.options["tools"]] == ["look"]
    assert rendered.messages[-1] == {"role": "user", "content": "Q: Capital?"}
    assert lm.requests == []


def test_render_needs_no_configured_lm_for_predict() -> None:
    rendered = imp.predict(QA, adapter=PIRATE).render({"question": "q"})
    assert rendered.messages[-1]["content"] == "Q: q"
