"""`imp.save` / `imp.load`: programs as checksummed JSON, without credentials, functions saved by name.

A program kind (Predict, ChainOfThought, and later ReAct) registers a `ProgramKind` with a dump and
a load function; `Saver` and `Loader` give those functions the shared rules: JSON-safe values,
credentials and headers dropped, functions written as names and resolved from the registry.
"""

from __future__ import annotations

import contextlib
import datetime as _dt
import enum
import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from imp._redact import is_secret_key
from imp.adapters import Adapter, ChatAdapter, JSONAdapter, TemplateAdapter, XMLAdapter
from imp.errors import ImpError, SignatureError
from imp.lm.base import LM
from imp.lm.scripted import ScriptedLM, StaticLM
from imp.prediction import Example, Prediction
from imp.programs.base import Program
from imp.programs.function import FunctionProgram, dump_function, load_function
from imp.programs.predict import ChainOfThought, Predict
from imp.programs.react import ReAct
from imp.signature import Signature
from imp.tools import Tool

__all__ = [
    "FORMAT",
    "SCHEMA_VERSION",
    "ChecksumError",
    "LoadError",
    "Loader",
    "ProgramKind",
    "SaveError",
    "Saver",
    "dump_program",
    "load",
    "load_program",
    "register_program_kind",
    "save",
]

FORMAT = "imp.program"
SCHEMA_VERSION = 1
ADAPTERS: Mapping[str, type[Adapter]] = {
    "ChatAdapter": ChatAdapter,
    "JSONAdapter": JSONAdapter,
    "XMLAdapter": XMLAdapter,
}
"""The adapters a saved program may name (an allowlist: a file never names a class to import)."""

_FUNCTION = "$function"
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
    dump: Callable[[Any, Saver], dict[str, Any]]
    load: Callable[[Mapping[str, Any], Loader], Program]


_KINDS: dict[str, ProgramKind] = {}


def register_program_kind(kind: ProgramKind) -> None:
    """Make a program class saveable (a kind name may be registered again, replacing the old one)."""
    _KINDS[kind.name] = kind


def _kind_of(program: Program) -> ProgramKind:
    for kind in _KINDS.values():
        if type(program) is kind.cls:
            return kind
    known = ", ".join(sorted(k.cls.__name__ for k in _KINDS.values()))
    raise SaveError(f"imp.save does not know how to save a {type(program).__name__} (it saves: {known})")


# --- values ---------------------------------------------------------------------------------------


def _function_name(fn: Callable[..., Any], names: Mapping[int, str], where: str) -> str:
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


