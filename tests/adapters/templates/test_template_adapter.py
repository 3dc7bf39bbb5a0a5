"""The template adapter: messages, turns, prefill, the reply form as the parser, every renderer seam of the Chat adapter."""

from __future__ import annotations

import datetime as dt
from typing import Any, Literal

import pydantic
import pytest

import imp
from imp.history import ToolCall, ToolResult
from imp.programs.react._messages import guidance_lines

FORM = "{% for f in outputs %}{f.name}: {f.value}\n{% endfor %}"
RATE = imp.Signature(
    [imp.signature("review -> x").inputs["review"]],
    [
        imp.signature("a -> verdict").outputs["verdict"].replace(desc="One short sentence."),
        imp.signature("a -> result: int").outputs["result"],
    ],
    "Rate the review from 1 to 5 stars.",
)
RATE_TEMPLATE = [
    imp.system("{instruction}\n\nAnswer in this form:\n" + FORM),
    imp.turns(),
    imp.user("Review: {review}"),
]
PIRATE = [imp.system("You are a helpful pirate. {instruction}"), imp.user("Text: {text}")]
SUMMARY = imp.signature("text -> summary", "Summarize in ten words.")


def roles(messages: list[Any]) -> list[str]:
    return [m["role"] for m in messages]


def test_the_messages_of_a_request() -> None:
    messages = imp.TemplateAdapter(PIRATE).format(SUMMARY, {"text": "Models are mature."})
    assert messages == [
        {"role": "system", "content": "You are a helpful pirate. Summarize in ten words."},
        {"role": "user", "content": "Text: Models are mature."},
    ]


def test_openai_style_dicts_are_the_same_template() -> None:
    dicts = [
        {"role": "system", "content": "You are a helpful pirate. {instruction}"},
        {"role": "user", "content": "Text: {text}"},
    ]
    assert imp.TemplateAdapter(dicts) == imp.TemplateAdapter(PIRATE)
    assert imp.TemplateAdapter(dicts).format(SUMMARY, {"text": "x"}) == imp.TemplateAdapter(PIRATE).format(
        SUMMARY, {"text": "x"}
    )


def test_the_reply_form_is_shown_with_placeholders_and_guidance() -> None:
    (system, user) = imp.TemplateAdapter(RATE_TEMPLATE).format(RATE, {"review": "Great tacos."})
    assert system["content"] == (
        "Rate the review from 1 to 5 stars.\n\nOutput guidance:\n- verdict: One short sentence.\n\n"
        "Answer in this form:\nverdict: ...\nresult: (integer)\n"
    )
    assert user == {"role": "user", "content": "Review: Great tacos."}


def test_demos_and_history_go_at_turns_and_are_written_in_the_form() -> None:
    history = imp.History([{"review": "Meh.", "verdict": "Lukewarm.", "result": 3}])
    with_history = imp.Signature(
        [*RATE.inputs.values(), imp.Field("history", "input", imp.History)],
        list(RATE.outputs.values()),
        RATE.instructions,
    )
    demos = [{"review": "Awful.", "verdict": "Negative.", "result": 1}]
    messages = imp.TemplateAdapter(RATE_TEMPLATE).format(
        with_history, {"review": "Great.", "history": history}, demos=demos
    )
    assert roles(messages) == ["system", "user", "assistant", "user", "assistant", "user"]
    assert messages[1:5] == [
        {"role": "user", "content": "Review: Awful."},
        {"role": "assistant", "content": "verdict: Negative.\nresult: 1"},
        {"role": "user", "content": "Review: Meh."},
        {"role": "assistant", "content": "verdict: Lukewarm.\nresult: 3"},
    ]


def test_without_turns_demos_go_right_before_the_last_user_message() -> None:
    template = [imp.system("S"), imp.user("Fixed: read carefully."), imp.assistant("OK."), imp.user("Text: {text}")]
    messages = imp.TemplateAdapter(template).format(SUMMARY, {"text": "t"}, demos=[{"text": "d", "summary": "s"}])
    assert [(m["role"], m["content"]) for m in messages] == [
        ("system", "S"),
        ("user", "Fixed: read carefully."),
        ("assistant", "OK."),
        ("user", "Text: d"),
        ("assistant", "s"),
        ("user", "Text: t"),
    ]


