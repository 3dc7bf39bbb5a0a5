"""Redaction of secrets by key name and by value shape, for anything a person may read."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

REDACTED = "[REDACTED]"

_SECRET_KEY = re.compile(
    r"(api[_-]?key|authorization|auth[_-]?token|access[_-]?token|refresh[_-]?token|^token$|_token$|"
    r"password|passwd|secret|credential|cookie|x-api-key|private[_-]?key)",
    re.IGNORECASE,
)
_SECRET_VALUE = re.compile(
    r"(Bearer\s+[A-Za-z0-9._~+/=-]{8,}"
    r"|\b(?:sk|pk|rk)-[A-Za-z0-9_-]{12,}"
    r"|\bsk-ant-[A-Za-z0-9_-]{12,}"
    r"|\beyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}"
    r"|\b(?:gh[pousr]|glpat|xox[abpr])[-_][A-Za-z0-9_-]{12,}"
    r"|\bAKIA[0-9A-Z]{16}\b)"
)


def is_secret_key(key: str) -> bool:
    """Whether a mapping key names a credential."""
    return bool(_SECRET_KEY.search(key))


def redact_text(text: str, secrets: tuple[str, ...] = ()) -> str:
    """Replace secret-shaped substrings (and any known secret values) in a string."""
    for secret in secrets:
        if secret:
            text = text.replace(secret, REDACTED)
    if "Bearer" in text or "-" in text or "eyJ" in text or "AKIA" in text:
        text = _SECRET_VALUE.sub(REDACTED, text)
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
