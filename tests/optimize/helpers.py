"""A task whose student is right only when its instruction states the rule, and a reflection LM that
proposes the rule once the feedback names it."""

from __future__ import annotations

import re
from typing import Any

import imp
from imp.models.base import LMResponse
from imp.records import Usage

RULE = "Answer with the word in UPPERCASE."


def system_text(messages: list[Any]) -> str:
    return "\n".join(str(m.get("content", "")) for m in messages if m.get("role") == "system")


def last_user(messages: list[Any]) -> str:
    users = [str(m.get("content", "")) for m in messages if m.get("role") == "user"]
    return users[-1] if users else ""


def word_of(messages: list[Any]) -> str:
    """The `word` input of the request's last user message."""
    found = re.findall(r"\[\[ ## word ## \]\]\n(\S+)", last_user(messages))
    return found[-1] if found else ""


def student_handler(messages: list[Any], options: dict[str, Any]) -> dict[str, Any]:
    word = word_of(messages)
    upper = "UPPERCASE" in system_text(messages)
    return {"answer": word.upper() if upper else word.lower()}


def student() -> imp.StaticLM:
    return imp.StaticLM(student_handler)


def metric(example: imp.Example, prediction: imp.Prediction) -> imp.Score:
    right = prediction.answer == example.answer
    return imp.Score(1.0 if right else 0.0, feedback=None if right else "The answer must be uppercase.")


def reflection() -> imp.StaticLM:
    def handler(messages: list[Any], options: dict[str, Any]) -> LMResponse:
        text = last_user(messages)
        proposal = RULE if "must be uppercase" in text else "Answer carefully."
        return LMResponse(
            text=f"Here:\n```\n{proposal}\n```", usage=Usage(input_tokens=100, output_tokens=10, requests=1)
        )

    return imp.StaticLM(handler)


WORDS = ["apple", "river", "stone", "cloud", "tiger", "lemon", "piano", "otter", "maple", "ember"]


def examples(words: list[str] = WORDS) -> list[imp.Example]:
    return [imp.Example(word=w, answer=w.upper()).with_inputs("word") for w in words]