def test_a_last_assistant_message_is_a_prefill_sent_and_read_as_the_start_of_the_reply() -> None:
    adapter = imp.TemplateAdapter([*RATE_TEMPLATE, imp.assistant("verdict:")])
    messages = adapter.format(RATE, {"review": "Great."})
    assert messages[-1] == {"role": "assistant", "content": "verdict:"}
    continued = " Good.\nresult: 5"  # a model that continues the prefill
    repeated = "verdict: Good.\nresult: 5"  # a model that starts over
    assert adapter.parse(RATE, continued) == adapter.parse(RATE, repeated) == {"verdict": "Good.", "result": 5}


def test_with_a_prefill_and_no_form_a_demo_value_must_start_with_the_prefill() -> None:
    adapter = imp.TemplateAdapter([*PIRATE, imp.assistant("Arr:")])
    with pytest.raises(imp.TemplateError, match="does not start with the prefill 'Arr:'"):
        imp.predict(SUMMARY, adapter=adapter, demos=[{"text": "t", "summary": "Models be ready."}])
    demo = {"text": "t", "summary": "Arr: models be ready."}
    written = adapter.format(SUMMARY, {"text": "x"}, demos=[demo])[2]["content"]
    assert adapter.parse(SUMMARY, written) == {"summary": "Arr: models be ready."}


def test_one_output_and_no_form_the_whole_reply_is_the_value() -> None:
    adapter = imp.TemplateAdapter(PIRATE)
    assert adapter.parse(SUMMARY, "  Arr, models be ready.\n") == {"summary": "Arr, models be ready."}
    with pytest.raises(imp.AdapterParseError, match="empty"):
        adapter.parse(SUMMARY, "  \n")


@pytest.mark.parametrize(
    ("annotation", "value", "text"),
    [
        (int, 4, "4"),
        (float, 2.5, "2.5"),
        (bool, True, "true"),
        (list[str], ["a", "b"], '["a", "b"]'),
        (Literal["yes", "no"], "no", "no"),
        (dt.date, dt.date(2026, 1, 2), "2026-01-02"),
        (dict[str, int], {"a": 1}, '{"a": 1}'),
    ],
)
def test_every_type_round_trips_through_the_form(annotation: Any, value: Any, text: str) -> None:
    sig = imp.Signature(
        [imp.signature("review -> x").inputs["review"]],
        [RATE.outputs["verdict"], RATE.outputs["result"].replace(annotation=annotation)],
        "Rate.",
    )
    adapter = imp.TemplateAdapter(RATE_TEMPLATE)
    written = adapter.format(sig, {"review": "r"}, demos=[{"review": "d", "verdict": "v", "result": value}])[2]
    assert written["content"] == f"verdict: v\nresult: {text}"
    assert adapter.parse(sig, written["content"]) == {"verdict": "v", "result": value}


def test_a_pydantic_model_output_round_trips() -> None:
    class Point(pydantic.BaseModel):
        x: int
        y: int

    sig = imp.Signature(
        [RATE.inputs["review"]], [RATE.outputs["verdict"], RATE.outputs["result"].replace(annotation=Point)]
    )
    adapter = imp.TemplateAdapter(RATE_TEMPLATE)
    text = adapter.default_outputs(sig, {"verdict": "v", "result": Point(x=1, y=2)}, "")
    assert adapter.parse(sig, text) == {"verdict": "v", "result": Point(x=1, y=2)}


def test_the_reply_is_read_by_the_text_around_each_value() -> None:
    adapter = imp.TemplateAdapter(RATE_TEMPLATE)
    reply = "Sure!\nverdict:   Positive, and loud.  \nresult:\n4\n"
    assert adapter.parse(RATE, reply) == {"verdict": "Positive, and loud.", "result": 4}
    with pytest.raises(imp.AdapterParseError, match="missing output field"):
        adapter.parse(RATE, "verdict: ok")
    with pytest.raises(imp.AdapterParseError, match="no output fields"):
        adapter.parse(RATE, "I liked it.")
    with pytest.raises(imp.AdapterParseError, match="integer"):
        adapter.parse(RATE, "verdict: ok\nresult: four")


