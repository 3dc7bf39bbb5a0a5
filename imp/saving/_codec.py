"""The rules every saved program shares: JSON-safe values, credentials and headers dropped,
functions by name (from a registry of functions and tools), allowlisted adapters, the registry of
program kinds, and the errors of saving and loading."""

from __future__ import annotations

import datetime as _dt
import enum
import math
import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from imp._jsondata import JSONObject, JSONValue
from imp._redact import is_secret_key, is_secret_query_key
from imp.adapters import Adapter, Guidance, SavedAdapter, load_adapter, saved_adapter, saved_names
from imp.errors import ImpError, SignatureError
from imp.media import MEDIA_KEY, Media
from imp.models.base import LM
from imp.models.scripted import ScriptedLM, StaticLM
from imp.prediction import Example, Prediction
from imp.programs.base import Program
from imp.saving._trust import Refused, Trust, check_adapter_opts, check_config, check_keys, check_lm_section
from imp.signature import Signature
from imp.tools import Tool

if TYPE_CHECKING:
    from imp.models._http import HTTPLM

__all__ = [
    "FUNCTION",
    "KINDS",
    "ChecksumError",
    "LoadError",
    "Loader",
    "ProgramKind",
    "SaveError",
    "Saver",
    "register_program_kind",
]

FUNCTION = "$function"
_HEADER_KEYS = frozenset({"headers", "extra_headers", "http_client"})
_NOT_SAVED_LM_OPTIONS = frozenset({"cache", "retry_policy"})


class SaveError(ImpError, ValueError):
    """A program that cannot be saved faithfully (a scripted LM, an unnamed function, a non-JSON value)."""


class LoadError(ImpError, ValueError):
    """A saved program that cannot be loaded (not imp's format, a newer schema, a name not in the registry)."""


class ChecksumError(LoadError):
    """A saved program whose contents no longer match its checksum (edited after `imp.save` wrote it)."""


# --- the registry of program kinds ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ProgramKind:
    """How one program class is saved and loaded: its kind name, class, dump and load functions."""

    name: str
    cls: type[Program]
    dump: Callable[[Any, Saver], JSONObject]  # Any: each kind's dump takes its own program class
    load: Callable[[Mapping[str, Any], Loader], Program]
    keys: frozenset[str] | None = None
    """The keys its saved form may hold (besides `kind`); a file with another is refused. None: unchecked."""


KINDS: dict[str, ProgramKind] = {}


def register_program_kind(kind: ProgramKind) -> None:
    """Make a program class saveable (a kind name may be registered again, replacing the old one)."""
    KINDS[kind.name] = kind


def _kind_of(program: Program) -> ProgramKind:
    for kind in KINDS.values():
        if type(program) is kind.cls:
            return kind
    known = ", ".join(sorted(k.cls.__name__ for k in KINDS.values()))
    raise SaveError(f"imp.save does not know how to save a {type(program).__name__} (it saves: {known})")


# --- values ---------------------------------------------------------------------------------------


def _function_name(fn: Callable[..., object], names: Mapping[int, str], where: str) -> str:
    name = names.get(id(fn))
    if name is not None:
        return name
    qualname = getattr(fn, "__qualname__", None)
    if isinstance(qualname, str) and "<" not in qualname:
        return qualname
    raise SaveError(
        f"{where} is a function without a usable name ({qualname or type(fn).__name__}); "
        f"name it in the registry: imp.save(program, path, registry={{'my_name': fn}})"
    )


def _callables(registry: Mapping[str, object] | None) -> dict[str, object]:
    """The registry's functions and tools (its classes resolve types, not functions)."""
    return {
        k: v for k, v in (registry or {}).items() if isinstance(v, Tool) or (callable(v) and not isinstance(v, type))
    }


def _json_object(value: JSONValue) -> JSONObject:
    assert isinstance(value, dict)  # Saver.value keeps a mapping a mapping
    return value


