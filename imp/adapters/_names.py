"""An adapter option as users write it: an instance, an adapter class, or the name of a dialect."""

from __future__ import annotations

from imp.adapters._registry import ADAPTER_NAMES
from imp.adapters.base import Adapter

__all__ = ["ADAPTER_NAMES", "as_adapter"]


def as_adapter(value: object, *, option: str = "adapter") -> Adapter | None:
    """An Adapter instance for `adapter=...`: an instance as is, a class instantiated, a name looked up.

    None stays None (the program uses the configured adapter). Anything else is refused with a
    TypeError naming the option and what it takes.
    """
    if value is None or isinstance(value, Adapter):
        return value
    if isinstance(value, type) and issubclass(value, Adapter):
        try:
            return value()
        except TypeError as exc:
            raise TypeError(
                f"{option}={value.__name__} cannot be built without arguments ({exc}); pass an instance"
            ) from None
    choices = ", ".join(repr(n) for n in sorted(ADAPTER_NAMES))
    if isinstance(value, str):
        known = ADAPTER_NAMES.get(value.strip().lower().removesuffix("adapter"))
        if known is not None:
            return known()
        raise TypeError(f"{option}={value!r} is not an adapter name; the names are {choices} (or pass an imp.Adapter)")
    raise TypeError(
        f"{option} takes an imp.Adapter such as imp.JSONAdapter(), or one of the names {choices}; "
        f"got {type(value).__name__}"
    )
