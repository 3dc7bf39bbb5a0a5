"""Tool policy: which tools the model may call, decided before arguments are checked."""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Collection, Sequence
from typing import Literal

from imp.history import ToolCall

__all__ = ["PolicyFunction", "ToolPolicy", "check_policy"]

type PolicyFunction = Callable[[ToolCall], bool | str | Awaitable[bool | str]]
"""A policy as a function of the call: True allows, False refuses, a string refuses with that
reason. It may be async."""

type ToolPolicy = Literal["allow"] | str | Sequence[str] | PolicyFunction
"""`"allow"` (every tool), one tool name, a list of names, or a `PolicyFunction`.

`submit` is subject to the policy like any tool, so a list policy must name it for a turn
to end through it.
"""

_DEFAULT_REASON = "the tool policy does not permit it"


async def check_policy(policy: ToolPolicy, call: ToolCall) -> str | None:
    """None when the policy allows the call, else the refusal sentence the model reads.

    A policy function that raises, or answers anything but a bool or a string, refuses.
    """
    name = call.name
    if isinstance(policy, str):
        if policy == "allow" or policy == name:
            return None
        return _refusal(name, _DEFAULT_REASON)
    if callable(policy):
        try:
            answer: object = policy(call)
            if inspect.isawaitable(answer):
                answer = await answer
        except Exception as exc:
            return _refusal(name, f"the tool policy failed: {_text(exc)}")
        if answer is True:
            return None
        if answer is False:
            return _refusal(name, _DEFAULT_REASON)
        if isinstance(answer, str):
            return _refusal(name, answer.strip() or _DEFAULT_REASON)
        return _refusal(name, f"the tool policy gave no valid answer (got {type(answer).__name__})")
    if isinstance(policy, Sequence):
        if any(str(allowed) == name for allowed in policy):
            return None
        return _refusal(name, _DEFAULT_REASON)
    raise TypeError(f"a tool policy is 'allow', a tool name, a list of names or a function, got {policy!r}")


def validate_policy(policy: object, tools: Collection[str] | None = None) -> None:
    """Raise for a value that is not a tool policy, or that names a tool not among `tools` (when given).

    A name the program does not hold is a typo that would refuse every call of the tool meant.
    """
    if callable(policy) and not isinstance(policy, str):
        return
    if isinstance(policy, str):
        listed: list[str] = [] if policy == "allow" else [policy]
    elif isinstance(policy, Sequence) and all(isinstance(n, str) for n in policy):
        listed = list(policy)
    else:
        raise TypeError(f"a tool policy is 'allow', a tool name, a list of names or a function, got {policy!r}")
    unknown = [name for name in listed if tools is not None and name not in tools]
    if unknown:
        raise ValueError(
            f"tool_policy names {unknown}, which the program does not hold; its tools are {sorted(tools or ())} "
            "(the policy lists the tools that may run, or is 'allow')"
        )


def _refusal(name: str, reason: str) -> str:
    return f"{name} was not allowed; {_sentence_end(reason)}"


def _sentence_end(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?")) else text + "."


def _text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__
