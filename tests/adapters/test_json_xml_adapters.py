"""The JSON and XML adapters: their layouts, tolerant parsing, and XML safety."""

from typing import Any

import pydantic
import pytest

import imp

json_adapter = imp.JSONAdapter()
xml_adapter = imp.XMLAdapter()
SIG = imp.signature("ticket -> team: enum[atlas,harbor], urgency: int, tags: list[str]")


def test_json_layout_asks_for_one_object() -> None:
    system, user = json_adapter.format(SIG, {"ticket": "charged twice"})
    assert "Inputs will have the following structure:\n\n[[ ## ticket ## ]]\n{ticket}" in system["content"]
    assert 'Outputs will be a JSON object with the following fields.\n\n{\n  "team": "{team}' in system["content"]
    assert user["content"] == (
        "[[ ## ticket ## ]]\ncharged twice\n\nRespond with a JSON object in the following order of fields: "
        "`team` (must be formatted as one of: atlas, harbor), then `urgency` (must be formatted as an integer), "
        "then `tags` (must be formatted as a list of strings)."
    )


def test_json_demo_turns_are_pretty_objects() -> None:
    demo = {"ticket": "x", "team": "atlas", "urgency": 2, "tags": ["money"]}
    messages = json_adapter.format(SIG, {"ticket": "y"}, demos=[demo])
    assert messages[2]["content"] == '{\n  "team": "atlas",\n  "urgency": 2,\n  "tags": [\n    "money"\n  ]\n}'


@pytest.mark.parametrize(
    "reply",
    [
        '{"team": "atlas", "urgency": 2, "tags": ["money"]}',
        '```json\n{"team": "atlas", "urgency": "2", "tags": ["money"]}\n```',
        'Sure! Here it is: {"team": "atlas", "urgency": 2, "tags": ["money"]} Hope that helps {.',
        "{'team': 'atlas', 'urgency': 2, 'tags': ['money'],}",
    ],
)
def test_json_parse_repairs_unwraps_and_finds_the_object(reply: str) -> None:
    assert json_adapter.parse(SIG, reply) == {"team": "atlas", "urgency": 2, "tags": ["money"]}


def test_json_parse_errors() -> None:
    with pytest.raises(imp.AdapterParseError, match="cannot be serialized to a JSON object"):
        json_adapter.parse(SIG, "no json at all")
    with pytest.raises(imp.AdapterParseError, match="`team`"):
        json_adapter.parse(SIG, '{"team": "Atlas", "urgency": 1, "tags": []}')
    with pytest.raises(imp.AdapterParseError, match="no output fields"):
        json_adapter.parse(SIG, '{"other": 1}')


def test_strict_schema_falls_back_to_json_object_for_open_objects() -> None:
    open_sig = imp.signature("q -> data: dict")
    lm = imp.ScriptedLM([], response_format="json_schema")
    assert json_adapter.request_options(open_sig, lm) == {"response_format": {"type": "json_object"}}


class Item(pydantic.BaseModel):
    name: str
    qty: int


def _nested_sig() -> imp.Signature:
    class Sig(imp.Signature):
        q: str = imp.InputField()
        answer: str = imp.OutputField()
        goods: list[Item] = imp.OutputField()
        ok: bool = imp.OutputField()

    return Sig


def test_xml_layout_and_request() -> None:
    sig = _nested_sig()
    system, user = xml_adapter.format(sig, {"q": "what?"})
    assert "<q>\n{q}\n</q>" in system["content"]
    assert "<ok>\n{ok}        # note: the value you produce must be True or False\n</ok>" in system["content"]
    assert user["content"].startswith(
        "<q>\nwhat?\n</q>\n\nRespond with the corresponding output fields wrapped in XML tags `<answer>`, then `<goods>`, then `<ok>`."
    )
    assert "`<item>` for each list item" in user["content"]


def test_xml_nested_values_as_nested_tags_both_ways() -> None:
    sig = _nested_sig()
    reply = (
        "<answer>Tom & Jerry say 1 < 2</answer>\n"
        "<goods>\n  <item><name>apple</name><qty>3</qty></item>\n  <item><name>pear</name><qty>1</qty></item>\n</goods>\n"
        "<ok>true</ok>\n<answer>second is ignored</answer>"
    )
    parsed = xml_adapter.parse(sig, reply)
    assert parsed == {
        "answer": "Tom & Jerry say 1 < 2",
        "goods": [Item(name="apple", qty=3), Item(name="pear", qty=1)],
        "ok": True,
    }
    demo = {"q": "x", "answer": "a < b", "goods": [{"name": "fig", "qty": 2}], "ok": False}
    content = xml_adapter.format(sig, {"q": "y"}, demos=[demo])[2]["content"]
    assert "<answer>\na &lt; b\n</answer>" in content
    assert "<item>\n  <name>fig</name>\n  <qty>2</qty>\n</item>" in content
    assert xml_adapter.parse(sig, content) == {"answer": "a < b", "goods": [Item(name="fig", qty=2)], "ok": False}