def test_an_inline_form_is_read_back_too() -> None:
    template = [
        imp.system("{instruction}\nAnswer as:\nVerdict = {verdict} | Stars = {result}\nThanks."),
        imp.user("{review}"),
    ]
    adapter = imp.TemplateAdapter(template)
    assert "Verdict = ... | Stars = (integer)" in adapter.format(RATE, {"review": "r"})[0]["content"]
    text = adapter.default_outputs(RATE, {"verdict": "fine", "result": 3}, "")
    assert text == "Verdict = fine | Stars = 3"
    assert adapter.parse(RATE, text) == {"verdict": "fine", "result": 3}


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ([imp.system("{instruction}"), imp.user("{review}")], "no reply form, and the signature has 2 outputs"),
        ([imp.system("{% for f in outputs %}{f.value}{% endfor %}"), imp.user("{review}")], "no text between"),
        ([imp.system("{verdict}{result}"), imp.user("{review}")], "no text between"),
        ([imp.system("v: {verdict}"), imp.user("{review}")], "no place for `result`"),
        ([imp.system(FORM), imp.user("{review}\n" + FORM)], "spells the reply form twice"),
        (
            [imp.system("{% for f in outputs %}{f.name}: {f.value} {review}\n{% endfor %}"), imp.user("{review}")],
            "cannot show `review`",
        ),
        ([imp.system("{% if review %}{verdict}: {result}{% endif %}"), imp.user("{review}")], "inside `{% if %}`"),
    ],
)
def test_a_template_that_cannot_be_read_back_is_refused_when_the_program_is_built(
    template: list[Any], message: str
) -> None:
    lm = imp.ScriptedLM([])
    with pytest.raises(imp.TemplateError, match=message.replace("(", r"\(").replace("{", r"\{").replace("}", r"\}")):
        imp.predict(RATE, adapter=imp.TemplateAdapter(template), lm=lm)
    assert lm.requests == []


def test_a_demo_holding_the_forms_own_text_is_refused() -> None:
    adapter = imp.TemplateAdapter(RATE_TEMPLATE)
    bad = [{"review": "r", "verdict": "Fine. result: 2 stars", "result": 2}]
    with pytest.raises(imp.TemplateError, match="result:"):
        imp.predict(RATE, adapter=adapter, demos=bad)
    with pytest.raises(imp.TemplateError, match="result:"):
        adapter.format(RATE, {"review": "x"}, demos=bad)
    imp.predict(RATE, adapter=adapter, demos=[{"review": "r", "verdict": "Fine, 2 results", "result": 2}])


def test_user_name_names_the_last_user_message() -> None:
    messages = imp.TemplateAdapter(PIRATE).format(SUMMARY, {"text": "t", "user_name": "alice"})
    assert messages[-1] == {"role": "user", "content": "Text: t", "name": "alice"}


# --- the Chat adapter's renderer seams --------------------------------------------------------------


def test_system_renderer_adds_to_the_templates_system_message() -> None:
    def system_renderer(signature: imp.Signature, opts: dict[str, Any]) -> str:
        return "Answer tersely.\n\n" + opts["default_system"](signature, opts)

    messages = imp.TemplateAdapter([imp.system("Pirate for {text}."), imp.user("{text}")]).format(
        SUMMARY, {"text": "Bob"}, system_renderer=system_renderer
    )
    assert messages[0]["content"] == "Answer tersely.\n\nPirate for Bob."


def test_system_renderer_without_a_system_message_adds_one() -> None:
    messages = imp.TemplateAdapter([imp.user("{text}")]).format(
        SUMMARY, {"text": "t"}, system_renderer=lambda s, o: "Be brief."
    )
    assert messages == [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "t"}]


def test_input_section_renderer_renders_each_input_value() -> None:
    messages = imp.TemplateAdapter(PIRATE).format(
        SUMMARY, {"text": "a long text"}, input_section_renderer=lambda field, value: value[:6] + "..."
    )
    assert messages[-1]["content"] == "Text: a long..."


