"""The template language: values, if/else, loops over fields, literal braces, and what it refuses."""

from __future__ import annotations

import pytest

import imp
from imp.adapters._template_text import MAX_DEPTH, For, If, Text, Value, parse_template

SIG = imp.signature("text, context: str | None -> summary", "Summarize.")


def system_of(template: str, inputs: dict[str, object], signature: imp.Signature = SIG) -> str:
    adapter = imp.TemplateAdapter([imp.system(template), imp.user("{% for f in inputs %}{f.value}{% endfor %}")])
    return str(adapter.format(signature, inputs)[0]["content"])


def test_parse_nodes() -> None:
    nodes = parse_template("a {x} {% if y %}b{% else %}c{% endif %}{% for f in inputs %}{f.name}{% endfor %}", "m")
    assert nodes == (
        Text("a "),
        Value("x"),
        Text(" "),
        If(Value("y"), (Text("b"),), (Text("c"),)),
        For("f", "inputs", (Value("f", "name"),)),
    )


def test_values_by_name_and_the_instruction() -> None:
    assert system_of("{instruction} [{text}]", {"text": "hello"}) == "Summarize. [hello]"
    assert system_of("{ text }", {"text": "spaced"}) == "spaced"


def test_if_shows_a_block_only_when_the_input_has_a_value() -> None:
    template = "{% if context %}Context: {context}{% else %}No context.{% endif %}"
    assert system_of(template, {"text": "t", "context": "c"}) == "Context: c"
    for empty in (None, ""):
        assert system_of(template, {"text": "t", "context": empty}) == "No context."


def test_loops_over_inputs_and_outputs_with_each_attribute() -> None:
    sig = imp.signature("a: int, b: list[str] -> c: float, d", "Do.")
    sig = imp.Signature(
        [sig.inputs["a"].replace(desc="the a"), sig.inputs["b"]], list(sig.outputs.values()), sig.instructions
    )
    text = system_of(
        "{% for f in inputs %}{f.name}|{f.type}|{f.desc}|{f.value};{% endfor %}"
        "{% for f in outputs %}{f.name}|{f.type}|{f.value};{% endfor %}",
        {"a": 3, "b": ["x"]},
        sig,
    )
    assert text == 'a|integer|the a|3;b|list of strings||["x"];c|number|(number);d|string|...;'


def test_an_if_on_a_loop_field_tests_its_value() -> None:
    text = system_of("{% for f in inputs %}{% if f.value %}<{f.name}>{% endif %}{% endfor %}", {"text": "t"})
    assert text == "<text>"


def test_literal_braces_and_json_pass_through() -> None:
    assert system_of('{{text}} and {"a": 1} and {', {"text": "x"}) == '{text} and {"a": 1} and {'


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{% if x %}open", "never closed"),
        ("{% endif %}", "does not close"),
        ("{% for f in inputs %}{% endif %}", "does not close"),
        ("{% else %}", "outside"),
        ("{% include 'x' %}", "not part of the template language"),
        ("{% for f in range(3) %}{% endfor %}", "not part of the template language"),
        ("{% for f in fields %}{% endfor %}", "loops over `inputs` or `outputs`"),
        ("{% if a.b.c %}{% endif %}", "is not a name"),
    ],
)
def test_bad_syntax_is_refused_when_the_adapter_is_built(template: str, message: str) -> None:
    with pytest.raises(imp.TemplateError, match=message):
        imp.TemplateAdapter([imp.system(template), imp.user("{text}")])


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{nope}", "`nope` is not an input"),
        ("{text.__class__}", "only a loop's field has attributes"),
        ("{% for f in inputs %}{f.__class__}{% endfor %}", "is a field; write one of"),
        ("{% for f in inputs %}{f}{% endfor %}", "is a field"),
        ("{% if summary %}x{% endif %}", "is not an input"),
    ],
)
def test_a_template_reaches_no_attribute_and_names_only_fields(template: str, message: str) -> None:
    adapter_or_error: object
    try:
        adapter_or_error = imp.TemplateAdapter([imp.system(template), imp.user("{text}")])
    except imp.TemplateError as exc:
        assert message in str(exc) or pytest.fail(str(exc))
        return
    assert isinstance(adapter_or_error, imp.TemplateAdapter)
    with pytest.raises(imp.TemplateError, match=message.replace("(", r"\(")):
        imp.predict(SIG, adapter=adapter_or_error)


def test_code_in_a_template_stays_text() -> None:
    for code in ("{__import__('os').system('echo hi')}", "{text + 1}", "{{ 7*7 }}", "{text()}", "{text.value.upper}"):
        rendered = system_of(code, {"text": "t"})
        assert "49" not in rendered and rendered != "t" and "hi" not in rendered.replace("'echo hi'", "")


def test_nesting_is_bounded() -> None:
    deep = "{% if text %}" * (MAX_DEPTH + 1) + "x" + "{% endif %}" * (MAX_DEPTH + 1)
    with pytest.raises(imp.TemplateError, match="nest deeper"):
        imp.TemplateAdapter([imp.system(deep), imp.user("{text}")])
    ok = "{% if text %}" * MAX_DEPTH + "x" + "{% endif %}" * MAX_DEPTH
    assert system_of(ok, {"text": "t"}) == "x"


def test_construction_errors_name_the_fix() -> None:
    with pytest.raises(imp.TemplateError, match="needs a user message"):
        imp.TemplateAdapter([imp.system("{instruction}")])
    with pytest.raises(imp.TemplateError, match="list of messages"):
        imp.TemplateAdapter("Text: {text}")  # type: ignore[arg-type]
    with pytest.raises(imp.TemplateError, match="at most one"):
        imp.TemplateAdapter([imp.turns(), imp.turns(), imp.user("{text}")])
    with pytest.raises(imp.TemplateError, match="before the request"):
        imp.TemplateAdapter([imp.user("{text}"), imp.turns()])
    with pytest.raises(imp.TemplateError, match="OpenAI-style"):
        imp.TemplateAdapter([{"role": "tool", "content": "x"}, imp.user("{text}")])
    with pytest.raises(imp.TemplateError, match="prefill"):
        imp.TemplateAdapter([imp.user("{text}"), imp.assistant("Answer: {text}")])
    with pytest.raises(imp.TemplateError, match="is a int"):
        imp.TemplateAdapter([3])  # type: ignore[list-item]
