"""How every dialect's system message describes fields: numbered lines, constraints, output notes."""

from __future__ import annotations

from collections.abc import Mapping

from imp.signature import Field
from imp.values import type_name, value_note

__all__ = ["field_descriptions", "placeholder"]

# DSPy's phrases, in the order the field declares its constraints; DSPy does not show a
# pattern, and imp does (nothing declared is hidden from the model).
_CONSTRAINT_WORDS = {
    "gt": "greater than",
    "ge": "greater than or equal to",
    "lt": "less than",
    "le": "less than or equal to",
    "min_length": "minimum length",
    "max_length": "maximum length",
    "multiple_of": "a multiple of the given number",
    "pattern": "matching the pattern",
}


def _constraint_text(field: Field) -> str:
    words = [f"{_CONSTRAINT_WORDS[key]}: {value}" for key, value in field.constraints.items()]
    return "\nConstraints: " + ", ".join(words) if words else ""


def field_descriptions(fields: Mapping[str, Field]) -> str:
    """`1. \\`name\\` (type): description` lines, numbered."""
    lines = [
        f"{i}. `{name}` ({type_name(f.annotation)}): {f.desc}{_constraint_text(f)}"
        for i, (name, f) in enumerate(fields.items(), start=1)
    ]
    return "\n".join(lines).strip()


def placeholder(field: Field) -> str:
    """An output's `{name}` placeholder, with the `# note: ...` on its type when it is not plain text."""
    note = value_note(field)
    return f"{{{field.name}}}" + (" " * 8 + f"# note: the value you produce {note}" if note else "")
