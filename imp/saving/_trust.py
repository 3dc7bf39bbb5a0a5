"""What a saved file may ask for: a loaded file is data, never authority.

A file can be written by anyone, and its checksum is a plain SHA-256 that anyone can recompute, so
nothing read from it is trusted to name code, a path, a credential or where a credential goes:

- Request options (the LM's `options` and a program's `config`) come from an allowlist of typed
  values: sampling settings, limits, a response format. `cache` (a path to create), `http_backend`,
  `http_client` and `retry_policy` (code), `api_key`, `headers` and any credential-named key are
  refused whatever the caller says; any other name is refused as unknown.
- An endpoint the file names (`base_url`) other than its provider's own service is refused unless
  the caller trusts it: `imp.load(path, trust_endpoint=True)`, or `trust_endpoint=` that URL (or
  a list of URLs). The environment's API key is then sent there, which is why it must be said.
- What a file would add to requests verbatim (`extra_body`, `extra_headers`) needs the same trust:
  it can carry a credential of the file writer's, or route the conversation elsewhere.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

from imp._redact import is_secret_key

__all__ = ["Refused", "Trust", "check_adapter_opts", "check_config", "check_lm_section", "check_keys", "endpoint_key"]


class Refused(ValueError):
    """What a file may not ask for; the loader raises it as `imp.saving.LoadError`."""


def _number(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _text_or_texts(value: object) -> bool:
    return isinstance(value, str) or (isinstance(value, list) and all(isinstance(v, str) for v in value))


def _json_object(value: object) -> bool:
    return isinstance(value, Mapping)


_DATA_OPTIONS: dict[str, tuple[Callable[[object], bool], str]] = {
    "temperature": (_number, "a number"),
    "top_p": (_number, "a number"),
    "max_tokens": (_count, "a non-negative integer"),
    "seed": (lambda v: isinstance(v, int) and not isinstance(v, bool), "an integer"),
    "n": (lambda v: v == 1 and not isinstance(v, bool), "1"),
    "stop": (_text_or_texts, "a string or a list of strings"),
    "reasoning_effort": (lambda v: isinstance(v, str), "a string"),
    "parallel_tool_calls": (lambda v: isinstance(v, bool), "true or false"),
    "response_format": (_json_object, "a JSON object"),
    "tool_choice": (lambda v: isinstance(v, str | Mapping), "a string or a JSON object"),
    "rollout_id": (lambda v: isinstance(v, str | int) and not isinstance(v, bool), "a string or an integer"),
    "timeout": (lambda v: isinstance(v, int | float) and _number(v) and v > 0, "a positive number of seconds"),
    "max_retries": (lambda v: isinstance(v, int) and _count(v) and v <= 20, "an integer from 0 to 20"),
}
"""Request options a file may set by itself: values that shape a request, never where it goes."""

_TRUSTED_OPTIONS: dict[str, tuple[Callable[[object], bool], str]] = {
    "extra_body": (_json_object, "a JSON object"),
    "extra_headers": (
        lambda v: isinstance(v, Mapping) and all(isinstance(x, str) for x in (*v.keys(), *v.values())),
        "an object of strings",
    ),
}
"""Options a file may set only when the caller trusts its endpoint: they are sent as the file wrote them."""

_NEVER = {
    "cache": "names a file to create (a cache is the caller's: imp.configure(cache=...) or imp.lm(..., cache=...))",
    "http_backend": "names a module to import",
    "http_client": "names code to run",
    "retry_policy": "names code to run",
    "headers": "sets headers, which a saved file never holds (pass them to imp.lm(...) and load with lm=...)",
    "api_key": "holds a credential, which a saved file never holds",
    "base_url": "names an endpoint; a saved LM keeps it beside its options",
}


class Trust:
    """The caller's word on endpoints: `trust_endpoint=True`, a URL, or URLs (default: none)."""

    def __init__(self, trust_endpoint: bool | str | Iterable[str] = False) -> None:
        if isinstance(trust_endpoint, bool):
            self.all = trust_endpoint
            self.endpoints: frozenset[tuple[str, ...]] = frozenset()
        elif isinstance(trust_endpoint, str):
            self.all = False
            self.endpoints = frozenset({endpoint_key(trust_endpoint)})
        else:
            urls = list(trust_endpoint)
            if not all(isinstance(u, str) for u in urls):
                raise TypeError("trust_endpoint is True, a URL, or a list of URLs")
            self.all = False
            self.endpoints = frozenset(endpoint_key(u) for u in urls)

    def trusts(self, url: str) -> bool:
        """Whether requests to `url` may carry what the caller's environment holds."""
        return self.all or endpoint_key(url) in self.endpoints


def endpoint_key(url: str) -> tuple[str, ...]:
    """An endpoint as compared: scheme, host, port, path and query, spelled one way.

    Raises `Refused` for a URL with credentials in it, control characters or no host: a file that
    writes `https://api.openai.com@evil.example/v1` names evil.example, and is refused as such.
    """
    if any(ord(c) < 33 or c == "\\" for c in url):
        raise Refused(f"the endpoint {url!r} holds spaces, control characters or backslashes")
    parts = urlsplit(url)
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise Refused(f"the endpoint {url!r} holds credentials (user:password@), which a saved file never holds")
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https") or not parts.hostname:
        raise Refused(f"the endpoint {url!r} is not an http(s) URL with a host")
    try:
        port = parts.port or (443 if scheme == "https" else 80)
    except ValueError:
        raise Refused(f"the endpoint {url!r} has a port that is not a number") from None
    return (scheme, parts.hostname.lower().rstrip("."), str(port), parts.path.rstrip("/"), parts.query)


