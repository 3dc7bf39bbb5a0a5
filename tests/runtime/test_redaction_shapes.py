"""imp._redact: secrets replaced by key name and by value shape, ordinary text left alone."""

from __future__ import annotations

import pytest

from imp._redact import REDACTED, is_secret_key, redact, redact_text

JWT = "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"


@pytest.mark.parametrize(
    "key",
    [
        "api_key",
        "apiKey",
        "x-api-key",
        "Authorization",
        "proxy-authorization",
        "token",
        "access_token",
        "refresh-token",
        "id_token",
        "x-auth-token",
        "password",
        "db_passwd",
        "passphrase",
        "client_secret",
        "AWS_SECRET_ACCESS_KEY",
        "cookie",
        "Set-Cookie",
        "private_key",
        "access_key",
        "session_id",
        "credentials",
        "jwt",
        "signing_key",
    ],
)
def test_credential_key_names(key: str) -> None:
    assert is_secret_key(key)
    assert redact({key: "value-that-is-secret"}) == {key: REDACTED}


@pytest.mark.parametrize(
    "key",
    ["max_tokens", "input_tokens", "tokens", "tool_call_id", "cache_key", "model", "messages", "tokenizer"],
)
def test_ordinary_key_names(key: str) -> None:
    assert not is_secret_key(key)


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Authorization: Bearer abcdefghijklmnop", "abcdefghijklmnop"),
        ("authorization: bearer abcdefghijklmnop", "abcdefghijklmnop"),
        ("Authorization: Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
        ("Incorrect API key provided: sk-proj-abcdefghijklmnop0123.", "sk-proj-abcdefghijklmnop0123"),
        ("key sk-ant-api03-abcdefghijklmnopqrst", "sk-ant-api03-abcdefghijklmnopqrst"),
        ("stripe sk_live_abcdefghijkl0123", "sk_live_abcdefghijkl0123"),
        (f"the session is {JWT}", JWT),
        ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
        ("github_pat_11ABCDEFG0123456789_abcdefghijklmnop", "github_pat_11ABCDEFG0123456789_abcdefghijklmnop"),
        ("xoxb-123456789012-abcdefghijkl", "xoxb-123456789012-abcdefghijkl"),
        ("hf_abcdefghijklmnopqrstuvwxyz", "hf_abcdefghijklmnopqrstuvwxyz"),
        ("AIzaSyA1234567890abcdefghijklmnopqrstuv", "AIzaSyA1234567890abcdefghijklmnopqrstuv"),
        ("AKIAABCDEFGHIJKLMNOP", "AKIAABCDEFGHIJKLMNOP"),
        ("postgres://admin:hunter2hunter2@db.internal:5432/app", "hunter2hunter2"),
        ("GET /v1?api_key=abc12345&q=x", "abc12345"),
        ('{"password": "correct horse"}', "correct"),
        ("token: 0123456789", "0123456789"),
        ("client_secret=s3cr3tvalue", "s3cr3tvalue"),
    ],
)
def test_secret_shapes_in_text(text: str, secret: str) -> None:
    shown = redact_text(text)
    assert secret not in shown and REDACTED in shown


@pytest.mark.parametrize(
    "text",
    [
        "max_tokens: 100, input_tokens=20",
        "a well-known re-run of the step-by-step plan",
        "see https://example.com/docs?page=2",
        "tokens used: 1234",
        "ratio 3:2, time 12:30",
        "",
    ],
)
def test_ordinary_text_is_left_alone(text: str) -> None:
    assert redact_text(text) == text


def test_known_secrets_and_nested_values() -> None:
    value = {"args": ["call with my-own-secret-value", {"headers": {"x-api-key": "k"}}], "n": 3}
    assert redact(value, secrets=("my-own-secret-value",)) == {
        "args": [f"call with {REDACTED}", {"headers": {"x-api-key": REDACTED}}],
        "n": 3,
    }
    assert redact(("Bearer abcdefghijklmnop",)) == (REDACTED,)
    assert redact({"api_key": ""}) == {"api_key": ""}  # nothing to hide


