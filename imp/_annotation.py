"""What a field's annotation says: its base type, whether it admits None, its choices, history or not.

Below `_typeparse` and `signature`: it imports nothing of imp, so the layers above can all ask
these questions. The conversation-history type lives higher up (`imp.history`); it subclasses
`HistoryType`, which is how a signature recognises it without importing it.
"""

from __future__ import annotations

import enum
import types
import typing
from typing import Any, ClassVar, Literal, Union

__all__ = ["NONE", "HistoryType", "admits_none", "base_annotation", "choices", "history_type", "is_enum", "is_history"]

NONE = type(None)


class HistoryType:
    """Marker base of the conversation-history type: a signature input annotated with it is the history."""

    __slots__ = ()
    _the_class: ClassVar[type[HistoryType] | None] = None

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        if HistoryType._the_class is None:
            HistoryType._the_class = cls


def is_history(annotation: object) -> bool:
    """Whether an annotation is the conversation-history type (or a subclass of it)."""
    return isinstance(annotation, type) and issubclass(annotation, HistoryType)


def history_type() -> type[HistoryType] | None:
    """The conversation-history class, once `imp.history` has defined it (importing `imp` does)."""
    return HistoryType._the_class


def admits_none(annotation: object) -> bool:
    """Whether the annotation lets a value be None (`X | None`, `Optional[X]`, `Literal[..., None]`)."""
    if annotation is NONE:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return admits_none(typing.get_args(annotation)[0])
    if origin in (Union, types.UnionType):
        return any(a is NONE for a in typing.get_args(annotation))
    if origin is Literal:
        return None in typing.get_args(annotation)
    return False


def base_annotation(annotation: object) -> object:
    """The annotation without `Annotated[...]` and without `None` in an optional union."""
    while typing.get_origin(annotation) is typing.Annotated:
        annotation = typing.get_args(annotation)[0]
    if typing.get_origin(annotation) in (Union, types.UnionType):
        members = [a for a in typing.get_args(annotation) if a is not NONE]
        if len(members) == 1:
            return base_annotation(members[0])
    return annotation


def is_enum(annotation: object) -> bool:
    """Whether the annotation is an Enum class."""
    return isinstance(annotation, type) and issubclass(annotation, enum.Enum)


def choices(annotation: Any) -> list[Any] | None:
    """The values a `Literal` or an Enum allows (an Enum's member values), or None for other types."""
    if typing.get_origin(annotation) is Literal:
        return [a for a in typing.get_args(annotation) if a is not None]
    if is_enum(annotation):
        return [m.value for m in annotation]
    return None
