"""A faster `__init__` for frozen, slotted dataclasses: the values imp builds on every call.

On CPython 3.12 the `__init__` that `@dataclass(frozen=True)` writes sets each field through
`object.__setattr__` looked up anew per field; setting the slots through their own descriptors
does the same thing in about a third of the time (a `Usage` of three counts: 2.8 µs -> 1.0 µs).
`LMResponse`, `Usage`, `StreamEvent`, `PredictionMetadata` and `Event` are built once or more per
LM call: counted with callgrind over 2,000 `await imp.call(predict)` calls on a zero-latency LM,
one predict costs 171k instructions with dataclass's own `__init__`s and 141k with these (-17%);
wall time in `benchmarks/overhead.py` and `benchmarks/concurrency.py` moves the same way, though
less clearly on a shared machine. The class keeps everything else `dataclass` gives it:
its fields, defaults and factories, equality, `repr`, `replace`, pickling, and immutability.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

__all__ = ["fast_init"]

_NO_VALUE: Any = object()


def fast_init[T](cls: type[T]) -> type[T]:
    """Give a frozen, slotted dataclass (no `__post_init__`, no keyword-only or `InitVar` fields)
    an `__init__` with the same signature that sets each slot through its descriptor. A class kept
    read-only by a `__setattr__` of its own base (the event payloads) takes it too: its `__init__`
    never goes through that `__setattr__`."""
    params = getattr(cls, "__dataclass_params__", None)
    read_only = params is not None and (params.frozen or cls.__setattr__ is not object.__setattr__)
    if not read_only or "__slots__" not in cls.__dict__:
        raise TypeError(f"fast_init is for frozen, slotted dataclasses; {cls.__name__} is not one")
    if hasattr(cls, "__post_init__"):
        raise TypeError(f"fast_init does not run __post_init__; {cls.__name__} has one")
    declared = list(inspect.signature(cls.__init__).parameters)[1:]
    if declared != [f.name for f in dataclasses.fields(cls)]:  # type: ignore[arg-type]
        raise TypeError(f"fast_init handles plain fields only; {cls.__name__}'s __init__ takes {declared}")
    namespace: dict[str, Any] = {"_NO_VALUE": _NO_VALUE}
    args: list[str] = []
    body: list[str] = []
    for f in dataclasses.fields(cls):  # type: ignore[arg-type]
        if f.kw_only or not f.init:
            raise TypeError(f"fast_init handles positional, init fields only; {cls.__name__}.{f.name} is not one")
        setter = f"_set_{f.name}"
        namespace[setter] = cls.__dict__[f.name].__set__
        if f.default is not dataclasses.MISSING:
            namespace[f"_default_{f.name}"] = f.default
            args.append(f"{f.name}=_default_{f.name}")
            body.append(f"    {setter}(self, {f.name})")
        elif f.default_factory is not dataclasses.MISSING:
            namespace[f"_factory_{f.name}"] = f.default_factory
            args.append(f"{f.name}=_NO_VALUE")
            body.append(f"    {setter}(self, _factory_{f.name}() if {f.name} is _NO_VALUE else {f.name})")
        else:
            args.append(f.name)
            body.append(f"    {setter}(self, {f.name})")
    source = f"def __init__(self, {', '.join(args)}):\n" + ("\n".join(body) or "    pass") + "\n"
    exec(source, namespace)
    init = namespace["__init__"]
    init.__qualname__ = f"{cls.__qualname__}.__init__"
    init.__module__ = cls.__module__
    init.__doc__ = cls.__init__.__doc__
    init.__signature__ = inspect.signature(cls.__init__)  # the readable one, with the real defaults
    cls.__init__ = init  # type: ignore[method-assign]
    return cls
