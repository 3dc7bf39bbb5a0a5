"""What a first-contact trial of imp found: each case a new user met, with the behaviour it should have."""

from __future__ import annotations

import pytest

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
