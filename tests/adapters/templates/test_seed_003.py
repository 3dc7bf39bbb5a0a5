"""Seed 003's walkthrough in imp's syntax: the default layout, Chat, the pirate template, `rate`, the history."""
# ruff: noqa: F841 - a function program declares outputs as locals that its body never reads

from __future__ import annotations

import io
import re

import pytest

import imp

TEXT = "Foundation models are now mature enough to be used in real applications, provided they are measured like any other component."


def history(n: int = 1) -> str:
    """The printed history, its timestamp replaced (the rest is exactly what imp prints)."""
    text = imp.inspect_history(n, file=io.StringIO())
    return re.sub(r"^\[\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\]", "[T]", text, flags=re.MULTILINE)


def usage_reply(text: str, tokens_in: int, tokens_out: int) -> imp.LMResponse:
    return imp.LMResponse(text=text, usage=imp.Usage(input_tokens=tokens_in, output_tokens=tokens_out, requests=1))


class Model(imp.LM):
    """Answers with the next reply and its token counts, as a provider reports them."""

    provider, model = "openai", "gpt-4.1-mini"

    def __init__(self, *replies: imp.LMResponse) -> None:
        self.replies = list(replies)

    async def request(self, messages: object, **options: object) -> imp.LMResponse:
        return self.replies.pop(0)


@pytest.fixture
def lm() -> Model:
    return Model(
        usage_reply(
            "<result>\nFoundation models have reached a level of maturity suitable for real applications, as long "
            "as they are evaluated like any other component.\n</result>",
            65,
            31,
        ),
        usage_reply(
            "[[ ## result ## ]]\nClear prompts are more effective than short ones, despite the higher cost of short "
            "prompts.\n\n[[ ## completed ## ]]",
            72,
            28,
        ),
        usage_reply("Foundation models mature, enabling practical use in real-world applications.", 40, 12),
        usage_reply("verdict: Positive and concise review with a clear intention to return.  \nresult: 4", 62, 20),
    )


def test_the_walkthrough(lm: Model) -> None:
    imp.configure(lm=lm)
    try:
        _walkthrough()
    finally:
        imp.configure(lm=None)


def _walkthrough() -> None:
    @imp.fn
    def summarize(text: str) -> str:
        """Summarize the text in one sentence."""
        ...

    summary = summarize(TEXT)
    assert summary.startswith("Foundation models have reached a level of maturity")
    assert history() == (
        "[T] summarize -> gpt-4.1-mini\n\n"
        "System message:\n\n"
        "Function: summarize\n\nSummarize the text in one sentence.\n\n"
        "Reply in exactly this form:\n<result>\n...\n</result>\n\n\n"
        "User message:\n\n"
        f"<text>\n{TEXT}\n</text>\n\n\n"
        "Response:\n\n"
        "<result>\nFoundation models have reached a level of maturity suitable for real applications, as long as "
        "they are evaluated like any other component.\n</result>\n\n"
        "(finish: stop; tokens in 65, out 31)\n\n"
    )

    chat = summarize.using(adapter="chat")("Short prompts are cheaper, but clear ones are better.")
    assert chat == "Clear prompts are more effective than short ones, despite the higher cost of short prompts."
    printed = history()
    assert printed.startswith("[T] summarize -> gpt-4.1-mini\n\nSystem message:\n\n")
    assert "[[ ## result ## ]]" in printed and printed.endswith("(finish: stop; tokens in 72, out 28)\n\n")

    @imp.fn(template=[imp.system("You are a helpful pirate. {instruction}"), imp.user("Text: {text}")])
    def pirate_summary(text: str) -> str:
        """Summarize in ten words."""

    assert (
        pirate_summary("Foundation models are now mature enough to be used in real-world applications.")
        == "Foundation models mature, enabling practical use in real-world applications."
    )

    @imp.fn(
        template=[
            imp.system(
                "{instruction}\n\nAnswer in this form:\n{% for f in outputs %}{f.name}: {f.value}\n{% endfor %}"
            ),
            imp.turns(),
            imp.user("Review: {review}"),
        ]
    )
    def rate(review: str) -> int:
        """Rate the review from 1 to 5 stars."""
        verdict: str = imp.out("One short sentence.")

    assert dict(rate.predict("Great tacos, loud music. I'll be back.")) == {
        "verdict": "Positive and concise review with a clear intention to return.",
        "result": 4,
    }
    assert history() == (
        "[T] rate -> gpt-4.1-mini\n\n"
        "System message:\n\n"
        "Function: rate\n\nRate the review from 1 to 5 stars.\n\n"
        "Output guidance:\n- verdict: One short sentence.\n\n"
        "Answer in this form:\nverdict: ...\nresult: (integer)\n\n\n"
        "User message:\n\n"
        "Review: Great tacos, loud music. I'll be back.\n\n"
        "Response:\n\n"
        "verdict: Positive and concise review with a clear intention to return.  \nresult: 4\n\n"
        "(finish: stop; tokens in 62, out 20)\n\n"
    )
    assert history(2).count("-> gpt-4.1-mini") == 2


