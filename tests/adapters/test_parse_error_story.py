"""A parse error says what happened, for every adapter and template: the adapters that read a reply,
and a short, redacted excerpt of what the model wrote (the fallback's reply too)."""

from __future__ import annotations

from typing import Any

import pytest

import imp
from imp.errors import EXCERPT_CHARS, reply_excerpt
from imp.programs.function import TAGGED

QA = imp.signature("question -> answer: bool")
FORM = "{% for f in outputs %}{f.name}: {f.value}\n{% endfor %}"
TEMPLATE = imp.TemplateAdapter([imp.system("{instruction}\n\nAnswer in this form:\n" + FORM), imp.user("{question}")])

ADAPTERS: dict[str, imp.Adapter] = {
    "chat": imp.ChatAdapter(),
    "json": imp.JSONAdapter(),
    "xml": imp.XMLAdapter(),
    "template": TEMPLATE,
    "template's JSON fallback": TEMPLATE.fallback,  # type: ignore[dict-item]
    "function programs' tagged template": TAGGED,
}
FALLBACKS = {"chat": "JSONAdapter", "xml": "JSONAdapter", "template": "TemplateJSONAdapter"}
"""The adapters that ask again with a JSON fallback, and which."""

REPLIES = {
    "prose": "I think the sky is blue, so yes.",
    "a wrong value": None,  # the adapter's own dialect, with a value that is not a bool
}


def wrong_value(name: str) -> str:
    """A reply in the adapter's own dialect whose `answer` is not a boolean."""
    if name in ("json", "template's JSON fallback"):
        return '{"answer": "perhaps"}'
    if name == "xml":
        return "<answer>perhaps</answer>"
    if name == "template":
        return "answer: perhaps\n"
    if name == "function programs' tagged template":
        return "<answer>\nperhaps\n</answer>"
    return "[[ ## answer ## ]]\nperhaps\n\n[[ ## completed ## ]]"


@pytest.mark.parametrize("name", list(ADAPTERS))
@pytest.mark.parametrize("kind", ["prose", "a wrong value"])
def test_every_adapter_quotes_what_the_model_wrote(name: str, kind: str) -> None:
    reply = REPLIES[kind] or wrong_value(name)
    with pytest.raises(imp.AdapterParseError) as info:
        ADAPTERS[name].parse(QA, reply)
    error = info.value
    assert str(error).startswith(f"{ADAPTERS[name].name} could not parse the reply: ")
    assert f"the model wrote {reply!r}" in str(error)
    assert error.completion == reply and error.adapters_tried == (ADAPTERS[name].name,)


@pytest.mark.parametrize("name", list(ADAPTERS))
def test_an_empty_reply_says_it_was_empty_instead(name: str) -> None:
    with pytest.raises(imp.AdapterParseError) as info:
        ADAPTERS[name].parse(QA, "  \n")
    assert "the reply was empty" in str(info.value) and "the model wrote '" not in str(info.value)


def test_a_long_reply_is_quoted_by_its_start_and_end_saying_how_much_is_left_out() -> None:
    reply = "Once upon a time " + "and then " * 500 + "the end."
    with pytest.raises(imp.AdapterParseError) as info:
        imp.ChatAdapter().parse(QA, reply)
    message = str(info.value)
    assert "'Once upon a time" in message and "the end.'" in message
    left_out = len(reply) - EXCERPT_CHARS
    assert f"[... {left_out:,} characters left out ...]" in message
    assert len(message) < 200 + EXCERPT_CHARS + 60


@pytest.mark.parametrize(
    "secret",
    [
        "sk-proj-abcdefghijklmnopqrstuvwxyz0123",
        "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.abcdefghijkl",
        "ghp_abcdefghijklmnopqrstuvwxyz0123456789",
    ],
)
def test_a_secret_the_model_repeats_is_redacted_in_the_message(secret: str) -> None:
    reply = f"Use {secret} to log in."
    for adapter in ADAPTERS.values():
        with pytest.raises(imp.AdapterParseError) as info:
            adapter.parse(QA, reply)
        assert secret not in str(info.value) and "[REDACTED]" in str(info.value)