def _drop_userinfo(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not is_secret_query_key(k)])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class Saver:
    """What a kind's dump function uses: JSON-safe values, functions by name, LMs without credentials."""

    def __init__(self, registry: Mapping[str, object] | None = None, *, include_lm: bool = True) -> None:
        # A registry names functions, and tools by their runner (`registry={"lookup": lookup}`
        # with `lookup` an `@imp.tool`).
        self._names = {id(v.runner if isinstance(v, Tool) else v): k for k, v in _callables(registry).items()}
        self.include_lm = include_lm

    def function(self, fn: Callable[..., object], where: str) -> str:
        """The name a function is saved under (its registry name, else its qualified name)."""
        return _function_name(fn, self._names, where)

    def value(self, value: object, where: str, *, drop_secrets: bool = False, functions: bool = False) -> JSONValue:
        """A JSON-safe copy of a value; raises `SaveError` naming `where` for what JSON cannot hold."""
        if value is None or isinstance(value, bool | int | str):
            return value
        if isinstance(value, float):
            if math.isfinite(value):
                return value
            raise SaveError(f"{where} is {value!r}, which JSON cannot hold")
        if isinstance(value, Mapping):
            out: JSONObject = {}
            for key, item in value.items():
                if not isinstance(key, str):
                    raise SaveError(f"{where} has a non-string key {key!r}")
                if drop_secrets and (is_secret_key(key) or key.lower() in _HEADER_KEYS):
                    continue
                out[key] = self.value(item, f"{where}.{key}", drop_secrets=drop_secrets, functions=functions)
            return out
        if isinstance(value, list | tuple):
            return [
                self.value(v, f"{where}[{i}]", drop_secrets=drop_secrets, functions=functions)
                for i, v in enumerate(value)
            ]
        if isinstance(value, Guidance):
            return {"lines": list(value.lines), "text_answer": value.text_answer}
        if isinstance(value, Example):
            return self.value(value.to_dict(), where, drop_secrets=drop_secrets, functions=functions)
        if isinstance(value, Prediction):
            return self.value(value.fields, where, drop_secrets=drop_secrets, functions=functions)
        if isinstance(value, Media):
            return value.dump()  # inline, checked by its SHA-256 on load (docs/media.md says why)
        if isinstance(value, enum.Enum):
            return self.value(value.value, where)
        if isinstance(value, _dt.datetime | _dt.date | _dt.time):
            return value.isoformat()
        dump = getattr(value, "model_dump", None)
        if callable(dump) and not isinstance(value, type):
            return self.value(dump(mode="json"), where)
        if functions and callable(value):
            return {FUNCTION: self.function(value, where)}
        raise SaveError(f"{where} is a {type(value).__name__}, which imp.save cannot write as JSON")

    def signature(self, signature: Signature, where: str = "signature") -> JSONObject:
        """A signature's dump, checked to be JSON-safe."""
        return _json_object(self.value(signature.dump(), where))

    def adapter(self, adapter: Adapter | None) -> SavedAdapter | None:
        """An adapter's name from imp's registry of adapters (None when the program uses the configured
        one); a template as data."""
        if adapter is None:
            return None
        saved = saved_adapter(adapter)
        if saved is None:
            raise SaveError(
                f"the adapter {type(adapter).__name__} cannot be saved; "
                f"saved programs name one of {', '.join(saved_names())}"
            )
        return saved

    def lm(self, lm: LM | None, owner: str) -> JSONObject | None:
        """Provider, model, options and base URL of an `imp.lm(...)` client; never a credential or header."""
        if lm is None or not self.include_lm:
            return None
        if isinstance(lm, ScriptedLM | StaticLM):
            raise SaveError(
                f"{owner} is pinned to {lm!r}, a scripted LM, which cannot be saved (its replies are test data). "
                "Save with imp.save(program, path, include_lm=False) and pass lm=... to imp.load"
            )
        from imp.models import PROVIDERS

        provider = getattr(lm, "provider", None)
        model = getattr(lm, "model", None)
        if provider not in PROVIDERS or not isinstance(model, str):
            raise SaveError(
                f"{owner} is pinned to {lm!r}, which is not an imp.lm(...) client and cannot be saved; "
                "save with include_lm=False and pass lm=... to imp.load"
            )
        options = getattr(lm, "options", None)
        if not isinstance(options, Mapping):
            options = getattr(lm, "defaults", None)
        kept = {k: v for k, v in dict(options or {}).items() if k not in _NOT_SAVED_LM_OPTIONS}
        out: JSONObject = {
            "provider": provider,
            "model": model,
            "options": self.value(kept, "lm.options", drop_secrets=True),
        }
        base_url = getattr(lm, "base_url", None)
        if isinstance(base_url, str) and base_url and base_url != getattr(lm, "default_base_url", None):
            out["base_url"] = _drop_userinfo(base_url)
        return out

    def program(self, program: Program) -> JSONObject:
        """A nested program's payload (with its kind), for kinds that contain programs."""
        kind = _kind_of(program)
        return {"kind": kind.name, **kind.dump(program, self)}


