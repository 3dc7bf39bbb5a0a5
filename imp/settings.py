"""Settings: `configure()` for the process, `context()` for one block, on context variables.

The settings sit above the adapters and the LM clients they name. What a lower layer needs of them
is handed down, never read upward: the `cache` setting goes to `imp.models.cache`, the parse limits
to `imp._json`, when they are set.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

from imp._json import ParseLimits, use_limits
from imp.adapters._names import as_adapter
from imp.models.cache import configured_cache, configured_cache_here

_DEFAULT_LIMITS = ParseLimits()

if TYPE_CHECKING:
    from imp.adapters.base import Adapter
    from imp.models.base import LM

__all__ = ["Settings", "configure", "context", "process_settings", "settings"]


@dataclass(frozen=True, slots=True)
class Settings:
    """What programs use when they were not given it: the LM, the adapter, and runtime switches.

    `history_size` is how many recent LM exchanges `imp.inspect_history` keeps (0 keeps none); the
    record is the process's, so it is set with `imp.configure` only. `parse_limits` bounds what imp
    reads of a model's or a server's text (`imp.ParseLimits`), also for the whole process.
    """

    lm: LM | None = None
    adapter: Adapter | None = None
    cache: object = None
    history_size: int = 200
    warn_on_unknown_inputs: bool = True
    parse_limits: ParseLimits = _DEFAULT_LIMITS
    journal: Any = None
    """The journal a call with a `run_id` records to when it is given none (`imp.SQLiteJournal`)."""

    def __post_init__(self) -> None:
        size = self.history_size
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ValueError(
                f"history_size is how many LM exchanges imp.inspect_history keeps: a non-negative integer "
                f"(0 keeps none), got {size!r}"
            )


_KEYS = frozenset(f.name for f in fields(Settings))
_REMOVED = {
    "track_usage": (
        "usage is always tracked, at no measurable cost: read it from prediction.metadata.usage "
        "(report.usage for imp.evaluate); remove track_usage from the call"
    ),
}
"""Settings imp once accepted and never read: refused, saying what to do instead."""
_PROCESS_ONLY = frozenset({"history_size", "parse_limits"})
"""Settings that shape something the whole process shares: `imp.configure` only."""
_lock = threading.Lock()
_process_settings = Settings()
_overrides: ContextVar[Settings | None] = ContextVar("imp_settings", default=None)


def _check(kwargs: dict[str, Any], where: str) -> None:
    for name, instead in _REMOVED.items():
        if name in kwargs:
            raise TypeError(f"{where} no longer takes {name}: {instead}")
    unknown = sorted(set(kwargs) - _KEYS)
    if unknown:
        raise TypeError(f"{where} got unknown setting(s) {unknown}; known: {sorted(_KEYS)}")


def _read_values(kwargs: dict[str, Any], where: str) -> dict[str, Any]:
    """The settings as given, checked the way a program checks its own `lm=` and `adapter=`."""
    lm = kwargs.get("lm")
    if isinstance(lm, str):
        raise TypeError(f"{where}(lm=...) takes an LM client, not a model name: write lm=imp.lm({lm!r})")
    if lm is not None and not callable(getattr(lm, "request", None)):
        raise TypeError(f"{where}(lm=...) takes an LM client such as imp.lm('openai:gpt-4o'), got {type(lm).__name__}")
    if kwargs.get("adapter") is not None:  # an instance, a class or a dialect's name, read as programs read it
        try:
            kwargs = {**kwargs, "adapter": as_adapter(kwargs["adapter"])}
        except TypeError as exc:
            raise TypeError(f"{where}: {exc}") from None
    return kwargs


def settings() -> Settings:
    """The settings in force here: this context's overrides, else the process's."""
    return _overrides.get() or _process_settings


def process_settings() -> Settings:
    """The process-wide settings (what `imp.configure` set), whatever this context overrides."""
    return _process_settings


def configure(**kwargs: Any) -> None:
    """Set process-wide settings (`lm`, `adapter`, `cache`, `history_size`, `warn_on_unknown_inputs`,
    `parse_limits`)."""
    global _process_settings
    _check(kwargs, "imp.configure")
    kwargs = _read_values(kwargs, "imp.configure")
    if "parse_limits" in kwargs and not isinstance(kwargs["parse_limits"], ParseLimits):
        raise TypeError(f"imp.configure(parse_limits=...) takes an imp.ParseLimits, got {kwargs['parse_limits']!r}")
    with _lock:
        _process_settings = replace(_process_settings, **kwargs)
        configured_cache(_process_settings.cache)
        use_limits(_process_settings.parse_limits)


@contextmanager
def context(**kwargs: Any) -> Iterator[Settings]:
    """Override settings inside the block only; concurrent tasks never see each other's overrides."""
    _check(kwargs, "imp.context")
    shared = sorted(_PROCESS_ONLY & set(kwargs))
    if shared:
        raise TypeError(
            f"imp.context cannot set {shared}: what they shape (the record of recent LM exchanges, the "
            "parse limits) is the process's; use imp.configure(...) instead"
        )
    kwargs = _read_values(kwargs, "imp.context")
    token = _overrides.set(replace(settings(), **kwargs))
    try:
        with configured_cache_here(settings().cache):
            yield settings()
    finally:
        _overrides.reset(token)