def test_turns_is_where_the_worked_examples_go(lm: Model) -> None:
    @imp.fn(
        lm=imp.ScriptedLM(["verdict: Fine.\nresult: 3"]),
        template=[
            imp.system(
                "{instruction}\n\nAnswer in this form:\n{% for f in outputs %}{f.name}: {f.value}\n{% endfor %}"
            ),
            imp.turns(),
            imp.user("Review: {review}"),
        ],
        demos=[{"review": "Cold food.", "verdict": "Negative.", "result": 1}],
    )
    def rate(review: str) -> int:
        """Rate the review from 1 to 5 stars."""
        verdict: str = imp.out("One short sentence.")

    assert rate("OK food.") == 3
    assert [m["role"] for m in rate.program.lm.requests[0].messages] == ["system", "user", "assistant", "user"]  # type: ignore[attr-defined]


def test_the_history_prints_tool_calls_as_name_and_json_arguments() -> None:
    secret = "sk-abcdefghijklmnopqrstuvwx"
    lm = imp.ScriptedLM([{"tool_calls": [{"name": "look", "arguments": {"q": "tacos", "key": secret}}]}, "Done."])

    def look(q: str, key: str) -> str:
        """Look up."""
        return "found"

    imp.call_sync(imp.react(imp.signature("question -> answer"), [look], lm=lm), question=f"use {secret}")
    printed = history(2)
    assert '-> look {"q": "tacos", "key": "[REDACTED]"}  [call_1_0]' in printed
    assert "Tool message:\n\nfound\n\n" in printed
    assert secret not in printed
    assert printed.count("(finish: ") == 2
    assert "\x1b[" not in printed


def test_the_history_without_a_function_program_names_the_program_kind() -> None:
    imp.call_sync(imp.predict("q -> a", lm=imp.ScriptedLM(["[[ ## a ## ]]\nx"])), q="y")
    assert history().startswith("[T] Predict -> scripted\n\nSystem message:")
    imp.call_sync(imp.chain_of_thought("q -> a", lm=imp.ScriptedLM([{"reasoning": "r", "a": "x"}])), q="y")
    assert history().startswith("[T] ChainOfThought -> scripted\n\nSystem message:")
    agent = imp.react("q -> a", [], lm=imp.ScriptedLM([{"a": "x", "tool_calls": []}]))
    imp.call_sync(agent, q="y")
    assert history().startswith("[T] ReAct -> scripted\n\nSystem message:")


def test_response_fields_print_as_json() -> None:
    imp.call_sync(imp.predict("q -> a", lm=imp.ScriptedLM([{"a": "x"}])), q="y")
    assert 'Response:\n\n{"a": "x"}\n\n' in history()