def _drop_userinfo(url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.rpartition("@")[2]
    query = urlencode([(k, v) for k, v in parse_qsl(parts.query, keep_blank_values=True) if not is_secret_key(k)])
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


class Saver:
    """What a kind's dump function uses: JSON-safe values, functions by name, LMs without credentials."""

    def __init__(self, registry: Mapping[str, Any] | None = None, *, include_lm: bool = True) -> None:
        self._names = {id(v): k for k, v in (registry or {}).items() if callable(v)}
        self.include_lm = include_lm

    def function(self, fn: Callable[..., Any], where: str) -> str:
        """The name a function is saved under (its registry name, else its qualified name)."""
        return _function_name(fn, self._names, where)

    def value(self, value: Any, where: str, *, drop_secrets: bool = False, functions: bool = False) -> Any:
        """A JSON-safe copy of a value; raises `SaveError` naming `where` for what JSON cannot hold."""
        if value is None or isinstance(value, bool | int | str):
            return value
        if isinstance(value, float):
            if math.isfinite(value):
                return value
            raise SaveError(f"{where} is {value!r}, which JSON cannot hold")
        if isinstance(value, Mapping):
            out: dict[str, Any] = {}
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
        if isinstance(value, Example):
            return self.value(value.to_dict(), where, drop_secrets=drop_secrets, functions=functions)
        if isinstance(value, Prediction):
            return self.value(value.fields, where, drop_secrets=drop_secrets, functions=functions)
        if isinstance(value, enum.Enum):
            return self.value(value.value, where)
        if isinstance(value, _dt.datetime | _dt.date | _dt.time):
            return value.isoformat()
        dump = getattr(value, "model_dump", None)
        if callable(dump) and not isinstance(value, type):
            return self.value(dump(mode="json"), where)
        if functions and callable(value):
            return {_FUNCTION: self.function(value, where)}
        raise SaveError(f"{where} is a {type(value).__name__}, which imp.save cannot write as JSON")

    def signature(self, signature: Signature, where: str = "signature") -> dict[str, Any]:
        """A signature's dump, checked to be JSON-safe."""
        dumped: dict[str, Any] = self.value(signature.dump(), where)
        return dumped

    def adapter(self, adapter: Adapter | None) -> str | dict[str, Any] | None:
        """An adapter's name from the allowlist (None when the program uses the configured one); a template as data."""
        if adapter is None:
            return None
        if type(adapter) is TemplateAdapter:
            return {"template": adapter.dump()}
        for name, cls in ADAPTERS.items():
            if type(adapter) is cls:
                return name
        raise SaveError(
            f"the adapter {type(adapter).__name__} cannot be saved; saved programs name one of {', '.join(ADAPTERS)}"
        )

    def lm(self, lm: LM | None, owner: str) -> dict[str, Any] | None:
        """Provider, model, options and base URL of an `imp.lm(...)` client; never a credential or header."""
        if lm is None or not self.include_lm:
            return None
        if isinstance(lm, ScriptedLM | StaticLM):
            raise SaveError(
                f"{owner} is pinned to {lm!r}, a scripted LM, which cannot be saved (its replies are test data). "
                "Save with imp.save(program, path, include_lm=False) and pass lm=... to imp.load"
            )
        from imp.lm import PROVIDERS

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
        out: dict[str, Any] = {
            "provider": provider,
            "model": model,
            "options": self.value(kept, "lm.options", drop_secrets=True),
        }
        base_url = getattr(lm, "base_url", None)
        if isinstance(base_url, str) and base_url and base_url != getattr(lm, "default_base_url", None):
            out["base_url"] = _drop_userinfo(base_url)
        return out

    def program(self, program: Program) -> dict[str, Any]:
        """A nested program's payload (with its kind), for kinds that contain programs."""
        kind = _kind_of(program)
        return {"kind": kind.name, **kind.dump(program, self)}


class Loader:
    """What a kind's load function uses: functions and types from the registry, the LM to pin."""

    def __init__(self, registry: Mapping[str, Any] | None = None, *, lm: LM | None = None) -> None:
        self.registry = dict(registry or {})
        self.lm_override = lm

    def function(self, name: str, where: str) -> Callable[..., Any]:
        """The registry's function saved under `name`."""
        fn = self.registry.get(name)
        if fn is None or not callable(fn):
            raise LoadError(
                f"{where} was saved as the function {name!r}, which is not in the registry; "
                f"pass imp.load(path, registry={{{name!r}: fn}})"
            )
        return fn  # type: ignore[no-any-return]

    def value(self, value: Any, where: str) -> Any:
        """A saved value with its `{"$function": name}` markers resolved from the registry."""
        if isinstance(value, Mapping):
            if set(value) == {_FUNCTION} and isinstance(value[_FUNCTION], str):
                return self.function(value[_FUNCTION], where)
            return {k: self.value(v, f"{where}.{k}") for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return value

    def signature(self, data: Mapping[str, Any]) -> Signature:
        """A saved signature; custom field types come from the registry by class name."""
        types = {k: v for k, v in self.registry.items() if isinstance(v, type)}
        try:
            return Signature.load(data, types=types)
        except SignatureError as exc:
            raise LoadError(
                f"the saved signature could not be read ({exc.reason}); "
                "if it uses your own classes, pass them in registry={'ClassName': ClassName}"
            ) from exc

    def adapter(self, name: Any) -> Adapter | None:
        """The allowlisted adapter a file names."""
        if name is None:
            return None
        if isinstance(name, Mapping) and set(name) == {"template"}:
            return TemplateAdapter.load(name["template"])  # a template is data, rendered safely
        cls = ADAPTERS.get(name) if isinstance(name, str) else None
        if cls is None:
            raise LoadError(f"the saved adapter {name!r} is not one of {', '.join(ADAPTERS)}")
        return cls()

    def lm(self, data: Any) -> LM | None:
        """The LM to pin: `imp.load(..., lm=...)` if given, else one rebuilt from provider, model and options."""
        if self.lm_override is not None:
            return self.lm_override
        if data is None:
            return None
        if not isinstance(data, Mapping) or not isinstance(data.get("provider"), str):
            raise LoadError("the saved lm must name a provider and a model")
        from imp.lm import lm as make_lm

        options = dict(data.get("options") or {})
        return make_lm(f"{data['provider']}:{data['model']}", base_url=data.get("base_url"), **options)

    def program(self, data: Mapping[str, Any]) -> Program:
        """A nested program from its payload."""
        name = data.get("kind")
        kind = _KINDS.get(name) if isinstance(name, str) else None
        if kind is None:
            known = ", ".join(sorted(_KINDS))
            raise LoadError(f"unknown program kind {name!r} (this imp loads: {known})")
        return kind.load(data, self)


# --- Predict and ChainOfThought ---------------------------------------------------------------------


def _dump_predict(program: Predict, saver: Saver) -> dict[str, Any]:
    owner = type(program).__name__
    opts = {k: v for k, v in program.adapter_opts.items() if k != "demos"}
    return {
        "signature": saver.signature(program.signature),
        "demos": [saver.value(d, f"demos[{i}]") for i, d in enumerate(program.demos)],
        "config": saver.value(program.config, "config", drop_secrets=True),
        "adapter": saver.adapter(program.adapter),
        "adapter_opts": saver.value(opts, "adapter_opts", drop_secrets=True, functions=True),
        "json_fallback": program.json_fallback,
        "lm": saver.lm(program.lm, owner),
    }


def _predict_loader(cls: type[Predict]) -> Callable[[Mapping[str, Any], Loader], Program]:
    def load_predict(data: Mapping[str, Any], loader: Loader) -> Program:
        return cls(
            signature=loader.signature(data["signature"]),
            lm=loader.lm(data.get("lm")),
            adapter=loader.adapter(data.get("adapter")),
            demos=tuple(data.get("demos") or ()),
            config=dict(data.get("config") or {}),
            adapter_opts=loader.value(dict(data.get("adapter_opts") or {}), "adapter_opts"),
            json_fallback=bool(data.get("json_fallback", True)),
        )

    return load_predict


register_program_kind(ProgramKind("predict", Predict, _dump_predict, _predict_loader(Predict)))
register_program_kind(ProgramKind("chain_of_thought", ChainOfThought, _dump_predict, _predict_loader(ChainOfThought)))


# --- the file -------------------------------------------------------------------------------------


def _canonical(document: Mapping[str, Any]) -> bytes:
    body = {k: v for k, v in document.items() if k != "checksum"}
    return json.dumps(body, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def _checksum(document: Mapping[str, Any]) -> str:
    return "sha256:" + hashlib.sha256(_canonical(document)).hexdigest()


def dump_program(
    program: Program, *, registry: Mapping[str, Any] | None = None, include_lm: bool = True
) -> dict[str, Any]:
    """The document `imp.save` writes, as a dict (format, schema version, program, checksum)."""
    if not isinstance(program, Program):
        raise TypeError(f"imp.save saves an imp program, got {type(program).__name__}")
    document: dict[str, Any] = {
        "format": FORMAT,
        "schema_version": SCHEMA_VERSION,
        "program": Saver(registry, include_lm=include_lm).program(program),
    }
    document["checksum"] = _checksum(document)
    return document


def load_program(
    document: Mapping[str, Any], *, registry: Mapping[str, Any] | None = None, lm: LM | None = None
) -> Program:
    """A program from a document `dump_program` made; checks the format, schema version and checksum."""
    if not isinstance(document, Mapping) or document.get("format") != FORMAT:
        raise LoadError(f"not a saved imp program (expected a JSON object with format {FORMAT!r})")
    version = document.get("schema_version")
    if version != SCHEMA_VERSION:
        raise LoadError(f"saved with schema version {version!r}; this imp reads schema version {SCHEMA_VERSION}")
    if document.get("checksum") != _checksum(document):
        raise ChecksumError(
            "the saved program does not match its checksum: it was changed after imp.save wrote it "
            "(edited by hand, or damaged). Change the program in code and save it again"
        )
    program = document.get("program")
    if not isinstance(program, Mapping):
        raise LoadError("the saved document has no program")
    return Loader(registry, lm=lm).program(program)


def _write_atomic(path: Path, text: str) -> None:
    directory = path.parent if str(path.parent) else Path(".")
    fd, temp = tempfile.mkstemp(dir=directory, prefix=f".{path.name}.", suffix=".tmp")  # created with mode 0600
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(temp, 0o600)
        os.replace(temp, path)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp)
        raise


def save(
    program: Program,
    path: str | os.PathLike[str],
    *,
    registry: Mapping[str, Any] | None = None,
    include_lm: bool = True,
) -> Path:
    """Write a program to `path` as checksummed JSON (atomically, mode 0600); returns the path.

    Functions in `adapter_opts` are saved by their `registry` name (else their qualified name);
    `include_lm=False` leaves the model out (pass `lm=` to `imp.load`).
    """
    document = dump_program(program, registry=registry, include_lm=include_lm)
    target = Path(path)
    _write_atomic(target, json.dumps(document, indent=2, ensure_ascii=False) + "\n")
    return target


def load(path: str | os.PathLike[str], *, registry: Mapping[str, Any] | None = None, lm: LM | None = None) -> Program:
    """Read a program `imp.save` wrote; `registry` resolves saved function and type names, `lm` overrides the model."""
    target = Path(path)
    try:
        document = json.loads(target.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise LoadError(f"{target} is not JSON ({exc.msg} at line {exc.lineno}); was it written by imp.save?") from None
    try:
        return load_program(document, registry=registry, lm=lm)
    except ChecksumError as exc:
        raise ChecksumError(f"{target}: {exc}") from None


# --- ReAct ------------------------------------------------------------------------------------------


def _dump_tool(tool: Tool, saver: Saver) -> dict[str, Any]:
    return {
        "name": tool.name,
        "description": tool.description,
        "parameters": saver.value(dict(tool.parameters), f"tools.{tool.name}.parameters"),
        "runner": saver.function(tool.runner, f"the runner of tool `{tool.name}`"),
        "timeout": tool.timeout,
        "sequential": tool.sequential,
        "call_with": tool.call_with,
        "metadata": saver.value(dict(tool.metadata), f"tools.{tool.name}.metadata", drop_secrets=True),
    }


def _load_tool(data: Mapping[str, Any], loader: Loader) -> Tool:
    name = str(data["name"])
    return Tool(
        name=name,
        description=str(data.get("description", "")),
        parameters=dict(data.get("parameters") or {}),
        runner=loader.function(str(data["runner"]), f"the runner of tool `{name}`"),
        timeout=data.get("timeout"),
        sequential=bool(data.get("sequential", False)),
        call_with=data.get("call_with", "keywords"),
        metadata=dict(data.get("metadata") or {}),
    )


def _dump_react(program: ReAct, saver: Saver) -> dict[str, Any]:
    policy = program.tool_policy
    saved_policy: Any = (
        {_FUNCTION: saver.function(policy, "tool_policy")} if callable(policy) else saver.value(policy, "tool_policy")
    )
    opts = {k: v for k, v in program.adapter_opts.items() if k != "demos"}
    return {
        "signature": saver.signature(program.signature),
        "tools": [_dump_tool(t, saver) for t in program.tools],
        "demos": [saver.value(d, f"demos[{i}]") for i, d in enumerate(program.demos)],
        "config": saver.value(program.config, "config", drop_secrets=True),
        "adapter": saver.adapter(program.adapter),
        "adapter_opts": saver.value(opts, "adapter_opts", drop_secrets=True, functions=True),
        "max_iters": program.max_iters,
        "finish": program.finish,
        "finish_on": {name: saver.function(fn, f"finish_on[{name!r}]") for name, fn in program.finish_on.items()},
        "last_request_note": program.last_request_note,
        "last_request_tools": list(program.last_request_tools),
        "unsent_note": program.unsent_note,
        "history_replay": program.history_replay,
        "tool_policy": saved_policy,
        "lm": saver.lm(program.lm, "ReAct"),
    }


def _load_react(data: Mapping[str, Any], loader: Loader) -> Program:
    return ReAct(
        signature=loader.signature(data["signature"]),
        tools=tuple(_load_tool(t, loader) for t in data.get("tools") or ()),
        lm=loader.lm(data.get("lm")),
        adapter=loader.adapter(data.get("adapter")),
        demos=tuple(data.get("demos") or ()),
        config=dict(data.get("config") or {}),
        adapter_opts=loader.value(dict(data.get("adapter_opts") or {}), "adapter_opts"),
        max_iters=int(data.get("max_iters", 20)),
        finish=data.get("finish", "auto"),
        finish_on={
            name: loader.function(fn, f"finish_on[{name!r}]") for name, fn in (data.get("finish_on") or {}).items()
        },
        last_request_note=data.get("last_request_note"),
        last_request_tools=tuple(data.get("last_request_tools") or ()),
        unsent_note=data.get("unsent_note"),
        history_replay=data.get("history_replay", "full"),
        tool_policy=loader.value(data.get("tool_policy", "allow"), "tool_policy"),
    )


register_program_kind(ProgramKind("react", ReAct, _dump_react, _load_react))
register_program_kind(ProgramKind("function", FunctionProgram, dump_function, load_function))
