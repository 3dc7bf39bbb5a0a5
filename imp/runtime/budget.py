"""`imp.Budget`: limits a run cannot pass, kept by reserving each request's worst case before it is
sent and settling it with the reported usage after.

A budget is an account: requests, input and output tokens, dollars and tool calls spent (settled)
and held for requests in flight (reserved). Before a request, imp's clients reserve its worst case
(the input tokens bounded from above, plus `max_tokens`, at the model's price); the reservation
either fits what the limits leave after everything settled and everything still in flight, or the
request is not sent (`BudgetExceeded`). After the reply the reservation is settled to what the
provider reported. So concurrent requests of one run can never together pass a limit: every
request in flight holds its worst case until it knows better.

Budgets open on a context variable (`budget_scope`), so a nested call shares its parent's budget,
and a budget given inside another applies with it: a request must fit both.

The budget check is one context-variable read when no budget is open (`benchmarks/overhead.py`).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Literal

from imp._frozen import fast_init
from imp.errors import ImpError
from imp.records import Usage

__all__ = [
    "Budget",
    "BudgetExceeded",
    "Limit",
    "Reservation",
    "Spend",
    "budget_open",
    "budget_scope",
    "charge",
    "limits_usd",
    "open_budgets",
    "release",
    "reserve",
    "reserve_tool_calls",
    "settle",
]

Limit = Literal["requests", "input_tokens", "output_tokens", "total_tokens", "usd", "tool_calls"]
"""The limits a budget can set, by their `imp.Budget` keyword."""

LIMITS: tuple[Limit, ...] = ("requests", "input_tokens", "output_tokens", "total_tokens", "usd", "tool_calls")

_LOCK = threading.Lock()
"""One lock for every budget: reserving is a few comparisons, and a request may reserve in several
budgets at once (nested ones), which one lock keeps all-or-nothing without an order to agree on."""


NANO = 1_000_000_000
"""Dollars are kept as whole nanodollars: sums of floats drift, and a limit must hold exactly."""


def nanodollars(usd: float, *, up: bool) -> int:
    """`usd` in whole nanodollars, rounded up (a cost) or down (a limit): never in the spender's favour."""
    scaled = usd * NANO
    return math.ceil(scaled - 1e-6) if up else math.floor(scaled + 1e-6)


@fast_init
@dataclass(frozen=True, slots=True)
class Spend:
    """An amount against a budget: requests, tokens, dollars (as nanodollars) and tool calls."""

    requests: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    nano_usd: int = 0
    tool_calls: int = 0

    @property
    def total_tokens(self) -> int:
        """Input plus output tokens."""
        return self.input_tokens + self.output_tokens

    @property
    def usd(self) -> float:
        """The dollars, as a float."""
        return self.nano_usd / NANO

    def value(self, limit: Limit) -> int:
        """The amount this spend holds of `limit` (dollars in nanodollars)."""
        if limit == "total_tokens":
            return self.total_tokens
        if limit == "usd":
            return self.nano_usd
        return int(getattr(self, limit))

    def __add__(self, other: Spend) -> Spend:
        return Spend(
            self.requests + other.requests,
            self.input_tokens + other.input_tokens,
            self.output_tokens + other.output_tokens,
            self.nano_usd + other.nano_usd,
            self.tool_calls + other.tool_calls,
        )

    def __sub__(self, other: Spend) -> Spend:
        return Spend(
            self.requests - other.requests,
            self.input_tokens - other.input_tokens,
            self.output_tokens - other.output_tokens,
            self.nano_usd - other.nano_usd,
            self.tool_calls - other.tool_calls,
        )


_NOTHING = Spend()


class BudgetExceeded(ImpError):
    """A request (or a tool call) that would pass a budget's limit was not sent.

    `limit` names the limit (`"usd"`, `"total_tokens"`, ...), `spent` is what had settled and
    `reserved` what requests in flight held when it was refused, `needed` what this one would have
    taken at most; `usage` is the settled spend as an `imp.Usage`. A `react` turn sets `history`
    to the steps it recorded before the refusal, as it does for an error that ends the turn, and an
    `imp.evaluate` sets `report` to the report of the rows that finished.
    """

    def __init__(
        self,
        message: str,
        *,
        limit: Limit,
        budget: Budget,
        spent: Spend,
        reserved: Spend,
        needed: Spend,
        model: str | None = None,
    ) -> None:
        self.limit: Limit = limit
        self.budget = budget
        self.spent = spent
        self.reserved = reserved
        self.needed = needed
        self.model = model
        self.history: Any = None
        """The `imp.History` recorded so far, when the refusal ended a ReAct turn (set by the loop)."""
        self.report: Any = None
        """The `imp.EvaluationReport` of the rows that finished, when the refusal stopped an `imp.evaluate`."""
        super().__init__(message)

    @property
    def usage(self) -> Usage:
        """The settled spend when the request was refused, as token usage (`cost` in dollars)."""
        spent = self.spent
        return Usage(spent.input_tokens, spent.output_tokens, cost=spent.usd, requests=spent.requests)


