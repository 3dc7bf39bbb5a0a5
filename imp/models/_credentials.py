"""Who asks: an LM's API key, the credentials in its headers, URL and body, and what must never be shown.

The key rule: a key given as `api_key=` goes wherever the LM sends; a key read from the
environment (`OPENAI_API_KEY`, ...) goes only to the provider's own service, its default
`base_url`. A local server, a proxy or an endpoint read from a saved file never receives it unless
it is passed as `api_key=` (or in `headers=`): `imp.load(..., trust_endpoint=)` passes it so for the
endpoint the caller trusted.

Every credential given, however it is given (`api_key=`; a header such as `Authorization`,
`api-key` or `x-api-key`; the userinfo or a `?key=` of `base_url`; a secret-named field of
`extra_body`; the same in one call's `extra_headers` / `extra_body`), is in `secrets`, which every
error, event, log line and repr is redacted against.
"""

from __future__ import annotations

from collections.abc import Mapping

from imp._redact import secrets_in

__all__ = ["Credentials"]

_SEEN_LIMIT = 64
"""How many credentials given in single calls (`extra_headers`, `extra_body`) stay remembered."""


class Credentials:
    """One LM's key and the values that must never be shown (its repr shows neither)."""

    __slots__ = ("_configured", "_seen", "api_key", "secrets")

    def __init__(
        self,
        api_key: str | None,
        *,
        headers: Mapping[str, str],
        base_url: str,
        body: Mapping[str, object] | None,
    ) -> None:
        self.api_key = api_key
        """The key the provider's auth header carries (None: no auth header is sent)."""
        self._configured = (
            *([api_key] if api_key else []),
            *secrets_in(headers=headers, url=base_url, body=dict(body) if body else None),
        )
        self._seen: dict[str, None] = {}
        self.secrets: tuple[str, ...] = ()
        """Every known credential value, longest first (so a value inside another is replaced whole)."""
        self._update()

    def _update(self) -> None:
        self.secrets = tuple(sorted(dict.fromkeys([*self._configured, *self._seen]), key=len, reverse=True))

    def remember(self, headers: Mapping[str, str] | None, body: Mapping[str, object] | None) -> None:
        """Credentials given in one call's `extra_headers` / `extra_body` are redacted from then on."""
        if not headers and not body:
            return
        fresh = [s for s in secrets_in(headers=headers, body=dict(body) if body else None) if s not in self.secrets]
        if not fresh:
            return
        for secret in fresh:
            self._seen[secret] = None
        while len(self._seen) > _SEEN_LIMIT:
            del self._seen[next(iter(self._seen))]
        self._update()

    def __repr__(self) -> str:
        return f"Credentials(api_key={'set' if self.api_key else 'none'}, secrets={len(self.secrets)})"
