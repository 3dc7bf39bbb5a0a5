"""What a client checks before a request is sent: that it can fit the model's context window, and
that the open budgets hold its worst case (`imp.runtime.budget`); and how the reservation settles.

A request that cannot fit the window is refused with `imp.ContextWindowExceeded` before anything is
sent: when even a lower bound of its tokens passes the window, or, near the window, when the
client's exact count does (only clients that count exactly are asked: a round trip for the few
requests near the limit, none for the rest). Anything else is sent, and the provider's own refusal
is classified as it always was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, cast

from imp.errors import (
    ConnectionFailed,
    ContentFiltered,
    ContextWindowExceeded,
    InvalidResponse,
    LMError,
    MediaRefused,
    StreamBroken,
)
from imp.models._catalog import card_for
from imp.models._prices import Prices
from imp.models._tokens import tokens_at_least, tokens_at_most
from imp.records import Message
from imp.runtime.budget import Reservation, release, reserve, settle

if TYPE_CHECKING:
    from imp.models._options import Options
    from imp.models.base import LM, LMResponse

__all__ = [
    "DEFAULT_OUTPUT",
    "check_window",
    "per_token",
    "prepare",
    "prices_of",
    "reserve_for",
    "settle_failure",
    "settle_response",
]

DEFAULT_OUTPUT = 4096
"""The `max_tokens` a request is sent with under a token or dollar budget when it gives none (or
the budget's room, when less): a budget cannot hold an unbounded reply."""


def per_token(prices: Prices | None) -> tuple[float | None, float | None]:
    """Dollars per input token at worst (a cache write costs more than a plain read) and per output token."""
    if prices is None:
        return None, None
    write = prices.cache_write if prices.cache_write is not None else prices.input * 1.25
    return max(prices.input, write) / 1_000_000, prices.output / 1_000_000


def prices_of(lm: LM) -> Prices | None:
    """The client's own prices, else the built-in table's for its model (on its own service)."""
    own: Prices | None = getattr(lm, "prices", None)
    if own is not None:
        return own
    if not getattr(lm, "own_service", False):
        return None
    card = card_for(lm.provider, lm.model)
    return None if card is None else card.prices


def reserve_for(
    lm: LM, messages: Sequence[Message], options: Mapping[str, object], *, default_output: int | None
) -> tuple[Reservation | None, int | None]:
    """Reserve a request's worst case in the open budgets; returns the reservation and the
    `max_tokens` to send when the request gave none and the budget chose one.

    `default_output` is the `max_tokens` the provider is sent when a request gives none (Anthropic's
    4,096): a request without one gets the room the budgets leave up to it, as any other does, never
    a refusal for a reply size nobody asked for."""
    given = options.get("max_tokens")
    output = given if isinstance(given, int) else None
    usd_in, usd_out = per_token(prices_of(lm))
    reservation = reserve(
        f"{lm.provider}:{lm.model}",
        input_tokens=tokens_at_most(messages, options),
        output_tokens=output,
        usd_in=usd_in,
        usd_out=usd_out,
        default_output=min(DEFAULT_OUTPUT, default_output or DEFAULT_OUTPUT),
    )
    if reservation is None or output is not None:
        return reservation, None
    return reservation, reservation.output_tokens


async def check_window(lm: LM, window: int, messages: Sequence[Message], options: Mapping[str, object]) -> None:
    """Refuse, before sending, a request that cannot fit `window` tokens with its `max_tokens`."""
    given = options.get("max_tokens")
    output = given if isinstance(given, int) else 0
    if tokens_at_most(messages, options) + output <= window:
        return  # fits even at one token per byte: the common case, no counting
    least = tokens_at_least(messages, options)
    if least + output > window:
        raise _too_long(lm, window, least, output, "at least")
    if getattr(lm, "counts_exactly", False):
        counted = await lm.count_tokens(messages, **options)  # type: ignore[arg-type]
        if counted.exact and counted.input_tokens + output > window:
            raise _too_long(lm, window, counted.input_tokens, output, "")


def _too_long(lm: LM, window: int, tokens: int, output: int, how: str) -> ContextWindowExceeded:
    asked = f" with max_tokens={output:,}" if output else ""
    counted = f"{how} {tokens:,}".strip()
    return ContextWindowExceeded(
        f"the request holds {counted} input tokens{asked}, over {lm.provider}:{lm.model}'s context window of "
        f"{window:,} tokens; it was not sent",
        provider=lm.provider,
        code="context_length_exceeded",
    )


def settle_failure(reservation: Reservation | None, error: BaseException) -> None:
    """Settle a request that failed: a refusal the provider answered with an error status (or one
    made before sending: a medium the provider cannot take, say) was not billed and is given back;
    anything that may have generated tokens (a broken stream, a timeout while the reply was being
    written, a cancellation) keeps its worst case as spent."""
    if reservation is None:
        return
    if isinstance(error, MediaRefused) or (isinstance(error, LMError) and not _maybe_billed(error)):
        release(reservation)
    else:
        settle(reservation, None)


def _maybe_billed(error: LMError) -> bool:
    if isinstance(error, StreamBroken | InvalidResponse | ContentFiltered):  # a filtered reply is billed
        return True
    return isinstance(error, ConnectionFailed) and error.code == "timeout_error"


async def prepare(
    lm: LM, messages: Sequence[Message], options: Options, *, default_output: int | None
) -> tuple[Options, Reservation | None]:
    """Check the window, then reserve in the open budgets; the options to send (with the `max_tokens`
    a budget chose, when the request gave none) and the reservation to settle."""
    window = lm.context_window
    if window is not None:
        shown = (
            options if "max_tokens" in options or default_output is None else {**options, "max_tokens": default_output}
        )
        await check_window(lm, window, messages, shown)
    reservation, chosen = reserve_for(lm, messages, options, default_output=default_output)
    if chosen is not None:
        options = cast("Options", {**options, "max_tokens": chosen})
    return options, reservation


def settle_response(reservation: Reservation | None, response: LMResponse) -> None:
    """Settle a request with the usage its response reported (a reply from imp's cache cost nothing)."""
    if reservation is None:
        return
    if response.cache_hit:
        release(reservation)
    else:
        settle(reservation, response.usage)