R = REDACTED
KEYISH = "sk-proj-abcdefghijklmnop0123456789"
# (text, exactly what it becomes): every shape, alone, inline, quoted, nested and already redacted.
EXACT: list[tuple[str, str]] = [
    ("password=sk-abcdefghijklmnop", f"password={R}"),
    ("password=[REDACTED]", "password=[REDACTED]"),
    (f"password={R} and token: {R}", f"password={R} and token: {R}"),
    ("token: Bearer abcdefghijklmnop", f"token: {R}"),
    ("Authorization: Bearer abcdefghijklmnop", f"Authorization: {R}"),
    ("Authorization: Basic dXNlcjpwYXNzd29yZA==", f"Authorization: {R}"),
    ("key sk-ant-api03-abcdefghijklmnopqrst here", f"key {R} here"),
    ("postgres://admin:hunter2hunter2@db.internal:5432/app", f"postgres://admin:{R}@db.internal:5432/app"),
    ("mysql://u:p%40ss@h/db and redis://:pw123456@cache:6379", f"mysql://u:{R}@h/db and redis://:{R}@cache:6379"),
    (f"postgres://admin:{R}@db/app", f"postgres://admin:{R}@db/app"),
    ("GET /v1?api_key=abc12345&q=x", f"GET /v1?api_key={R}&q=x"),
    ("login user=ops password=Tr0ub4dor&3 (host db)", f"login user=ops password={R} (host db)"),
    ('{"password": "correct horse"}', f'{{"password": "{R}"}}'),
    ("{'password': 'correct horse', 'user': 'x'}", f"{{'password': '{R}', 'user': 'x'}}"),
    ('{"args": "{\\"password\\": \\"hunter 2\\"}"}', f'{{"args": "{{\\"password\\": \\"{R}\\"}}"}}'),
    (f'{{"password": "{R}"}}', f'{{"password": "{R}"}}'),
    ("DB_PASSWORD=hunter22 next", f"DB_PASSWORD={R} next"),
    ("export GITHUB_TOKEN=ghp_abcdefghijklmnopqrstuvwxyz0123", f"export GITHUB_TOKEN={R}"),
    ("x-api-key: abcdef123456", f"x-api-key: {R}"),
    ("client_secret=s3cr3tvalue; scope=read", f"client_secret={R}; scope=read"),
    ("api_key=xyz[REDACTED]", f"api_key={R}"),
    ("token: no", "token: no"),
    ("max_tokens: 100, input_tokens=20", "max_tokens: 100, input_tokens=20"),
    (f"the session is {JWT}.", f"the session is {R}."),
    ("keys AKIAABCDEFGHIJKLMNOP and hf_abcdefghijklmnopqrstuvwxyz", f"keys {R} and {R}"),
    ("[sk-abcdefghijklmnop]", f"[{R}]"),
    ("(password=abcdefgh)", f"(password={R})"),
    (f"the vault refused token={KEYISH}. Try again.", f"the vault refused token={R}. Try again."),
    ("password: hunter22!", f"password: {R}!"),
    ("ratio 3:2, time 12:30", "ratio 3:2, time 12:30"),
]


@pytest.mark.parametrize(("text", "expected"), EXACT)
def test_each_shape_is_redacted_once_and_cleanly(text: str, expected: str) -> None:
    shown = redact_text(text)
    assert shown == expected
    assert redact_text(shown) == shown  # a fixed point: redacting again changes nothing


@pytest.mark.parametrize(("text", "expected"), EXACT)
def test_redaction_is_idempotent_inside_values(text: str, expected: str) -> None:
    value = {"message": text, "items": [text, (text,)], "api_key": "k", "n": 1}
    once = redact(value)
    assert once == {"message": expected, "items": [expected, (expected,)], "api_key": R, "n": 1}
    assert redact(once) == once


def test_known_secrets_then_shapes_do_not_garble() -> None:
    text = "api_key=xyzabc12345 and password=hunter22"
    shown = redact_text(text, secrets=("abc12345",))
    assert shown == f"api_key={R} and password={R}"
    assert redact_text(shown, secrets=("abc12345",)) == shown
