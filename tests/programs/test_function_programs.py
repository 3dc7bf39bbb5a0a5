"""`@imp.fn` function programs: what they declare, how they are called, and that they are programs."""
# ruff: noqa: F841 - a function program declares outputs as locals that its body never reads

from __future__ import annotations

from typing import Any

import anyio
import pytest
from imp_backends import both_backends

import imp
from imp.programs.function import FunctionError

TAGGED_REPLY = "<result>\nA summary.\n</result>"


def scripted(*steps: Any) -> imp.ScriptedLM:
    return imp.ScriptedLM(list(steps))


def test_the_docstring_parameters_and_return_make_the_signature() -> None:
    @imp.fn(lm=scripted())
    def rate(review: str, stars_max: int = 5) -> int:
        """Rate the review from 1 to 5 stars."""
        verdict: str = imp.out("One short sentence.")

    sig = rate.signature
    assert sig.instructions == "Rate the review from 1 to 5 stars."
    assert list(sig.inputs) == ["review", "stars_max"] and sig.inputs["stars_max"].default == 5
    assert [(f.name, f.annotation, f.desc) for f in sig.outputs.values()] == [
        ("verdict", str, "One short sentence."),
        ("result", int, ""),
    ]
    assert isinstance(rate, imp.Program) and rate.__name__ == "rate" and rate.__doc__ == sig.instructions


def test_calling_returns_the_value_and_predict_the_whole_prediction() -> None:
    lm = scripted(
        "<verdict>\nGood.\n</verdict>\n<result>\n4\n</result>", "<verdict>\nBad.\n</verdict>\n<result>\n1\n</result>"
    )

    @imp.fn(lm=lm)
    def rate(review: str) -> int:
        """Rate the review from 1 to 5 stars."""
        verdict: str = imp.out("One short sentence.")

    assert rate("Great tacos.") == 4
    prediction = rate.predict(review="Cold food.")
    assert isinstance(prediction, imp.Prediction)
    assert prediction.fields == {"verdict": "Bad.", "result": 1}
    assert prediction.metadata.adapter == "TemplateAdapter" and prediction.metadata.usage is not None


def test_the_default_layout_is_the_tagged_one() -> None:
    lm = scripted(TAGGED_REPLY)

    @imp.fn(lm=lm)
    def summarize(text: str, style: str | None = None) -> str:
        """Summarize the text in one sentence."""
        ...

    assert summarize("Models are mature.") == "A summary."
    system, user = lm.requests[0].messages
    assert system["content"] == (
        "Function: summarize\n\nSummarize the text in one sentence.\n\nReply in exactly this form:\n<result>\n...\n</result>\n"
    )
    assert user["content"] == "<text>\nModels are mature.\n</text>\n"


def test_return_of_declared_outputs_gives_several() -> None:
    lm = scripted("<name>\nAda\n</name>\n<age>\n36\n</age>")

    @imp.fn(lm=lm)
    def person(bio: str) -> tuple[str, int]:
        """Extract the person."""
        name: str = imp.out("Full name.")
        age: int = imp.out()
        return name, age

    assert list(person.signature.outputs) == ["name", "age"]
    assert person("Ada Lovelace, 36.") == ("Ada", 36)


def test_return_of_one_declared_output() -> None:
    @imp.fn(lm=scripted("<label>\nspam\n</label>"))
    def classify(text: str) -> str:
        """Label the text."""
        label: str = imp.out("spam or ham")
        return label

    assert list(classify.signature.outputs) == ["label"] and classify("Buy now!") == "spam"


async def test_an_async_function_is_awaited() -> None:
    @imp.fn(lm=scripted(TAGGED_REPLY, TAGGED_REPLY))
    async def summarize(text: str) -> str:
        """Summarize."""

    assert await summarize("t") == "A summary."
    prediction = await summarize.predict("t")
    assert prediction.result == "A summary."


async def test_a_sync_function_called_inside_a_running_loop_works_as_in_a_notebook() -> None:
    @imp.fn(lm=scripted(TAGGED_REPLY, TAGGED_REPLY))
    def summarize(text: str) -> str:
        """Summarize."""

    assert summarize("t") == "A summary."  # as `imp.call_sync` does: on a helper thread, the loop waits
    assert (await imp.call(summarize, text="t")).result == "A summary."


