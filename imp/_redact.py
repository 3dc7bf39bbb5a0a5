"""Redaction of secrets by key name and by value shape, for anything a person may read.

By key name: a mapping value whose key names a credential (`api_key`, `authorization`, `token`,
`password`, `secret`, `cookie`, `private_key`, `client_secret`, `x-auth-token`, ...) is replaced
whole. By value shape, anywhere in a string: bearer and basic credentials, `sk-...`-style keys
(OpenAI, Anthropic, Stripe), JWTs, GitHub / GitLab / Slack / Hugging Face / Google / AWS keys,
the password in a URL (`https://user:password@host`), and the value in `api_key=...`,
`"password": "..."` or `token: ...` written inline in text.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

REDACTED = "[REDACTED]"

_SECRET_KEY = re.compile(
    r"(api[_-]?key|authorization|auth[_-]?token|access[_-]?token|refresh[_-]?token|id[_-]?token|^token$|[_-]token$|"
    r"password|passwd|passphrase|^pwd$|secret|credential|cookie|private[_-]?key|access[_-]?key|session[_-]?(?:id|key)|"
    r"^jwt$|^bearer$|signing[_-]?key)",
    re.IGNORECASE,
)
# Credential-bearing key names written inline in text, e.g. `api_key=abc123` or `"password": "x"`;
# a value already replaced is matched whole and kept, so redacting twice gives the same text.
_INLINE_KEY = (
    r"(?:api[_-]?key|apikey|auth[_-]?token|access[_-]?token|refresh[_-]?token|client[_-]?secret|secret[_-]?key|"
    r"password|passwd|secret|token)"
)
_SECRET_VALUE = re.compile(
    r"((?i:bearer)\s+[A-Za-z0-9._~+/=-]{8,}"
    r"|(?i:basic)\s+[A-Za-z0-9+/]{12,}={0,2}"
    r"|\b(?:sk|pk|rk)-[A-Za-z0-9_-]{12,}"
    r"|\bsk-ant-[A-Za-z0-9_-]{12,}"
    r"|\b(?:sk|pk|rk)_(?:live|test)_[A-Za-z0-9]{10,}"
    r"|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r"|\b(?:gh[pousr]|glpat|xox[abpr])[-_][A-Za-z0-9_-]{12,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{20,}"
    r"|\bhf_[A-Za-z0-9]{20,}"
    r"|\bAIza[0-9A-Za-z_-]{30,}"
    r"|\bAKIA[0-9A-Z]{16}\b)"
)
_URL_PASSWORD = re.compile(r"(?P<head>\b[a-z][a-z0-9+.-]*://[^\s:/@]+:)(?P<secret>[^\s@/]+)(?P<at>@)", re.IGNORECASE)
_INLINE = re.compile(
    r"(?P<head>\b" + _INLINE_KEY + r"""["']?\s*[:=]\s*["']?)(?P<secret>\[REDACTED\]|[^\s"',;&)}\]]{4,})""",
    re.IGNORECASE,
)
# Cheap test before the regexes: a string without any of these cannot hold a secret shape.
_HINTS = re.compile(r"[-_]|bearer|basic|eyJ|AKIA|AIza|://|[=:]", re.IGNORECASE)


def is_secret_key(key: str) -> bool:
    """Whether a mapping key names a credential."""
    return bool(_SECRET_KEY.search(key))


def redact_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Replace secret-shaped substrings (and any known secret values) in a string."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    if len(text) < 8 or not _HINTS.search(text):
        return text
    text = _SECRET_VALUE.sub(REDACTED, text)
    if "://" in text:
        text = _URL_PASSWORD.sub(lambda m: m["head"] + REDACTED + m["at"], text)
    if "=" in text or ":" in text:
        text = _INLINE.sub(lambda m: m[0] if m["secret"] == REDACTED else m["head"] + REDACTED, text)
    return text


def redact(value: Any, secrets: tuple[str, ...] = ()) -> Any:
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