class Budget:
    """Limits a run cannot pass: `imp.call(program, inputs, budget=imp.Budget(usd=0.50))`.

    Every limit is optional; a budget with none only counts. A budget is an account, not a
    setting: the same `Budget` given to two calls is spent by both (one per run, or one for a whole
    service's hour). `spent` is what settled, `reserved` what requests in flight hold now.
    """

    __slots__ = (
        "_reserved",
        "_spent",
        "input_tokens",
        "output_tokens",
        "requests",
        "tool_calls",
        "total_tokens",
        "usd",
    )

    def __init__(
        self,
        *,
        requests: int | None = None,
        input_tokens: int | None = None,
        output_tokens: int | None = None,
        total_tokens: int | None = None,
        usd: float | None = None,
        tool_calls: int | None = None,
    ) -> None:
        for name, value in (
            ("requests", requests),
            ("input_tokens", input_tokens),
            ("output_tokens", output_tokens),
            ("total_tokens", total_tokens),
            ("tool_calls", tool_calls),
        ):
            if value is not None and (not isinstance(value, int) or isinstance(value, bool) or value < 0):
                raise ValueError(f"imp.Budget({name}=...) is a whole number >= 0 (or None: no limit), got {value!r}")
        if usd is not None and (
            not isinstance(usd, int | float) or isinstance(usd, bool) or not math.isfinite(usd) or usd < 0
        ):
            raise ValueError(f"imp.Budget(usd=...) is dollars, a number >= 0 (or None: no limit), got {usd!r}")
        self.requests = requests
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.total_tokens = total_tokens
        self.usd = None if usd is None else float(usd)
        self.tool_calls = tool_calls
        self._spent = _NOTHING
        self._reserved = _NOTHING

    @property
    def spent(self) -> Spend:
        """What settled: the reported usage of every finished request, and the tool calls run."""
        return self._spent

    @property
    def reserved(self) -> Spend:
        """What the requests in flight hold now (their worst case, until they settle)."""
        return self._reserved

    def limit(self, name: Limit) -> int | None:
        """The limit set for `name` (dollars in nanodollars, rounded down), or None."""
        value = getattr(self, name)
        if value is None:
            return None
        return nanodollars(value, up=False) if name == "usd" else int(value)

    def remaining(self, name: Limit) -> float | None:
        """What `name`'s limit leaves after the settled spend and the reservations in flight (dollars for
        `usd`; None: no limit)."""
        with _LOCK:
            limit = self.limit(name)
            if limit is None:
                return None
            left = limit - (self._spent + self._reserved).value(name)
            return left / NANO if name == "usd" else float(left)

    def _refused(self, wanted: Spend) -> Limit | None:
        """The first limit `wanted` would pass, with what settled and what is in flight (lock held)."""
        held = self._spent + self._reserved
        for name in LIMITS:
            limit = self.limit(name)
            if limit is not None and wanted.value(name) > 0 and held.value(name) + wanted.value(name) > limit:
                return name
        return None

    def _output_room(self, input_tokens: int, usd_in: float | None, usd_out: float | None) -> float:
        """How many output tokens this budget leaves for a request of `input_tokens` (lock held)."""
        held = self._spent + self._reserved
        room = math.inf
        if self.output_tokens is not None:
            room = min(room, self.output_tokens - held.output_tokens)
        if self.total_tokens is not None:
            room = min(room, self.total_tokens - held.total_tokens - input_tokens)
        limit = self.limit("usd")
        if limit is not None and usd_in is not None and usd_out is not None:
            left = limit - held.nano_usd - nanodollars(input_tokens * usd_in, up=True)
            # one token fewer than the float division says, so the rounded-up cost below still fits
            room = min(room, math.inf if usd_out == 0 else math.floor(left / (usd_out * NANO)) - 1)
        return room

    def __repr__(self) -> str:
        limits = ", ".join(f"{name}={getattr(self, name)!r}" for name in LIMITS if getattr(self, name) is not None)
        return f"imp.Budget({limits})"


open_budgets: ContextVar[tuple[Budget, ...]] = ContextVar("imp_budgets", default=())
"""The budgets open in this context, outermost first (read directly where a function call would cost)."""


def budget_open() -> bool:
    """Whether any budget is open in this context (one context-variable read)."""
    return bool(open_budgets.get())


def limits_usd() -> bool:
    """Whether an open budget limits dollars (then a request needs its model's price)."""
    return any(b.usd is not None for b in open_budgets.get())


@contextmanager
def budget_scope(budget: Budget | None) -> Iterator[None]:
    """Open `budget` for the work inside (with any budget already open: a request must fit both)."""
    if budget is None:
        yield
        return
    if not isinstance(budget, Budget):
        raise TypeError(f"budget is an imp.Budget(...), got {type(budget).__name__}")
    chain = open_budgets.get()
    if budget in chain:  # the same account given again by a nested call: already in force
        yield
        return
    token = open_budgets.set((*chain, budget))
    try:
        yield
    finally:
        open_budgets.reset(token)