@pytest.mark.parametrize("arity", [3, 4])
def test_output_renderer_writes_demo_replies(arity: int) -> None:
    def three(signature: imp.Signature, outputs: Any, missing: str) -> str:
        return "OUT " + ",".join(str(v) for v in outputs.values())

    def four(signature: imp.Signature, outputs: Any, missing: str, opts: Any) -> str:
        return "OUT " + opts["default_outputs"](signature, outputs, missing)

    messages = imp.TemplateAdapter(RATE_TEMPLATE).format(
        RATE,
        {"review": "x"},
        demos=[{"review": "d", "verdict": "v", "result": 2}],
        output_renderer=three if arity == 3 else four,
    )
    assert messages[2]["content"] == ("OUT v,2" if arity == 3 else "OUT verdict: v\nresult: 2")


def test_tool_turns_tool_result_renderer_and_history_note_renderer() -> None:
    sig = imp.Signature(
        [SUMMARY.inputs["text"], imp.Field("history", "input", imp.History)], list(SUMMARY.outputs.values())
    )
    call = ToolCall("c1", "look", {"q": "x"})
    history = imp.History(
        [
            {
                "text": "first",
                "next_thought": "look it up",
                "tool_calls": [call],
                "tool_call_results": [ToolResult("c1", "look", "found")],
            }
        ]
    )
    messages = imp.TemplateAdapter(PIRATE).format(
        sig,
        {"text": "t", "history": history},
        tool_result_renderer=lambda result, info: f"[{info['name']}] {result.result}",
        history_note_renderer=lambda signature, turn: "note: looked",
    )
    assert roles(messages) == ["system", "user", "assistant", "tool", "user", "user"]
    assert messages[1]["content"] == "Text: first"
    assert messages[2]["tool_calls"][0].name == "look"
    assert messages[3] == {"role": "tool", "tool_call_id": "c1", "content": "[look] found"}
    assert messages[4]["content"] == "note: looked"


def test_omit_empty_request_and_guidance() -> None:
    sig = imp.signature("text: str | None -> summary", "Summarize.")
    adapter = imp.TemplateAdapter(PIRATE)
    assert roles(adapter.format(sig, {"text": None}, omit_empty_request=True)) == ["system"]
    guidance = imp.Guidance(tuple(guidance_lines(tool_names=["look"])))
    guided = adapter.format(sig, {"text": "t"}, guidance=guidance, agent_line="You are a pirate agent.")
    assert "You are a pirate agent.\nCall tools when more information is needed." in guided[0]["content"]
    assert "The available tools are: `look`." in guided[0]["content"]


def test_response_instruction_is_the_json_fallbacks() -> None:
    adapter = imp.TemplateAdapter(RATE_TEMPLATE)
    assert adapter.response_instruction(RATE) is None
    fallback = adapter.fallback
    assert isinstance(fallback, imp.TemplateAdapter) and fallback.name == "TemplateJSONAdapter"
    messages = fallback.format(RATE, {"review": "r"})
    assert messages[0]["content"].endswith('Answer in this form:\n{"verdict": "...", "result": "(integer)"}')
    assert messages[-1]["content"].startswith("Review: r\n\nRespond with a JSON object")
    assert "Respond with" not in fallback.format(RATE, {"review": "r"}, response_instruction=False)[-1]["content"]
    assert fallback.parse(RATE, '{"verdict": "ok", "result": 5}') == {"verdict": "ok", "result": 5}
    demo = fallback.format(RATE, {"review": "r"}, demos=[{"review": "d", "verdict": "v", "result": 1}])[2]
    assert fallback.parse(RATE, demo["content"]) == {"verdict": "v", "result": 1}


def test_repr_dump_and_load() -> None:
    adapter = imp.TemplateAdapter([*RATE_TEMPLATE, imp.assistant("verdict:")])
    assert repr(adapter).startswith("TemplateAdapter([imp.system('{instruction}")
    assert "imp.turns()" in repr(adapter)
    assert imp.TemplateAdapter.load(adapter.dump()) == adapter
