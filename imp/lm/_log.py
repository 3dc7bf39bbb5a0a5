"""The LM layer's log lines (structlog, logger `imp`), redacted before they are written."""

from __future__ import annotations

from typing import Any

from imp._redact import redact_text
from imp.errors import LMError

__all__ = ["log_cache_failure", "log_retry"]


def _logger() -> Any:
    from imp.runtime.logging import get_logger

    return get_logger()


def log_retry(model_key: str, attempt: int, error: LMError, wait: float) -> None:
    """One line per retried attempt: which model, which attempt failed, why, and the wait; also a
    `model_retry` event on the current run, so a trace marks the retry on its LM request."""
    from imp.runtime.run import emit

    emit(
        "model_retry",
        model=model_key,
        attempt=attempt,
        status=error.status,
        error_type=type(error).__name__,
        error=redact_text(error.message),
        wait=round(wait, 3),
    )
    _logger().warning(
        "lm_retry",
        model=model_key,
        attempt=attempt,
        status=error.status,
        code=error.code,
        error=redact_text(error.message),
        wait=round(wait, 3),
    )


def log_cache_failure(operation: str, exc: BaseException) -> None:
    """A cache that failed to read or write: logged, never raised into the call."""
    _logger().warning("lm_cache_failed", operation=operation, error=redact_text(f"{type(exc).__name__}: {exc}"))
