"""A journaled run that paused awaiting approval: its pending turn kept beside it, resumed by its run id.

A journaled call that ends with `prediction.metadata.pending` leaves a *pause* in the journal: the
pending turn's data, redacted as every record is, numbered in the run (pause 0 is the call with the
inputs; pause n the one the n-th resume ended with). `imp.call(program, run_id=..., journal=...,
decisions={...})` resumes the newest pause as the run's *segment* n + 1, whose steps are keyed under
`resume-<n+1>/`, so the paused run's own steps stay as they were and a crash in the resumed part
replays it like any run.

A pause is *claimed* by the first decisions that resume it: the journal keeps a digest of the calls
decided and of the decisions. The same decisions again (a retried request, a process restarted
after a crash) replay that segment: nothing recorded runs twice. Other decisions for a pause already
resumed are refused, since the first ones may have run tools already.

The pending data read back from a journal is hostile input: bounded in size, read as JSON, checked
by `imp.Pending.load` (no code, tools by name, at most 1,024 calls); a call whose arguments the
journal kept redacted is never run with the redacted text (`Allow()` for it is refused).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from imp._redact import REDACTED, redact
from imp.durable._records import value_digest
from imp.errors import JournalError, JournalMismatch, ResumeError
from imp.prediction import Prediction
from imp.programs.pending import Pending
from imp.tools import Allow

__all__ = [
    "MAX_PAUSE_BYTES",
    "Body",
    "Pause",
    "check_resume",
    "choose",
    "claim_digest",
    "pause_of",
    "read_pause",
    "segment_path",
    "start_inputs",
    "to_resume",
]

MAX_PAUSE_BYTES = 16 * 1024 * 1024
"""A kept pending turn larger than this is refused on reading (a journal may be written by anyone)."""

Body = Callable[[Pending], Awaitable[Any]]
"""The resumed call: the program resumed from this pending turn, with the decisions given."""


@dataclass(frozen=True, slots=True)
class Pause:
    """One pause of a run: its number, the pending turn kept (redacted JSON data), and the digest of
    the decisions that resumed it (None while it waits)."""

    n: int
    data: Mapping[str, Any]
    claim: str | None

    @property
    def digest(self) -> str:
        return value_digest(self.data)


def segment_path(segment: int) -> str:
    """The scope path of a run's segment: "" for the call with its inputs, `resume-<n>` for the n-th resume."""
    return "" if segment == 0 else f"resume-{segment}"


def pause_of(result: object) -> dict[str, Any] | None:
    """The pause a run's result leaves, as the journal keeps it (the pending turn's dump, redacted), or None."""
    if not isinstance(result, Prediction) or result.metadata.pending is None:
        return None
    kept: dict[str, Any] = json.loads(json.dumps(redact(result.metadata.pending.dump()), ensure_ascii=False))
    return kept


def read_pause(text: object, run_id: str, n: int) -> dict[str, Any]:
    """A kept pending turn's text read back as data (bounded, JSON, a mapping); checked again by `Pending.load`."""
    if not isinstance(text, str) or len(text) > MAX_PAUSE_BYTES:
        raise JournalError(
            f"run {run_id!r}, pause {n}: the pending turn is not JSON text under {MAX_PAUSE_BYTES} bytes"
        )
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise JournalError(f"run {run_id!r}, pause {n}: the pending turn does not read as JSON ({exc})") from None
    if not isinstance(data, dict):
        raise JournalError(f"run {run_id!r}, pause {n}: the pending turn is a mapping")
    return data


def load_pending(data: Mapping[str, Any], run_id: str, n: int) -> Pending:
    """The kept data as an `imp.Pending` (every value checked by type); a JournalError when it does not read."""
    try:
        return Pending.load(data)
    except (ValueError, RecursionError) as exc:
        raise JournalError(f"run {run_id!r}, pause {n}: the pending turn does not read: {exc}") from None


