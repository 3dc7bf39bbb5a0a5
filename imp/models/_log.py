"""The LM layer's log lines (structlog, logger `imp`), redacted before they are written."""

from __future__ import annotations

from imp._redact import redact_text
from imp.errors import LMError
from imp.runtime.events import ModelRetry
from imp.runtime.logging import get_logger
from imp.runtime.run import current_run, emit

__all__ = ["log_cache_failure", "log_retry", "log_step_down"]


def _call_id() -> str | None:
    """The id of the `imp.call` this request belongs to (None outside one), to tie a line to its call."""
    run = current_run()
    return run.call_id if run is not None else None


def log_retry(model_key: str, attempt: int, error: LMError, wait: float) -> None:
    """One line per retried attempt: which model, which attempt failed, why, and the wait; also a
    `model_retry` event on the current run, so a trace marks the retry on its LM request."""
    emit(ModelRetry(model_key, attempt, error.status, type(error).__name__, redact_text(error.message), round(wait, 3)))
    get_logger().warning(
        "lm_retry",
        call_id=_call_id(),
        model=model_key,
        attempt=attempt,
        status=error.status,
        code=error.code,
        kind=type(error).__name__,
        error=redact_text(error.message),
        wait=round(wait, 3),
    )


def log_step_down(model_key: str, option: str, sent: str, now: str, error: LMError) -> None:
    """One line when a server refused an option and this LM stops sending it (or sends less): which
    option, what was sent, and what is sent from now on (a step-down's fields, not the step itself, so
    this module stays below the step-down rules)."""
    get_logger().warning(
        "lm_step_down",
        call_id=_call_id(),
        model=model_key,
        option=option,
        sent=sent,
        now=now,
        status=error.status,
        error=redact_text(error.message),
    )


def log_cache_failure(operation: str, exc: BaseException) -> None:
    """A cache that failed to read or write: logged, never raised into the call."""
    get_logger().warning("lm_cache_failed", operation=operation, error=redact_text(f"{type(exc).__name__}: {exc}"))
