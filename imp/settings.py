"""Settings: `configure()` for the process, `context()` for one block, on context variables."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from imp.adapters.base import Adapter
    from imp.lm.base import LM

__all__ = ["Settings", "configure", "context", "settings"]


@dataclass(frozen=True, slots=True)
class Settings:
    """What programs use when they were not given it: the LM, the adapter, and runtime switches."""

    lm: LM | None = None
    adapter: Adapter | None = None
    track_usage: bool = True
    cache: Any = None
    history_size: int = 100
    warn_on_unknown_inputs: bool = True


_KEYS = frozenset(f.name for f in fields(Settings))
_lock = threading.Lock()
_process_settings = Settings()
_overrides: ContextVar[Settings | None] = ContextVar("imp_settings", default=None)


def _check(kwargs: dict[str, Any], where: str) -> None:
    unknown = sorted(set(kwargs) - _KEYS)
    if unknown:
        raise TypeError(f"{where} got unknown setting(s) {unknown}; known: {sorted(_KEYS)}")


def settings() -> Settings:
    """The settings in force here: this context's overrides, else the process's."""
    return _overrides.get() or _process_settings


def configure(**kwargs: Any) -> None:
    """Set process-wide settings (`lm`, `adapter`, `track_usage`, `cache`, ...)."""
    global _process_settings
    _check(kwargs, "imp.configure")
    with _lock:
        _process_settings = replace(_process_settings, **kwargs)


@contextmanager
def context(**kwargs: Any) -> Iterator[Settings]:
    """Override settings inside the block only; concurrent tasks never see each other's overrides."""
    _check(kwargs, "imp.context")
    token = _overrides.set(replace(settings(), **kwargs))
    try:
        yield settings()
    finally:
        _overrides.reset(token)
