"""`program.render(inputs)`: the exact first request a program would send, built by its own code, not sent."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from imp._redact import redact
from imp.errors import ImpError
from imp.models.base import LM, LMResponse, Message
from imp.settings import settings

__all__ = ["RenderedRequest", "render"]


@dataclass(frozen=True, slots=True)
class RenderedRequest:
    """One request as it would be sent: the messages, the request options, and the model."""

    messages: tuple[Message, ...]
    options: Mapping[str, Any]
    model: str


class _Captured(BaseException):
    """Carries the request out of the program at the moment it would be sent (no program catches it)."""

    def __init__(self, request: RenderedRequest) -> None:
        super().__init__("captured")
        self.request = request


class _CaptureLM(LM):
    """Stands in for the program's LM: same name, capabilities and default options, and it stops the
    program at its first request."""

    def __init__(self, lm: LM | None) -> None:
        self._secrets: tuple[str, ...] = ()
        if lm is not None:
            self.provider, self.model, self.capabilities = lm.provider, lm.model, lm.capabilities
            self.defaults = lm.defaults
            self._secrets = tuple(getattr(lm, "secrets", ()))

    async def request(self, messages: Sequence[Message], **options: object) -> LMResponse:
        # What is sent: the client's default options under the request's (as `inspect_history` shows
        # them), with credentials redacted (a rendered request is for reading).
        sent = redact({**self.defaults, **options}, self._secrets)
        raise _Captured(RenderedRequest(tuple(messages), sent, f"{self.provider}:{self.model}"))


def render(program: object, inputs: Mapping[str, object]) -> RenderedRequest:
    """Run a program (`imp.Program`, which calls this, sits above) up to its first LM request and
    return that request instead of sending it."""
    with_lm = getattr(program, "with_lm", None)
    if with_lm is None:
        raise TypeError(f"{type(program).__name__} cannot be rendered: it has no with_lm to stand an LM in")
    lm = getattr(program, "lm", None) or getattr(getattr(program, "program", None), "lm", None) or settings().lm
    stand_in = with_lm(_CaptureLM(lm))
    coroutine = stand_in.acall(dict(inputs))
    try:
        coroutine.send(None)
    except _Captured as captured:
        return captured.request
    except StopIteration:
        raise ImpError(
            f"{type(program).__name__} answered without an LM request, so there is nothing to render"
        ) from None
    coroutine.close()
    raise ImpError(f"{type(program).__name__} waits on something before its first request; it cannot be rendered")