def check_resume(given: object, decisions: object) -> Pending | None:
    """The pending turn given (`resume=`), or None; the decisions a mapping (checked fully by the program)."""
    if given is not None and not isinstance(given, Pending):
        raise TypeError(
            f"resume= takes an imp.Pending (imp.Pending.load(data) reads a dump), got {type(given).__name__}"
        )
    if not isinstance(decisions, Mapping):
        raise ResumeError(
            "decisions are a mapping of call id -> imp.Allow() | imp.Deny(reason) | imp.ToolResult(...); "
            f"got {type(decisions).__name__}"
        )
    return given


def kept(pending: Pending) -> dict[str, Any]:
    """A pending turn as a journal keeps it (for comparing one given with `resume=` to a pause)."""
    data: dict[str, Any] = json.loads(json.dumps(redact(pending.dump()), ensure_ascii=False))
    return data


def claim_digest(data: Mapping[str, Any], decisions: Mapping[str, Any]) -> str:
    """The digest a pause is claimed by: the calls it holds and the decisions about them."""
    decided = {str(k): [type(v).__name__, v] for k, v in decisions.items()}
    return value_digest({"calls": data.get("calls"), "decisions": decided})


def start_inputs(given: Pending, decisions: Mapping[str, Any]) -> dict[str, str]:
    """What a run started by `resume=` under a new run id records as its inputs (their digests)."""
    return {"resume": value_digest(kept(given)), "decisions": claim_digest(kept(given), decisions)}


def choose(
    run_id: str, status: str, pauses: Sequence[Pause], given: Pending | None, decisions: Mapping[str, Any]
) -> tuple[Pause, bool]:
    """The pause these decisions resume, and whether they claim it now (True) or replay the segment
    they claimed before (False). A ResumeError when the run is not paused; a JournalMismatch when
    the pause was resumed with other decisions, or `given` is not the run's pending turn."""
    given_digest = None if given is None else value_digest(kept(given))
    for pause in reversed(pauses):
        same = pause.claim is not None and pause.claim == claim_digest(pause.data, decisions)
        if same and given_digest in (None, pause.digest):
            return pause, False
    if not pauses:
        hint = (
            " (a process stopped before it recorded the pause: call the run with its inputs again, which "
            "replays it to the pause)"
            if status in ("running", "failed")
            else ""
        )
        raise ResumeError(
            f"run {run_id!r} is not paused awaiting approval (it is {status}){hint}; "
            "decisions= resume a run whose prediction.metadata.pending was set"
        )
    newest = pauses[-1]
    if newest.claim is not None:
        raise JournalMismatch(
            f"run {run_id!r} was resumed from its pause {newest.n} with other decisions, which may have run "
            "tools already; a pause resumes once (the same decisions again replay it). Start a new run id "
            "for other decisions",
            run_id=run_id,
            step=segment_path(newest.n + 1),
        )
    if given_digest is not None and given_digest != newest.digest:
        raise JournalMismatch(
            f"the pending turn given with resume= is not the one run {run_id!r} waits with (pause {newest.n}); "
            f"leave resume= out to resume the run's own (journal.pending({run_id!r}) shows it)",
            run_id=run_id,
            step=segment_path(newest.n + 1),
        )
    return newest, True


def to_resume(pause: Pause, given: Pending | None, decisions: Mapping[str, Any], run_id: str, claim: bool) -> Pending:
    """The pending turn the resumed call runs from: the one given (checked to be the run's), else the
    journal's. A replay takes a fresh copy (the journal, not the value, keeps a pause from running twice)."""
    if given is not None:
        return given if claim else Pending.load(given.dump())
    pending = load_pending(pause.data, run_id, pause.n)
    for call in pending.calls:
        decision = decisions.get(call.id)
        if isinstance(decision, Allow) and decision.arguments is None and REDACTED in json.dumps(call.arguments):
            raise ResumeError(
                f"call {call.id!r}'s arguments held a credential, which the journal keeps redacted; approve it with "
                "imp.Allow(arguments={...}) giving them, or resume with resume= the pending turn the run returned"
            )
    return pending
