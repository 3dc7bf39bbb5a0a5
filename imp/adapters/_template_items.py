"""What a template is written with: `imp.system(...)`, `imp.user(...)`, `imp.assistant(...)` and
`imp.turns()` (or OpenAI-style role/content dicts), read into messages and the turns marker."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from imp.adapters._template_text import TemplateError

__all__ = [
    "Role",
    "TemplateItem",
    "TemplateMessage",
    "Turns",
    "as_item",
    "assistant",
    "system",
    "turns",
    "user",
]

Role = Literal["system", "user", "assistant"]
_ROLES: tuple[Role, ...] = ("system", "user", "assistant")


@dataclass(frozen=True, slots=True)
class TemplateMessage:
    """One message of a template: its role and its text, with `{name}` values and blocks."""

    role: Role
    content: str

    def __repr__(self) -> str:
        return f"imp.{self.role}({self.content!r})"


@dataclass(frozen=True, slots=True)
class Turns:
    """Where demos and earlier turns go in a template."""

    def __repr__(self) -> str:
        return "imp.turns()"


def system(content: str) -> TemplateMessage:
    """A system message of a template."""
    return TemplateMessage("system", content)


def user(content: str) -> TemplateMessage:
    """A user message of a template."""
    return TemplateMessage("user", content)


def assistant(content: str) -> TemplateMessage:
    """An assistant message of a template; as the last message, a prefill the reply starts with."""
    return TemplateMessage("assistant", content)


def turns() -> Turns:
    """Marks where demos and history go (without it: right before the last user message)."""
    return Turns()


TemplateItem = TemplateMessage | Turns | Mapping[str, Any]


def as_item(item: object, index: int) -> TemplateMessage | Turns:
    """A template's `index`-th item as a message or the turns marker (an OpenAI-style dict is read)."""
    if isinstance(item, TemplateMessage | Turns):
        return item
    if isinstance(item, Mapping):
        if (
            set(item) - {"role", "content"}
            or item.get("role") not in _ROLES
            or not isinstance(item.get("content"), str)
        ):
            raise TemplateError(
                f"template message {index}: an OpenAI-style message is {{'role': 'system' | 'user' | 'assistant', "
                f"'content': '...'}}, got {dict(item)!r}"
            )
        return TemplateMessage(item["role"], item["content"])
    raise TemplateError(
        f"template message {index} is a {type(item).__name__}; use imp.system(...), imp.user(...), "
        "imp.assistant(...), imp.turns() or {'role': ..., 'content': ...}"
    )
