"""Pages redact what events already redacted: redacting twice must give the same text."""

from __future__ import annotations

import pytest

from imp._redact import redact_text

KEY = "sk-test-abcdefghijklmnopqrstuvwx0123456789"


@pytest.mark.parametrize(
    "text",
    [
        f"weather? api_key={KEY}",
        "password=hunter2hunter2 and token: abcdefgh1234",
        f'{{"api_key": "{KEY}", "secret": "s3cr3t-value"}}',
        "https://bob:hunter2@db.example.com/orders",
        f"Authorization: Bearer {KEY}",
        "plain text with a colon: and = sign",
    ],
)
def test_redacting_twice_changes_nothing(text: str) -> None:
    once = redact_text(text)
    assert redact_text(once) == once
    assert "]]" not in once and KEY not in once and "hunter2" not in once