def test_using_returns_a_new_function_program() -> None:
    lm = scripted("[[ ## result ## ]]\nChat summary.\n\n[[ ## completed ## ]]", "Pirate summary.")

    @imp.fn(lm=lm)
    def summarize(text: str) -> str:
        """Summarize."""

    chat = summarize.using(adapter="chat")
    assert chat is not summarize and isinstance(chat.program.adapter, imp.ChatAdapter)
    assert chat("t") == "Chat summary."
    pirate = chat.using(template=[imp.system("Arr. {instruction}"), imp.user("{text}")])
    assert pirate("t") == "Pirate summary."
    assert lm.requests[1].messages[0]["content"] == "Arr. Function: summarize\n\nSummarize."
    other = imp.ScriptedLM([TAGGED_REPLY])
    assert summarize.using(lm=other)("t") == "A summary." and len(other.requests) == 1
    assert isinstance(summarize.program.adapter, imp.TemplateAdapter)  # the original is unchanged


def search(query: str) -> str:
    """Search the web."""
    return "Paris is the capital of France."


def test_a_function_with_tools_runs_as_a_react_turn() -> None:
    lm = scripted({"tool_calls": [{"name": "search", "arguments": {"query": "capital of France"}}]}, "Paris.")

    @imp.fn(lm=lm, tools=[search])
    def answer(question: str) -> str:
        """Answer with the tools."""

    assert isinstance(answer.program, imp.ReAct)
    assert answer("Capital of France?") == "Paris."
    assert [t["function"]["name"] for t in lm.requests[0].options["tools"]] == ["search"]
    assert lm.requests[1].messages[-1] == {
        "role": "tool",
        "tool_call_id": "call_1_0",
        "content": "Paris is the capital of France.",
    }
    assert answer.using(tools=[]).program.__class__ is imp.Predict


def test_an_incomplete_turn_is_no_value() -> None:
    lm = scripted({"tool_calls": [{"name": "search", "arguments": {"query": "q"}}]}, {"tool_calls": []})

    @imp.fn(lm=lm, tools=[search], max_iters=1)
    def answer(question: str) -> str:
        """Answer."""

    with pytest.raises(imp.ImpError, match="without an answer"):
        answer("q")


@both_backends
async def test_function_programs_run_under_call_parallel_evaluate_deadline_and_events() -> None:
    lm = imp.StaticLM(handler=lambda messages, options: TAGGED_REPLY)

    @imp.fn(lm=lm)
    def summarize(text: str) -> str:
        """Summarize."""

    events: list[imp.Event] = []
    prediction = await imp.call(summarize, {"text": "t"}, on_event=events.append)
    assert prediction.result == "A summary."
    assert [e.kind for e in events][:2] == ["run_started", "model_request"]
    results = await imp.parallel(summarize, [{"text": "a"}, {"text": "b"}])
    assert [r.result for r in results] == ["A summary.", "A summary."]  # type: ignore[union-attr]
    report = await imp.evaluate(
        summarize, [imp.Example(text="a", result="A summary.").with_inputs("text")], imp.exact_match
    )
    assert report.score == 1.0
    with imp.deadline(5):
        assert (await imp.call(summarize, text="t")).result == "A summary."


async def test_a_deadline_cuts_a_slow_function_program() -> None:
    async def slow(messages: Any, options: Any) -> str:
        await anyio.sleep(5)
        return TAGGED_REPLY

    @imp.fn(lm=imp.StaticLM(handler=slow))
    def summarize(text: str) -> str:
        """Summarize."""

    with pytest.raises(imp.DeadlineExceeded), imp.deadline(0.05):
        await imp.call(summarize, text="t")


def test_demos_and_instructions_are_parameters() -> None:
    lm = scripted(TAGGED_REPLY)

    @imp.fn(lm=lm)
    def summarize(text: str) -> str:
        """Summarize."""

    tuned = summarize.with_demos([{"text": "d", "result": "D."}]).with_instructions("Summarize tersely.")
    assert tuned.demos == ({"text": "d", "result": "D."},) and tuned.signature.instructions == "Summarize tersely."
    tuned("t")
    messages = lm.requests[0].messages
    assert "Summarize tersely." in messages[0]["content"]
    assert messages[2] == {"role": "assistant", "content": "<result>\nD.\n</result>"}


def test_render_shows_the_request_without_sending() -> None:
    lm = scripted()

    @imp.fn(lm=lm)
    def summarize(text: str) -> str:
        """Summarize."""

    rendered = summarize.render(text="t")
    assert rendered.messages[1]["content"] == "<text>\nt\n</text>\n" and lm.requests == []


# --- clear errors ----------------------------------------------------------------------------------


