"""`imp.fallback(lm_a, lm_b, ...)`: an LM of LMs that moves to the next when one provider fails, and
`imp.round_robin(...)`: the same over equivalent LMs (several keys or deployments), each request
starting at the next.

It moves on only for the errors that say "this provider, not this request" (rate limited past the
time the member may wait, quota, unavailable, no connection, a refused key, a reply that is no
completion), never for a bad request or a content filter: the next provider would refuse those too,
and moving on would hide the request's own fault. A member never sits out a wait (a Retry-After, a
backoff) longer than `max_wait` before the chain moves on, and a member that failed is passed over
for its cool-down (or its Retry-After, if longer), unless every member is cooling down. A stream
falls back only before its first delta: after that the caller has seen part of one member's reply.

What pydantic-ai's `FallbackModel` users ran into is what this one is tested for: a connection that
failed and did not fall back, a 200 whose body was no completion and did not fall back, an
"unavailable, high demand" 503 that should have, and a chain whose members all failed raising a group
that `except RateLimited` did not catch (here the last failure is raised by its own class, the earlier
ones as its notes).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import aclosing
from typing import Any, Unpack

from imp.errors import (
    AuthenticationError,
    ConnectionFailed,
    InvalidResponse,
    LMError,
    ProviderUnavailable,
    QuotaExceeded,
    RateLimited,
    ResponseTooLarge,
    StreamBroken,
)
from imp.models._guard import prices_of
from imp.models._options import Options
from imp.models._tokens import TokenCount
from imp.models.base import LM, LMCapabilities, LMResponse, Message, StreamEvent
from imp.models.retry import longest_wait
from imp.runtime.budget import limits_usd

__all__ = ["MOVES_ON", "FallbackLM", "fallback", "round_robin"]

MOVES_ON: tuple[type[LMError], ...] = (
    RateLimited,
    QuotaExceeded,
    ProviderUnavailable,
    ConnectionFailed,
    AuthenticationError,
    StreamBroken,
    InvalidResponse,
)
"""The failures that move a chain to its next member (a `ResponseTooLarge` does not: the reply, not the
provider, was too long). Never a `BadRequest` (a wrong request, a full context window, a refused
option, an unknown model) nor a `ContentFiltered`."""

_RANK = {"none": 0, "json_object": 1, "json_schema": 2}


class FallbackLM(LM):
    """An LM that sends each request to its members in turn until one answers (`imp.fallback`)."""

    provider = "fallback"

    def __init__(
        self,
        *lms: LM,
        moves_on: Sequence[type[BaseException]] = MOVES_ON,
        max_wait: float = 1.0,
        cooldown: float = 30.0,
        rotate: bool = False,
    ) -> None:
        if len(lms) < 2:
            raise ValueError(f"a fallback chain takes two LMs or more, got {len(lms)}")
        for index, member in enumerate(lms):
            if not isinstance(member, LM):
                raise TypeError(f"a fallback chain's members are LMs (imp.lm(...)); member {index} is {member!r}")
        moves = tuple(moves_on)
        if not moves or not all(isinstance(k, type) and issubclass(k, BaseException) for k in moves):
            raise TypeError(f"moves_on is a sequence of exception classes (imp.RateLimited, ...), got {moves_on!r}")
        for name, value in (("max_wait", max_wait), ("cooldown", cooldown)):
            if not isinstance(value, int | float) or isinstance(value, bool) or value < 0:
                raise ValueError(f"{name} is seconds (a number >= 0), got {value!r}")
        self.lms = tuple(lms)
        self.moves_on = moves
        self.max_wait = float(max_wait)
        self.cooldown = float(cooldown)
        self.rotate = rotate
        self.model = "|".join(f"{m.provider}:{m.model}" for m in lms)
        self.capabilities = _shared(lms)
        self._until = [0.0] * len(lms)
        """Per member, the `time.monotonic()` before which it is passed over."""
        self._turn = 0
        """How many requests a rotating chain has started (the next one starts at member `_turn % len`)."""

    # -- which member, in what order ---------------------------------------------------------

    def order(self, *, turn: bool = True) -> list[int]:
        """The members to try, in order: the chain's (or, rotating, from the next one in turn), those
        cooling down after the rest, soonest back first. `turn=False` only looks (a token count is no
        request, and does not move a rotating chain on)."""
        count = len(self.lms)
        start = self._turn % count if self.rotate else 0
        if self.rotate and turn:
            self._turn += 1
        ranked = [(start + i) % count for i in range(count)]
        now = time.monotonic()
        ready = [i for i in ranked if self._until[i] <= now]
        cooling = sorted((i for i in ranked if self._until[i] > now), key=lambda i: self._until[i])
        return ready + cooling

    def _failed(self, index: int, error: BaseException) -> None:
        wait = error.retry_after if isinstance(error, LMError) and error.retry_after is not None else 0.0
        self._until[index] = time.monotonic() + max(self.cooldown, wait)

    def _moves_on(self, error: BaseException) -> bool:
        return isinstance(error, self.moves_on) and not isinstance(error, ResponseTooLarge)

    def _check_prices(self) -> None:
        """A dollar budget needs every member's price before the first request is sent."""
        if not limits_usd():
            return
        for member in self.lms:
            if not isinstance(member, FallbackLM) and prices_of(member) is None:
                raise ValueError(
                    f"a USD budget needs the price of {member.provider}:{member.model}, which imp's price table "
                    "does not hold: pass prices=imp.models.Prices(input=..., output=...) to that client"
                )

    # -- requests --------------------------------------------------------------------------

    async def request(self, messages: Sequence[Message], **options: Unpack[Options]) -> LMResponse:
        """Send to the first member that answers; raise the last failure (earlier ones as its notes)."""
        self._check_prices()
        failures: list[tuple[LM, BaseException]] = []
        for index in self.order():
            member = self.lms[index]
            try:
                with longest_wait(self.max_wait):
                    response = await member.request(messages, **options)
            except Exception as error:  # what `moves_on` names: LMErrors by default, any class if given
                if not self._moves_on(error):
                    raise
                self._failed(index, error)
                failures.append((member, error))
                continue
            self._until[index] = 0.0
            return dataclasses.replace(response, answered_by=f"{member.provider}:{member.model}")
        raise _exhausted(failures)

    async def stream(self, messages: Sequence[Message], **options: Unpack[Options]) -> AsyncIterator[StreamEvent]:
        """Stream from the first member whose stream starts; once a delta has arrived, a failure is the
        caller's (another member would start the reply over)."""
        self._check_prices()
        failures: list[tuple[LM, BaseException]] = []
        for index in self.order():
            member = self.lms[index]
            key = f"{member.provider}:{member.model}"
            async with aclosing(_closable(member.stream(messages, **options))) as events:
                try:
                    with longest_wait(self.max_wait):
                        first = await anext(events, None)
                    if first is None:
                        raise StreamBroken(f"{key}'s stream ended before it began", provider=member.provider)
                except Exception as error:  # what `moves_on` names: LMErrors by default, any class if given
                    if not self._moves_on(error):
                        raise
                    self._failed(index, error)
                    failures.append((member, error))
                    continue
                self._until[index] = 0.0
                yield _marked(first, key)
                async for event in events:
                    yield _marked(event, key)
                return
        raise _exhausted(failures)

    async def count_tokens(self, messages: Sequence[Message], **options: Unpack[Options]) -> TokenCount:
        """The count of the member a request would go to first."""
        return await self.lms[self.order(turn=False)[0]].count_tokens(messages, **options)

    async def aclose(self) -> None:
        """Close every member."""
        for member in self.lms:
            await member.aclose()

    def __repr__(self) -> str:
        kind = "round_robin" if self.rotate else "fallback"
        return f"imp.{kind}({', '.join(repr(m) for m in self.lms)})"


