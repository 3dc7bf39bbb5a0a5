"""Authorization: the host's answer, asked before each tool call runs (`Allow`, `Deny`, `Cancel`, `Defer`)."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import anyio

__all__ = [
    "DEFAULT_AUTHORIZE_TIMEOUT",
    "Allow",
    "AuthorizationRequest",
    "Authorizer",
    "Cancel",
    "Decision",
    "Defer",
    "Deny",
    "ask_authorizer",
]

DEFAULT_AUTHORIZE_TIMEOUT = 30.0
"""Seconds an authorizer may take before its silence counts as a denial."""


@dataclass(frozen=True, slots=True)
class Allow:
    """Run the call. On resuming a paused turn, `arguments` (when given) replace the ones the model
    wrote; they are checked against the tool's schema again before anything runs."""

    arguments: Mapping[str, Any] | None = None


@dataclass(frozen=True, slots=True)
class Deny:
    """Refuse this call; the model reads `reason` and the turn goes on."""

    reason: str = ""


@dataclass(frozen=True, slots=True)
class Cancel:
    """Refuse this call and end the whole turn (`imp.tools.ExecutionCancelled` is raised)."""

    reason: str = ""


@dataclass(frozen=True, slots=True)
class Defer:
    """Do not run the call now: the turn pauses with the call pending (`awaiting_approval`), to be
    decided later, in any process, by `imp.call(program, resume=pending, decisions=...)`."""

    reason: str = ""


type Decision = Allow | Deny | Cancel | Defer
"""An authorizer's answer."""


@dataclass(frozen=True, slots=True)
class AuthorizationRequest:
    """What the authorizer is asked about: one call that passed the policy and the schema check."""

    tool_call_id: str
    tool_name: str
    arguments: Mapping[str, Any]
    """The checked arguments, as the model sent them (JSON values, string keys)."""
    description: str
    """The tool's description, cut to 1000 characters."""
    metadata: Mapping[str, Any] = field(default_factory=dict)
    """The tool's metadata."""


type Authorizer = Callable[[AuthorizationRequest], Decision | Awaitable[Decision]]
"""A function (sync or async) answering an `AuthorizationRequest` with a `Decision`.

A sync authorizer runs on the event loop, so it should answer at once; one that waits for a
person should be async.
"""


async def ask_authorizer(
    authorize: Authorizer, request: AuthorizationRequest, *, authorize_timeout: float | None = DEFAULT_AUTHORIZE_TIMEOUT
) -> Decision:
    """The authorizer's decision, failing closed: a raise, no answer within `authorize_timeout` seconds,
    or an answer that is not a `Decision` become a `Deny` whose reason says so.

    Cancellation of the caller is never swallowed.
    """
    answer: object = None
    with anyio.move_on_after(authorize_timeout) as scope:
        try:
            answer = authorize(request)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as exc:
            return Deny(f"authorization failed: {str(exc) or type(exc).__name__}")
    if scope.cancelled_caught:
        return Deny(f"authorization did not answer within {authorize_timeout:g} s")
    if isinstance(answer, Allow) and answer.arguments is not None:
        # Edited arguments are a decision on a paused turn, checked against the schema again before
        # anything runs; an authorizer answers for the call as the model wrote it (fail closed).
        return Deny("authorization gave edited arguments; an authorizer allows or denies the call as written")
    if isinstance(answer, Allow | Deny | Cancel | Defer):
        return answer
    return Deny(f"authorization gave no valid answer (got {type(answer).__name__})")