def test_a_mapping_reply_is_quoted_as_json() -> None:
    assert reply_excerpt({"answer": "perhaps"}) == repr('{"answer": "perhaps"}')
    with pytest.raises(imp.AdapterParseError, match=r"""the model wrote '\{"answer": "perhaps"\}'"""):
        imp.ChatAdapter().parse(QA, {"answer": "perhaps"})


# --- a program that asked again with the JSON fallback ----------------------------------------


def program_for(name: str, lm: imp.ScriptedLM) -> imp.Predict:
    return imp.predict(QA, lm=lm, adapter=ADAPTERS[name])


@pytest.mark.parametrize("name", sorted(FALLBACKS))
def test_a_failed_fallback_is_named_with_both_replies(name: str) -> None:
    lm = imp.ScriptedLM(["Yes, the sky is blue.", "Still yes."])
    with pytest.raises(imp.AdapterParseError) as info:
        imp.call_sync(program_for(name, lm), question="Is the sky blue?")
    error, message = info.value, str(info.value)
    first, fallback = ADAPTERS[name].name, FALLBACKS[name]
    assert error.adapters_tried == (first, fallback)
    assert error.fallback is not None and error.fallback.adapter == fallback
    assert error.fallback.completion == "Still yes."
    assert message.startswith(f"{first} could not parse the reply: ")
    assert "the model wrote 'Yes, the sky is blue.'" in message
    assert f"Asked again with the JSON fallback (no response_format), {fallback} could not parse" in message
    assert message.endswith("the model wrote 'Still yes.'")
    assert len(lm.requests) == 2


@pytest.mark.parametrize("name", sorted(FALLBACKS))
def test_without_the_fallback_one_adapter_is_named(name: str) -> None:
    lm = imp.ScriptedLM(["Yes, the sky is blue."])
    program = imp.predict(QA, lm=lm, adapter=ADAPTERS[name], json_fallback=False)
    with pytest.raises(imp.AdapterParseError) as info:
        imp.call_sync(program, question="Is the sky blue?")
    assert info.value.adapters_tried == (ADAPTERS[name].name,) and "fallback" not in str(info.value)


def test_the_fallbacks_response_format_is_named() -> None:
    lm = imp.ScriptedLM(["Yes.", "Still yes."])
    lm.capabilities = imp.LMCapabilities(response_format="json_object")
    with pytest.raises(imp.AdapterParseError, match=r"JSON fallback \(response_format json_object\)"):
        imp.call_sync(imp.predict(QA, lm=lm), question="Is the sky blue?")


def test_a_react_turn_that_ends_on_a_parse_error_records_the_excerpt() -> None:
    @imp.tool
    def look(query: str) -> str:
        """Look something up."""
        return query

    lm = imp.ScriptedLM([], exhausted="[[ ## answer ## ]]\nperhaps")
    prediction = imp.call_sync(imp.react(QA, [look], lm=lm), question="Is the sky blue?")
    errors: Any = prediction.metadata.termination_error
    assert not prediction.complete and prediction.metadata.termination_cause == "parse_error"
    assert errors and all("the model wrote '[[ ## answer ## ]]\\nperhaps'" in e for e in errors), errors
    assert "Asked again with the JSON fallback" in errors[-1]  # the extractor's Predict asked again


def test_a_provider_error_on_the_fallbacks_request_is_raised_as_itself_saying_why_it_was_sent() -> None:
    lm = imp.ScriptedLM(["Yes, the sky is blue.", imp.LMError("busy", status=503, provider="openai")])
    with pytest.raises(imp.ProviderUnavailable) as info:
        imp.call_sync(imp.predict(QA, lm=lm), question="Is the sky blue?")
    (note,) = info.value.__notes__
    assert note.startswith("(the JSON fallback's request, sent because ChatAdapter could not parse the reply")
    assert "the model wrote 'Yes, the sky is blue.'" in note


def test_a_description_in_single_quotes_says_to_use_double_quotes() -> None:
    with pytest.raises(
        imp.SignatureError, match=r'a description is written in double quotes: `name: type "description"`'
    ):
        imp.signature("question -> answer: str 'the answer'")
