"""Redaction of secrets by key name and by value shape, for anything a person may read.

By key name: a mapping value whose key names a credential (`api_key`, `authorization`, `token`,
`password`, `secret`, `cookie`, `private_key`, `client_secret`, `x-auth-token`, ...) is replaced
whole. By value shape, anywhere in a string: bearer and basic credentials, `sk-...`-style keys
(OpenAI, Anthropic, Stripe), JWTs, GitHub / GitLab / Slack / Hugging Face / Google / AWS keys,
the password in a URL (`https://user:password@host`), and the value in `api_key=...`,
`"password": "..."` or `token: ...` written inline in text.

Known values (an LM's key, the credentials in its headers, URL and `extra_body`: `secrets_in`) are
replaced wherever they appear, when they are long enough to be secrets: a value under
`MIN_SECRET_LENGTH` characters (`"none"`, `"1"`, `"EMPTY"`, a local server's placeholder) is left
alone, since replacing it would rewrite ordinary words and numbers (`127.0.0.1`, `OpenAILM`).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any
from urllib.parse import parse_qsl, unquote, urlsplit

REDACTED = "[REDACTED]"

MIN_SECRET_LENGTH = 8
"""A known secret shorter than this is not searched for in text (it would match ordinary text)."""

_SECRET_KEY = re.compile(
    r"(api[_-]?key|authorization|auth[_-]?token|access[_-]?token|refresh[_-]?token|id[_-]?token|^token$|[_-]token$|"
    r"password|passwd|passphrase|^pwd$|secret|credential|cookie|private[_-]?key|access[_-]?key|session[_-]?(?:id|key)|"
    r"^jwt$|^bearer$|signing[_-]?key|subscription[_-]?key)",
    re.IGNORECASE,
)
# Credential-bearing key names written inline in text, e.g. `api_key=abc123`, `"password": "x"` or
# `DB_PASSWORD=...` (a prefix joined by `_` or `-`); a bare `token` only on its own.
_INLINE_KEY = (
    r"(?:(?:[A-Za-z0-9]+[_-])*(?:api[_-]?key|apikey|auth[_-]?token|access[_-]?token|refresh[_-]?token|"
    r"client[_-]?secret|secret[_-]?key|password|passwd|secret|token)|apikey)"
)
_VALUE_SHAPES = (
    r"(?i:bearer)\s+[A-Za-z0-9._~+/=-]{8,}"
    r"|(?i:basic)\s+[A-Za-z0-9+/]{12,}={0,2}"
    r"|\b(?:sk|pk|rk)-[A-Za-z0-9_-]{12,}"
    r"|\bsk-ant-[A-Za-z0-9_-]{12,}"
    r"|\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"
    r"|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r"|\b(?:gh[pousr]|glpat|xox[abpr])[-_][A-Za-z0-9_-]{12,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bhf_[A-Za-z0-9]{20,}"
    r"|\bAIza[0-9A-Za-z_-]{30,}"
    r"|\bAKIA[0-9A-Z]{16}\b"
)
# A bare inline value: up to a separator (`&` only before the next `name=` of a query); an earlier `[REDACTED]` inside it is part of it, so a
# second pass over redacted text finds the marker whole and leaves it be.
_BARE = r"""(?:\[REDACTED\]|&(?![A-Za-z_][\w.-]*=)|[^\s"',;&)}\]\[])+"""
# Every shape in one pattern, applied in one pass: a match never overlaps another's replacement,
# which is what keeps the output well-formed (no `password=[REDACTED]]`) and idempotent.
_SHAPES = re.compile(
    r"(?P<url>\b(?i:[a-z][a-z0-9+.-]*)://[^\s:/@]*:)(?P<url_secret>[^\s@/]+)(?=@)"
    r"|(?P<key>(?<![A-Za-z0-9_-])(?i:" + _INLINE_KEY + r""")\\?["']?\s*[:=]\s*)"""
    r"""(?:(?P<dq_open>\\?")(?P<dq>[^"\\\n]+)\\?"|'(?P<sq>[^'\n]+)'"""
    r"|(?P<bare>(?:(?i:bearer|basic)\s+)?" + _BARE + r"))"
    r"|(?P<value>" + _VALUE_SHAPES + r")"
)
# A query parameter that carries a credential (`?key=`, Gemini's; `?api-key=`, `?sig=`, `?token=`).
_SECRET_QUERY = re.compile(r"key|token|secret|password|passwd|sig|auth|credential", re.IGNORECASE)

# Cheap test before the regex (which costs about 2 us a character): every alternative of `_SHAPES`
# needs one of these substrings (the first, in any case; the rest as written), so a string without
# any cannot hold a secret shape. Substring tests, not a regex: an alternation of them costs as much.
_HINTS_ANY_CASE = ("key", "token", "secret", "passw", "bearer", "basic", "://")
_HINTS = (
    "sk-",
    "pk-",
    "rk-",
    "sk_",
    "pk_",
    "rk_",
    "eyJ",
    "ghp",
    "gho",
    "ghu",
    "ghs",
    "ghr",
    "glpat",
    "xox",
    "github_pat_",
    "hf_",
    "AIza",
    "AKIA",
)


def _may_hold_secret(text: str) -> bool:
    lowered = text.lower()
    return any(h in lowered for h in _HINTS_ANY_CASE) or any(h in text for h in _HINTS)


_MIN_INLINE = 4
"""An inline value shorter than this (`token: no`) is not taken for a secret."""


def _replace(match: re.Match[str]) -> str:
    if match["value"] is not None:
        return REDACTED
    if match["url"] is not None:
        return match["url"] + REDACTED
    head = match["key"]
    if match["dq"] is not None:
        quote = match["dq_open"]  # `\"` in JSON written inside a JSON string
        return match[0] if match["dq"] == REDACTED else f"{head}{quote}{REDACTED}{quote}"
    if match["sq"] is not None:
        return match[0] if match["sq"] == REDACTED else f"{head}'{REDACTED}'"
    bare = match["bare"]
    secret = bare.rstrip(".:!?")  # a sentence's end is not part of the value
    if secret == REDACTED or len(secret) < _MIN_INLINE:
        return match[0]
    return head + REDACTED + bare[len(secret) :]


def is_secret_key(key: str) -> bool:
    """Whether a mapping key names a credential."""
    return bool(_SECRET_KEY.search(key))


def is_secret_query_key(key: str) -> bool:
    """Whether a URL query parameter's name says it carries a credential."""
    return bool(_SECRET_QUERY.search(key))


def secrets_in(
    *, headers: Mapping[str, str] | None = None, url: str | None = None, body: Mapping[str, Any] | None = None
) -> tuple[str, ...]:
    """The credential values given in headers (by name: `authorization`, `api-key`, `x-api-key`, ...),
    in a URL (its userinfo, and query values by name: `key`, `token`, `sig`, ...) and in a request
    body's fields (by name, at any depth): what must be redacted like an API key."""
    found: list[str] = []
    for name, value in (headers or {}).items():
        if is_secret_key(name) and isinstance(value, str) and value:
            found.append(value)
            scheme, _, credential = value.partition(" ")
            if credential and scheme.isalpha():  # `Bearer <token>`: the token alone is the secret too
                found.append(credential.strip())
    if url:
        found.extend(_url_secrets(url))
    if body:
        found.extend(_body_secrets(body))
    return tuple(dict.fromkeys(v for v in found if v and v != REDACTED))


def _url_secrets(url: str) -> Iterator[str]:
    try:
        parts = urlsplit(url)
    except ValueError:
        return
    for value in (parts.username, parts.password):
        if value:
            yield value
            yield unquote(value)
    for key, value in parse_qsl(parts.query, keep_blank_values=False):
        if is_secret_query_key(key):
            yield value


def _body_secrets(value: object, depth: int = 0) -> Iterator[str]:
    if depth > 32:
        return
    if isinstance(value, Mapping):
        for key, item in value.items():
            if isinstance(key, str) and is_secret_key(key) and isinstance(item, str):
                yield item
            else:
                yield from _body_secrets(item, depth + 1)
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _body_secrets(item, depth + 1)


def redact_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Replace secret-shaped substrings (and any known secret values) in a string, once.

    A known value shorter than `MIN_SECRET_LENGTH` is not searched for. The result keeps the text
    around each secret and is a fixed point: redacting it again changes nothing.
    """
    for secret in secrets:
        if len(secret) >= MIN_SECRET_LENGTH and secret != REDACTED:
            text = text.replace(secret, REDACTED)
    if len(text) < 8 or not _may_hold_secret(text):
        return text
    return _SHAPES.sub(_replace, text)


def redact(value: object, secrets: tuple[str, ...] = ()) -> Any:
    """A copy of a JSON-like value with secrets replaced by key name and by value shape."""
    if isinstance(value, str):
        return redact_text(value, secrets)
    if isinstance(value, Mapping):
        return {
            k: (REDACTED if isinstance(k, str) and is_secret_key(k) and v else redact(v, secrets))
            for k, v in value.items()
        }
    if isinstance(value, list | tuple):
        items = [redact(v, secrets) for v in value]
        return items if isinstance(value, list) else tuple(items)
    return value