def test_xml_accepts_json_inside_a_tag_and_entities() -> None:
    sig = _nested_sig()
    reply = '<answer>A &amp; B</answer><goods>[{"name": "kiwi", "qty": 4}]</goods><ok>no</ok>'
    assert xml_adapter.parse(sig, reply) == {"answer": "A & B", "goods": [Item(name="kiwi", qty=4)], "ok": False}


@pytest.mark.parametrize(
    "reply",
    [
        '<!DOCTYPE x [<!ENTITY boom "boom">]><answer>&boom;</answer>',
        '<?xml version="1.0"?><answer>x</answer>',
        "<!ENTITY lol 'lol'><answer>x</answer>",
    ],
)
def test_xml_refuses_declarations_doctypes_and_entities(reply: str) -> None:
    with pytest.raises(imp.AdapterParseError, match="not allowed"):
        xml_adapter.parse(imp.signature("q -> answer"), reply)


def test_xml_depth_and_size_are_bounded() -> None:
    sig = imp.signature("q -> data: list[Any]")
    levels = imp.ParseLimits().max_depth + 1
    deep = "<data>" + "<item>" * levels + "x" + "</item>" * levels + "</data>"
    with pytest.raises(imp.AdapterParseError, match="deeper than 100 levels"):
        xml_adapter.parse(sig, deep)
    with pytest.raises(imp.AdapterParseError, match="over the limit of 4,000,000"):
        xml_adapter.parse(sig, "<data>" + "x" * 4_000_001 + "</data>")


def test_xml_missing_tag_is_an_error() -> None:
    with pytest.raises(imp.AdapterParseError, match="no output fields"):
        xml_adapter.parse(imp.signature("q -> answer"), "just prose")


def test_every_adapter_parses_a_mapping_the_same_way() -> None:
    values: dict[str, Any] = {"team": "harbor", "urgency": "3", "tags": ["a"]}
    for adapter in (imp.ChatAdapter(), json_adapter, xml_adapter):
        assert adapter.parse(SIG, values) == {"team": "harbor", "urgency": 3, "tags": ["a"]}


def test_the_text_field_exception_holds_in_every_dialect() -> None:
    step = imp.signature("question -> next_thought: str | None, answer: str | None").with_metadata(
        text_field="next_thought", answer_fields=("answer",)
    )
    for adapter in (imp.ChatAdapter(), json_adapter, xml_adapter):
        assert adapter.parse(step, "I will look it up.") == {"next_thought": "I will look it up.", "answer": None}
    assert json_adapter.parse(step, '{"answer": "42"}') == {"next_thought": None, "answer": "42"}
    assert xml_adapter.parse(step, "<answer>42</answer>") == {"next_thought": None, "answer": "42"}


FORM = imp.TemplateAdapter(
    [
        imp.system("{instruction}\n\nAnswer in this form:\n{% for f in outputs %}{f.name}: {f.value}\n{% endfor %}"),
        imp.user("{question}"),
    ]
)


@pytest.mark.parametrize("adapter", [imp.ChatAdapter(), json_adapter, xml_adapter, FORM], ids=lambda a: a.name)
@pytest.mark.parametrize(
    "reply",
    [
        "Thinking...\n[[ ## other ## ]]\nx",  # any marker line
        "Here: <answer>42</answer>",  # an opening tag for an output
        'Result: {"answer": "42"}',  # a JSON object with an output key
        "   \n  ",  # blank
    ],
)
def test_the_text_field_exception_is_narrow_in_every_dialect_templates_included(
    adapter: imp.Adapter, reply: str
) -> None:
    """A reply that tried to answer in fields (in any dialect's form) is not taken as the text field, under a
    template as under the other adapters: it is read by the adapter's own rules (its own dialect's tag or
    object is its answer), else a parse error, so the JSON fallback reads it."""
    step = imp.signature("question -> next_thought: str | None, answer: str | None").with_metadata(
        text_field="next_thought"
    )
    assert adapter.parse(step, "I will look it up.") == {"next_thought": "I will look it up.", "answer": None}
    try:
        parsed = adapter.parse(step, reply)
    except imp.AdapterParseError:
        return
    assert parsed == {"next_thought": None, "answer": "42"}, parsed  # the dialect's own form, read as fields


def test_a_template_steps_json_reply_is_read_by_its_json_fallback_not_taken_as_text() -> None:
    step = imp.signature("question -> next_thought: str | None, answer: str | None").with_metadata(
        text_field="next_thought"
    )
    lm = imp.ScriptedLM(['{"answer": "42"}'] * 2)
    prediction = imp.call_sync(imp.predict(step, adapter=FORM, lm=lm), question="6 x 7?")
    assert (prediction.answer, prediction.next_thought) == ("42", None)
    assert prediction.metadata.json_fallback and prediction.metadata.adapter == "TemplateJSONAdapter"