def _check_options(options: object, where: str, *, trusted: bool, trust_hint: str) -> dict[str, object]:
    if not isinstance(options, Mapping):
        raise Refused(f"{where} must be an object of request options, got {type(options).__name__}")
    out: dict[str, object] = {}
    for key, value in options.items():
        if not isinstance(key, str):
            raise Refused(f"{where} has a key that is not text: {key!r}")
        if value is None:
            out[key] = value
            continue
        if key in _NEVER or is_secret_key(key):
            why = _NEVER.get(key, "holds a credential, which a saved file never holds")
            raise Refused(f"{where}.{key} is refused: it {why}")
        rule = _DATA_OPTIONS.get(key)
        if rule is None and key in _TRUSTED_OPTIONS:
            if not trusted:
                raise Refused(
                    f"{where}.{key} is refused: it is sent as the file wrote it; {trust_hint}, "
                    "or pass lm=... and leave it out"
                )
            rule = _TRUSTED_OPTIONS[key]
        if rule is None:
            known = ", ".join(sorted({*_DATA_OPTIONS, *_TRUSTED_OPTIONS}))
            raise Refused(f"{where}.{key} is not an option a saved file may set (it may set: {known})")
        check, need = rule
        if not check(value):
            raise Refused(f"{where}.{key} must be {need}, got {value!r:.80}")
        out[key] = value
    return out


def check_config(config: object, trust: Trust) -> dict[str, object]:
    """A program's saved `config` (request options sent with its LM's requests), checked."""
    return _check_options(
        config or {},
        "config",
        trusted=trust.all,
        trust_hint="load with imp.load(path, trust_endpoint=True) if you trust this file's requests",
    )


_LM_KEYS = frozenset({"provider", "model", "options", "base_url"})


def check_lm_section(
    data: object, trust: Trust, default_url: Callable[[str], str]
) -> tuple[str, str, str | None, dict[str, Any]]:
    """A saved LM's provider, model, base URL and options, checked; `default_url(provider)` is the
    provider's own endpoint, the one a file may name without the caller's word."""
    if not isinstance(data, Mapping):
        raise Refused("the saved lm must be an object naming a provider and a model")
    unknown = sorted(set(data) - _LM_KEYS)
    if unknown:
        raise Refused(f"the saved lm has unknown keys {unknown} (it may hold: {', '.join(sorted(_LM_KEYS))})")
    provider, model = data.get("provider"), data.get("model")
    if not isinstance(provider, str) or not isinstance(model, str) or not model:
        raise Refused("the saved lm must name a provider and a model")
    own = default_url(provider)
    base_url = data.get("base_url")
    if base_url is not None and not isinstance(base_url, str):
        raise Refused(f"the saved lm's base_url must be a URL, got {type(base_url).__name__}")
    endpoint = base_url or own
    named = base_url is not None and endpoint_key(base_url) != endpoint_key(own)
    hint = f"imp.load(path, trust_endpoint={endpoint!r}) (or trust_endpoint=True) if you trust it"
    if named and not trust.trusts(endpoint):
        raise Refused(
            f"the saved lm sends requests to {endpoint}, an endpoint the file names; imp does not send "
            f"your credentials where a file says. Load with {hint}, or pass lm=imp.lm(...) to choose the model"
        )
    # Any: the options go to imp.lm(**options), whose keywords are typed one by one.
    options: dict[str, Any] = _check_options(
        data.get("options") or {}, "lm.options", trusted=trust.trusts(endpoint), trust_hint=hint
    )
    return provider, model, base_url if named else None, options


def check_keys(data: object, allowed: Iterable[str], where: str) -> Mapping[str, object]:
    """An object whose keys are all known (a key imp does not write is refused, naming it)."""
    if not isinstance(data, Mapping):
        raise Refused(f"{where} must be an object, got {type(data).__name__}")
    known = frozenset(allowed)
    unknown = sorted(str(k) for k in data if k not in known)
    if unknown:
        raise Refused(f"{where} has unknown keys {unknown} (it may hold: {', '.join(sorted(known))})")
    return data


_ADAPTER_OPTS: dict[str, tuple[Callable[[object], bool], str]] = {
    "response_instruction": (lambda v: isinstance(v, bool), "true or false"),
    "omit_empty_request": (lambda v: isinstance(v, bool), "true or false"),
    "agent_line": (lambda v: v is None or isinstance(v, str), "a string or null"),
    "guidance": (_json_object, "a JSON object"),
}
_RENDERERS = frozenset(
    {"output_renderer", "input_section_renderer", "system_renderer", "tool_result_renderer", "history_note_renderer"}
)


def check_adapter_opts(opts: object, function_key: str) -> Mapping[str, object]:
    """A program's saved adapter options: the renderers by name (resolved from the registry), the
    rest typed values; anything else is refused."""
    checked = check_keys(opts or {}, {*_ADAPTER_OPTS, *_RENDERERS}, "adapter_opts")
    for key, value in checked.items():
        if value is None:
            continue
        if key in _RENDERERS:
            if not (
                isinstance(value, Mapping) and set(value) == {function_key} and isinstance(value[function_key], str)
            ):
                raise Refused(f"adapter_opts.{key} must name a function of the registry ({{{function_key!r}: name}})")
            continue
        check, need = _ADAPTER_OPTS[key]
        if not check(value):
            raise Refused(f"adapter_opts.{key} must be {need}, got {value!r:.80}")
    return checked
