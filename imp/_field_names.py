"""Names a signature's fields cannot take, because something of imp's own already answers to them."""

from __future__ import annotations

import re

__all__ = ["RESERVED_INPUT_NAMES", "RESERVED_OUTPUT_NAMES", "name_problem", "reserved_name_problem"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")

RESERVED_OUTPUT_NAMES = frozenset(
    {
        "complete",
        "fields",
        "get",
        "items",
        "keys",
        "metadata",
        "_body",
        "_complete",
        "_fields",
        "_metadata",
        "_no_field",
        "_noun",
    }
)
"""Names an output cannot take: `imp.Prediction`'s own attributes, which `prediction.name` would
read instead of the field (a test keeps this in step with the class)."""
RESERVED_INPUT_NAMES = frozenset(
    {"authorize", "on_event", "resume", "decisions", "run_id", "journal", "session_id", "sessions", "budget"}
)
"""Names an input cannot take: `imp.call`'s own keywords, which `imp.call(program, name=...)` would take."""


def reserved_name_problem(name: str, kind: str) -> str | None:
    """Why a field cannot take this name (an attribute of the Prediction, a keyword of `imp.call`), or None."""
    if name.startswith("__") and name.endswith("__"):
        return f"the field name `{name}` is a Python special name; rename the field"
    if kind == "output" and name in RESERVED_OUTPUT_NAMES:
        public = ", ".join(sorted(n for n in RESERVED_OUTPUT_NAMES if not n.startswith("_")))
        return (
            f"the output field `{name}` would be hidden by imp.Prediction's own `.{name}` "
            f"(outputs cannot be named {public}, or a Prediction's private names); "
            f"rename the field, e.g. `{name.strip('_')}_`"
        )
    if kind == "input" and name in RESERVED_INPUT_NAMES:
        return (
            f"the input field `{name}` would be taken by imp.call's own `{name}=` keyword; "
            f"rename the field, e.g. `{name}_`"
        )
    return None


def name_problem(name: str, kind: str) -> str | None:
    """Why a field cannot take this name (not an identifier, or reserved), or None."""
    if not _NAME.match(name):
        return f"`{name}` is not a valid field name (letters, digits and _, not first a digit)"
    return reserved_name_problem(name, kind)
