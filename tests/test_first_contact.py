"""What a first-contact trial of imp found: each case a new user met, with the behaviour it should have."""

from __future__ import annotations

from typing import Any

import pytest

import imp
from imp.signature import Field
from imp.values import coerce_text, render_value


@pytest.mark.parametrize("annotation", [bool | str, str | bool, bool | str | None])
@pytest.mark.parametrize("text", ["TRUE", "Yes", "no", "False ", "YES"])
def test_beside_str_only_json_booleans_are_booleans(annotation: object, text: str) -> None:
    field = Field("value", "output", annotation)
    assert coerce_text(field, text) == text  # written by imp as itself, read back as itself
    assert coerce_text(field, render_value(text, Field("value", "input", annotation))) == text
    assert coerce_text(field, "true") is True and coerce_text(field, "false") is False


@pytest.mark.parametrize("text", ["TRUE", "Yes", "no", "1"])
def test_a_plain_boolean_field_still_reads_the_lenient_spellings(text: str) -> None:
    assert isinstance(coerce_text(Field("value", "output", bool), text), bool)
    assert isinstance(coerce_text(Field("value", "output", bool | int), "Yes"), bool)


@pytest.mark.parametrize(
    "build",
    [
        lambda: imp.signature("q -> a", 3),  # type: ignore[arg-type]
        lambda: imp.signature("q -> a").with_instructions(["Answer."]),  # type: ignore[arg-type]
        lambda: imp.signature(imp.signature("q -> a"), b"Answer."),  # type: ignore[arg-type]
    ],
)
def test_instructions_that_are_not_text_are_refused_saying_so(build: Any) -> None:
    with pytest.raises(TypeError, match="a signature's instructions are a string, got"):
        build()