async def _closable(events: AsyncIterator[StreamEvent]) -> AsyncGenerator[StreamEvent]:
    """A member's stream as a generator `aclosing` closes (closing the member's own stream with it)."""
    try:
        async for event in events:
            yield event
    finally:
        close = getattr(events, "aclose", None)
        if close is not None:
            await close()


def _marked(event: StreamEvent, key: str) -> StreamEvent:
    if event.kind == "final" and event.response is not None:
        return dataclasses.replace(event, response=dataclasses.replace(event.response, answered_by=key))
    return event


def _exhausted(failures: list[tuple[LM, BaseException]]) -> BaseException:
    """Every member failed: the last failure, keeping its kind, with each earlier one as a note."""
    *earlier, (_, last) = failures
    for member, error in earlier:
        last.add_note(f"imp.fallback: {member.provider}:{member.model} failed first: {type(error).__name__}: {error}")
    last.add_note(f"imp.fallback: every member of the chain failed ({len(failures)})")
    return last


def _shared(lms: Sequence[LM]) -> LMCapabilities:
    """What every member can take: a request the chain sends must suit whichever member answers it."""
    caps = [m.capabilities for m in lms]
    media: frozenset[Any] | None = None
    if all(c.media is not None for c in caps):
        media = frozenset.intersection(*(frozenset(c.media or ()) for c in caps))
    return LMCapabilities(
        tool_calling=all(c.tool_calling for c in caps),
        named_tool_choice=all(c.named_tool_choice for c in caps),
        response_format=min((c.response_format for c in caps), key=lambda f: _RANK[f]),
        streaming=any(c.streaming for c in caps),
        stream_tool_calls=all(c.stream_tool_calls for c in caps),
        media=media,
    )


def fallback(
    *lms: LM,
    moves_on: Sequence[type[BaseException]] = MOVES_ON,
    max_wait: float = 1.0,
    cooldown: float = 30.0,
) -> FallbackLM:
    """An LM that sends each request to `lms` in order until one answers.

    It moves to the next member on the errors in `moves_on` (by default the provider's failures, never
    a bad request or a content filter); a member never waits longer than `max_wait` seconds for a
    retry (a Retry-After past it moves on at once); a member that failed is passed over for
    `cooldown` seconds (or its Retry-After, if longer). Usage is recorded per member, and the member
    that answered is `prediction.metadata.model`.
    """
    return FallbackLM(*lms, moves_on=moves_on, max_wait=max_wait, cooldown=cooldown)


def round_robin(
    *lms: LM,
    moves_on: Sequence[type[BaseException]] = MOVES_ON,
    max_wait: float = 1.0,
    cooldown: float = 30.0,
) -> FallbackLM:
    """`fallback` over equivalent LMs (several keys, several deployments): each request starts at
    the next member in turn, and moves on as a fallback does."""
    return FallbackLM(*lms, moves_on=moves_on, max_wait=max_wait, cooldown=cooldown, rotate=True)