@dataclass(slots=True)
class Reservation:
    """What one request holds in every open budget until it settles."""

    budgets: tuple[Budget, ...]
    held: Spend
    output_tokens: int | None
    """The `max_tokens` the request is sent with (the budget's room, when it gave none)."""
    settled: bool = False


def _refusal(budget: Budget, limit: Limit, wanted: Spend, model: str | None, what: str) -> BudgetExceeded:
    spent, reserved = budget._spent, budget._reserved
    cap = budget.limit(limit)

    def shown(value: float) -> str:
        return f"${value / NANO:.6f}" if limit == "usd" else f"{value:,.0f}"

    return BudgetExceeded(
        f"{what} would pass the budget's {limit} limit of {shown(cap or 0.0)}: "
        f"{shown(spent.value(limit))} spent, {shown(reserved.value(limit))} held by requests in flight, "
        f"this one needs up to {shown(wanted.value(limit))}",
        limit=limit,
        budget=budget,
        spent=spent,
        reserved=reserved,
        needed=wanted,
        model=model,
    )


def reserve(
    model: str,
    *,
    input_tokens: int,
    output_tokens: int | None,
    usd_in: float | None,
    usd_out: float | None,
    default_output: int,
) -> Reservation | None:
    """Hold one request's worst case in every open budget, or raise `BudgetExceeded` holding nothing.

    `input_tokens` is an upper bound of the prompt's tokens; `output_tokens` the request's
    `max_tokens` (None: not given, and then the request is sent with the room the budgets leave, at
    most `default_output`); `usd_in` and `usd_out` dollars per token (None: no price known, refused
    under a dollar limit). Returns None when no budget is open.
    """
    chain = open_budgets.get()
    if not chain:
        return None
    priced = usd_in is not None and usd_out is not None
    if not priced and any(b.usd is not None for b in chain):
        raise ValueError(
            f"a USD budget needs the price of {model}, which imp's price table does not hold: "
            f"pass prices=imp.models.Prices(input=..., output=...) to the client, in dollars per million tokens"
        )
    with _LOCK:
        chosen = output_tokens
        if chosen is None:
            room = min(b._output_room(input_tokens, usd_in, usd_out) for b in chain)
            chosen = int(max(0, min(room, default_output))) if room != math.inf else None
            if chosen == 0:
                chosen = 1  # nothing left for output: the refusal below names the limit
        out = chosen or 0
        usd = (input_tokens * usd_in + out * usd_out) if usd_in is not None and usd_out is not None else 0.0
        wanted = Spend(1, input_tokens, out, nanodollars(usd, up=True))
        for budget in chain:
            limit = budget._refused(wanted)
            if limit is not None:
                raise _refusal(budget, limit, wanted, model, f"a request to {model}")
        for budget in chain:
            budget._reserved = budget._reserved + wanted
    return Reservation(chain, wanted, chosen)


def settle(reservation: Reservation | None, usage: Usage | None, *, reported: bool = False) -> None:
    """Replace a reservation with what the provider reported (`usage`), or keep it all as spent
    (`usage` None, or no tokens and not `reported`: the request may have been billed, and imp cannot
    see for what; a server that reports no usage reads as zero tokens)."""
    if reservation is None or reservation.settled:
        return
    held = reservation.held
    if usage is None or (usage.total_tokens == 0 and not reported):
        actual = held  # no usage reported: the worst case stands
    else:
        actual = Spend(1, usage.input_tokens, usage.output_tokens, nanodollars(usage.cost or 0.0, up=True))
    with _LOCK:
        reservation.settled = True
        for budget in reservation.budgets:
            budget._reserved = budget._reserved - held
            budget._spent = budget._spent + actual


def charge(usage: Usage) -> None:
    """Spend `usage` in every open budget after the fact: a request an LM of the user's own sent
    without reserving (it could not be refused before sending, but the next one can be)."""
    chain = open_budgets.get()
    if not chain or (usage.requests == 0 and usage.total_tokens == 0):
        return
    actual = Spend(1, usage.input_tokens, usage.output_tokens, nanodollars(usage.cost or 0.0, up=True))
    with _LOCK:
        for budget in chain:
            budget._spent = budget._spent + actual


def release(reservation: Reservation | None) -> None:
    """Give a reservation back unspent: the request was refused before anything was generated."""
    if reservation is None or reservation.settled:
        return
    with _LOCK:
        reservation.settled = True
        for budget in reservation.budgets:
            budget._reserved = budget._reserved - reservation.held


def reserve_tool_calls(count: int) -> None:
    """Spend `count` tool calls in every open budget, or raise `BudgetExceeded` spending none."""
    chain = open_budgets.get()
    if not chain or count <= 0:
        return
    wanted = Spend(tool_calls=count)
    with _LOCK:
        for budget in chain:
            if budget._refused(wanted) is not None:
                raise _refusal(budget, "tool_calls", wanted, None, f"{count} tool call{'s' if count > 1 else ''}")
        for budget in chain:
            budget._spent = budget._spent + wanted
