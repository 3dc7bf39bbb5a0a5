"""The ImpError family: every error imp raises on purpose."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from imp.history import History

__all__ = [
    "AdapterParseError",
    "DeadlineExceeded",
    "ImpError",
    "InvalidInputError",
    "LMError",
    "MissingInputError",
    "ReActStepError",
    "SignatureError",
]


class ImpError(Exception):
    """Root of every error imp raises on purpose."""


class SignatureError(ImpError, ValueError):
    """A signature that cannot be built: names the position with a caret line."""

    def __init__(self, message: str, *, text: str | None = None, position: int | None = None) -> None:
        self.reason = message
        self.text = text
        self.position = position
        if text is not None and position is not None:
            message = f"{message}\n  {text}\n  {' ' * position}^"
        super().__init__(message)


class MissingInputError(ImpError, ValueError):
    """A required input field was not given; raised before any LM call."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = tuple(names)
        listed = ", ".join(f"`{n}`" for n in self.names)
        noun = "field" if len(self.names) == 1 else "fields"
        super().__init__(f"missing required input {noun}: {listed}")


class AdapterParseError(ImpError):
    """A reply that could not be read into the signature's output fields."""

    def __init__(
        self,
        message: str,
        *,
        adapter: str,
        fields: Sequence[str] = (),
        completion: str | Mapping[str, Any] | None = None,
        parsed: Mapping[str, Any] | None = None,
        value: Any = None,
        reason: str | None = None,
    ) -> None:
        self.adapter = adapter
        self.fields = tuple(fields)
        self.completion = completion
        self.parsed = dict(parsed or {})
        self.value = value
        self.reason = reason or message
        super().__init__(f"{adapter} could not parse the reply: {message}")


class LMError(ImpError):
    """A failed LM request, keeping the provider's status and (redacted) body."""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        provider: str | None = None,
        code: str | None = None,
        body: Any = None,
        retryable: bool = False,
        retry_after: float | None = None,
        context_window_exceeded: bool = False,
        content_filtered: bool = False,
        tool_choice_unsupported: bool = False,
        request_id: str | None = None,
        attempts: int = 1,
    ) -> None:
        self.message = message
        self.status = status
        self.provider = provider
        self.code = code
        self.body = body
        self.retryable = retryable
        self.retry_after = retry_after
        self.context_window_exceeded = context_window_exceeded
        self.content_filtered = content_filtered
        self.tool_choice_unsupported = tool_choice_unsupported
        self.request_id = request_id
        self.attempts = attempts
        """How many requests were made before this error was raised (retries included)."""
        where = f"{provider} " if provider else ""
        status_text = f"{status} " if status is not None else ""
        super().__init__(f"{where}{status_text}{message}".strip())


class DeadlineExceeded(ImpError, TimeoutError):
    """The current `imp.deadline` passed before the work finished."""


class ReActStepError(ImpError):
    """The last request of a ReAct turn failed; carries the history recorded so far."""

    def __init__(self, message: str, *, history: History, cause: BaseException | None = None) -> None:
        self.history = history
        self.cause = cause
        super().__init__(message)


class InvalidInputError(ImpError, ValueError):
    """An input value that does not fit its field (None for a required one, a wrong type, a broken
    constraint); raised before any LM call. The message names the field and the value's type, never
    the value itself (it may be a secret)."""

    def __init__(self, field: str, reason: str, *, value: Any = None) -> None:
        self.field = field
        self.reason = reason
        self.value = value
        super().__init__(f"input field `{field}`: {reason}")
