"""imp's own adapters by name: the names `adapter="json"` takes, and how a saved program names one.

Each of imp's adapter modules registers its dialect here when it is imported, so adding a dialect
touches `imp/adapters/` alone. The registry is an allowlist: only classes defined in imp's own
adapter modules may be registered, so a saved file can only ever name one of them (a file never
names a class to import), and an adapter with state is saved as data its class reads back safely.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from imp.adapters.base import Adapter

__all__ = ["ADAPTER_NAMES", "SavedAdapter", "load_adapter", "register_adapter", "saved_adapter", "saved_names"]

SavedAdapter = str | dict[str, Any]
"""An adapter as a saved program writes it: its name, or `{name: data}` for one with state (a template)."""


@dataclass(frozen=True, slots=True)
class _Entry:
    cls: type[Adapter]
    saved: str
    dump: Callable[[Adapter], Any] | None
    load: Callable[[Any], Adapter] | None


_BY_CLASS: dict[type, _Entry] = {}
_BY_SAVED: dict[str, _Entry] = {}
ADAPTER_NAMES: dict[str, type[Adapter]] = {}
"""The dialects by name, as `adapter="json"` spells them."""


def register_adapter(
    cls: type[Adapter],
    *,
    saved: str,
    option: str | None = None,
    dump: Callable[[Any], Any] | None = None,
    load: Callable[[Any], Adapter] | None = None,
) -> None:
    """Name one of imp's adapter classes: `saved` in saved programs (with `dump`/`load` for its data when it
    has state), `option` for `adapter=` (None: not by name). Refused for a class outside imp's adapters."""
    if not cls.__module__.startswith("imp.adapters."):
        raise TypeError(
            f"{cls.__name__} is not one of imp's adapters: saved programs name only imp's own (an allowlist); "
            "save a program with your adapter by passing it again when you load it"
        )
    entry = _Entry(cls, saved, dump, load)
    _BY_CLASS[cls] = entry
    _BY_SAVED[saved] = entry
    if option is not None:
        ADAPTER_NAMES[option] = cls


def saved_adapter(adapter: Adapter) -> SavedAdapter | None:
    """How a saved program names this adapter (None: its exact class is not one imp saves)."""
    entry = _BY_CLASS.get(type(adapter))
    if entry is None:
        return None
    return entry.saved if entry.dump is None else {entry.saved: entry.dump(adapter)}


def load_adapter(data: object) -> Adapter | None:
    """The adapter a saved program names (None: the name or its form is not one imp saves)."""
    if isinstance(data, str):
        entry = _BY_SAVED.get(data)
        return entry.cls() if entry is not None and entry.load is None else None
    if isinstance(data, Mapping) and len(data) == 1:
        ((name, value),) = data.items()
        entry = _BY_SAVED.get(name) if isinstance(name, str) else None
        return entry.load(value) if entry is not None and entry.load is not None else None
    return None


def saved_names() -> list[str]:
    """The names saved programs may give (the adapters saved by name alone)."""
    return sorted(name for name, entry in _BY_SAVED.items() if entry.dump is None)