def test_an_unannotated_parameter_or_return_is_refused() -> None:
    def no_param_type(text) -> str:  # type: ignore[no-untyped-def]
        """x"""

    def no_return(text: str):  # type: ignore[no-untyped-def]
        """x"""

    def none_return(text: str) -> None:
        """x"""

    def star(*texts: str) -> str:
        """x"""

    with pytest.raises(FunctionError, match="parameter `text` has no type annotation"):
        imp.fn(no_param_type)
    with pytest.raises(FunctionError, match="no return annotation"):
        imp.fn(no_return)
    with pytest.raises(FunctionError, match="gives no result"):
        imp.fn(none_return)
    with pytest.raises(FunctionError, match=r"\*texts cannot be an input"):
        imp.fn(star)


def test_a_body_that_does_more_than_declare_outputs_is_refused() -> None:
    def computes(text: str) -> str:
        """x"""
        return text.upper()

    def prints(text: str) -> str:
        """x"""
        print(text)

    def assigns(text: str) -> str:
        """x"""
        verdict: str = "fixed"

    for function, what in (
        (computes, "returns something other"),
        (prints, "only declares outputs"),
        (assigns, "only declares outputs"),
    ):
        with pytest.raises(FunctionError, match=what):
            imp.fn(function)


def test_an_output_named_like_an_input_is_refused() -> None:
    def clash(verdict: str) -> int:
        """x"""
        verdict: str = imp.out()  # type: ignore[no-redef]

    def result_clash(result: str) -> int:
        """x"""

    with pytest.raises(FunctionError, match="`verdict` have the name of an input"):
        imp.fn(clash)
    with pytest.raises(FunctionError, match="`result` have the name of an input"):
        imp.fn(result_clash)


def test_a_return_annotation_that_disagrees_with_the_returned_outputs_is_refused() -> None:
    def wrong(text: str) -> int:
        """x"""
        label: str = imp.out()
        return label

    with pytest.raises(FunctionError, match="should be str, not int"):
        imp.fn(wrong)


def test_bad_options_and_templates_are_refused_at_definition() -> None:
    def rate(review: str) -> int:
        """x"""
        verdict: str = imp.out()

    with pytest.raises(TypeError, match="unknown option"):
        imp.fn(temperature=0)(rate)
    with pytest.raises(TypeError, match="either adapter= or template="):
        imp.fn(adapter="chat", template=[imp.user("{review}")])(rate)
    with pytest.raises(TypeError, match="'chat', 'json', 'xml'"):
        imp.fn(adapter="yaml")(rate)
    with pytest.raises(imp.TemplateError, match="no reply form"):
        imp.fn(template=[imp.system("{instruction}"), imp.user("{review}")])(rate)
    with pytest.raises(TypeError, match="decorates a function"):
        imp.fn(print)


def test_a_saved_function_program_keeps_demos_and_template(tmp_path: Any) -> None:
    template = [
        imp.system("{instruction}\n{% for f in outputs %}{f.name}: {f.value}\n{% endfor %}"),
        imp.user("{review}"),
    ]

    @imp.fn(template=template)
    def rate(review: str) -> int:
        """Rate."""
        verdict: str = imp.out("One sentence.")

    tuned = rate.with_demos([{"review": "r", "verdict": "v", "result": 2}])
    path = imp.save(tuned, tmp_path / "rate.json", registry={"rate": rate.fn})
    loaded = imp.load(path, registry={"rate": rate})
    assert isinstance(loaded, imp.FunctionProgram)
    assert loaded.demos == tuned.demos and loaded.program.adapter == tuned.program.adapter  # type: ignore[attr-defined]
    assert loaded.render(review="x") == tuned.render(review="x")
    with pytest.raises(imp.LoadError, match="registry"):
        imp.load(path)


def test_a_function_without_source_says_where_to_define_it() -> None:
    namespace: dict[str, Any] = {"imp": imp}
    exec(compile('def f(text: str) -> str:\n    """x"""\n', "<no source>", "exec"), namespace)
    with pytest.raises(FunctionError, match="its source cannot be read"):
        imp.fn(namespace["f"])


@pytest.mark.parametrize(
    "value",
    ["plain", "two\nlines", "with <tags> & a colon: here", "  padded  ", '{"json": [1, 2]}', "ends with </verdicts"],
)
def test_the_tagged_form_round_trips_awkward_text(value: str) -> None:
    @imp.fn(lm=scripted())
    def rate(review: str) -> int:
        """Rate."""
        verdict: str = imp.out()

    adapter = rate.program.adapter  # type: ignore[attr-defined]
    written = adapter.default_outputs(rate.signature, {"verdict": value, "result": 2}, "")
    assert adapter.parse(rate.signature, written) == {"verdict": value.strip(), "result": 2}