class Loader:
    """What a kind's load function uses: functions and types from the registry, the LM to pin."""

    def __init__(
        self,
        registry: Mapping[str, object] | None = None,
        *,
        lm: LM | None = None,
        trust_endpoint: bool | str | Iterable[str] = False,
    ) -> None:
        self.registry = dict(registry or {})
        self.lm_override = lm
        self.trust = Trust(trust_endpoint)

    def function(self, name: str, where: str) -> Callable[..., Any]:  # Any: what each caller's slot needs
        """The registry's function saved under `name` (a tool's runner when the entry is a tool)."""
        entry = self.registry.get(name)
        if isinstance(entry, Tool):
            return entry.runner
        if entry is None:
            raise LoadError(
                f"{where} was saved as the function {name!r}, which is not in the registry; "
                f"pass imp.load(path, registry={{{name!r}: fn}}) (a function or an @imp.tool)"
            )
        if not callable(entry) or isinstance(entry, type):
            raise LoadError(
                f"{where} was saved as the function {name!r}, but registry[{name!r}] is a "
                f"{type(entry).__name__}, not a function or an @imp.tool"
            )
        return entry

    def tool(self, name: str) -> Tool | None:
        """The registry's tool saved under `name`, if the entry is a tool."""
        entry = self.registry.get(name)
        return entry if isinstance(entry, Tool) else None

    def value(self, value: object, where: str) -> object:
        """A saved value with its `{"$function": name}` markers resolved from the registry."""
        if isinstance(value, Mapping):
            if set(value) == {FUNCTION} and isinstance(value[FUNCTION], str):
                return self.function(value[FUNCTION], where)
            return {k: self.value(v, f"{where}.{k}") for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return value

    def demos(self, saved: Any) -> tuple[Any, ...]:
        """Saved demos, their media values read back (checked; never a path read or a URL fetched)."""
        return tuple(self.media(d, f"demos[{i}]") for i, d in enumerate(saved or ()))

    def media(self, value: object, where: str) -> Any:
        """A saved value with its saved media values (`{"$media": kind, ...}`) read back as values."""
        if isinstance(value, Mapping):
            if MEDIA_KEY in value:
                try:
                    return Media.load(value)
                except (ValueError, TypeError) as exc:
                    raise LoadError(f"{where}: {exc}") from None
            return {k: self.media(v, f"{where}.{k}") for k, v in value.items()}
        if isinstance(value, list):
            return [self.media(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return value

    def signature(self, data: object) -> Signature:
        """A saved signature; custom field types come from the registry by class name."""
        if not isinstance(data, Mapping):
            raise LoadError(f"the saved signature is an object, got {type(data).__name__}")
        types = {k: v for k, v in self.registry.items() if isinstance(v, type)}
        try:
            return Signature.load(data, types=types)
        except SignatureError as exc:
            raise LoadError(
                f"the saved signature could not be read ({exc.reason}); "
                "if it uses your own classes, pass them in registry={'ClassName': ClassName}"
            ) from exc

    def adapter(self, name: object) -> Adapter | None:
        """The adapter a file names, from imp's registry of adapters (an allowlist; a template is data, rendered safely)."""
        if name is None:
            return None
        adapter = load_adapter(name)
        if adapter is None:
            raise LoadError(f"the saved adapter {name!r} is not one of {', '.join(saved_names())}")
        return adapter

    def lm(self, data: object) -> LM | None:
        """The LM to pin: `imp.load(..., lm=...)` if given, else one rebuilt from provider, model and
        options, which the file may set only as `imp.saving._trust` allows."""
        if self.lm_override is not None:
            return self.lm_override
        if data is None:
            return None
        from imp.models import lm as make_lm

        try:
            provider, model, base_url, options = check_lm_section(data, self.trust, _provider_url)
        except Refused as exc:
            raise LoadError(str(exc)) from None
        # A named endpoint is here only because the caller trusted it: it gets the environment's key,
        # which `imp.lm` on its own sends only to the provider's own service (docs/models.md).
        api_key = _environment_key(provider) if base_url is not None else None
        return make_lm(f"{provider}:{model}", base_url=base_url, api_key=api_key, **options)

    def config(self, data: object) -> dict[str, object]:
        """A program's saved request options, as `imp.saving._trust` allows them."""
        try:
            return check_config(data, self.trust)
        except Refused as exc:
            raise LoadError(str(exc)) from None

    def adapter_opts(self, data: object) -> dict[str, object]:
        """A program's saved adapter options: renderers resolved from the registry, the rest typed."""
        try:
            checked = check_adapter_opts(data, FUNCTION)
        except Refused as exc:
            raise LoadError(str(exc)) from None
        resolved = {key: self.value(value, f"adapter_opts.{key}") for key, value in checked.items()}
        if resolved.get("guidance") is not None:
            resolved["guidance"] = _guidance(resolved["guidance"])
        return resolved

    def fields(self, data: object, allowed: Iterable[str], where: str) -> Mapping[str, object]:
        """An object of the file whose keys are all known (an unknown one is refused, naming it)."""
        try:
            return check_keys(data, allowed, where)
        except Refused as exc:
            raise LoadError(str(exc)) from None

    def program(self, data: object) -> Program:
        """A nested program from its payload."""
        if not isinstance(data, Mapping):
            raise LoadError(f"a saved program is an object, got {type(data).__name__}")
        name = data.get("kind")
        kind = KINDS.get(name) if isinstance(name, str) else None
        if kind is None:
            known = ", ".join(sorted(KINDS))
            raise LoadError(f"unknown program kind {name!r} (this imp loads: {known})")
        if kind.keys is not None:
            self.fields(data, {"kind", *kind.keys}, f"the saved {name} program")
        return kind.load(data, self)


def _provider_url(provider: str) -> str:
    """A provider's own endpoint (the one a file may name without the caller's word)."""
    return _provider_class(provider).default_base_url


def _environment_key(provider: str) -> str | None:
    """The key in the provider's environment variable (`OPENAI_API_KEY`, ...), if it is set."""
    name = _provider_class(provider).api_key_env
    return (os.environ.get(name) or None) if name else None


def _provider_class(provider: str) -> type[HTTPLM]:
    """The client class of a provider a file names (its modules load only here, when a file names it)."""
    from imp.models import PROVIDERS

    cls: type[HTTPLM]
    if provider == "openai":
        from imp.models.openai import OpenAILM as cls
    elif provider == "openai-responses":
        from imp.models.openai_responses import OpenAIResponsesLM as cls
    elif provider == "openrouter":
        from imp.models.openai import OpenRouterLM as cls
    elif provider == "anthropic":
        from imp.models.anthropic import AnthropicLM as cls
    else:
        raise Refused(f"the saved lm names the provider {provider!r}; imp knows {', '.join(PROVIDERS)}")
    return cls


def _guidance(data: object) -> Guidance:
    """A saved `guidance` option: `{"lines": [...], "text_answer": bool}`, as `Saver.value` writes it."""
    if not isinstance(data, Mapping):
        raise LoadError('adapter_opts.guidance is {"lines": [strings], "text_answer": true or false}')
    unknown = sorted(str(k) for k in data if k not in ("lines", "text_answer"))
    lines = data.get("lines", [])
    text_answer = data.get("text_answer", False)
    if unknown or not isinstance(lines, list) or not all(isinstance(x, str) for x in lines):
        raise LoadError(
            'adapter_opts.guidance is {"lines": [strings], "text_answer": true or false}'
            + (f"; it has unknown keys {unknown}" if unknown else "")
        )
    if not isinstance(text_answer, bool):
        raise LoadError("adapter_opts.guidance.text_answer is true or false")
    return Guidance(lines=tuple(lines), text_answer=text_answer)
