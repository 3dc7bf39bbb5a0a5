"""imp's log lines: structlog under the logger name `imp`, silent until someone asks for them.

Every run event (and imp's own warnings) is a structlog event dict handed to the standard
library logger `logging.getLogger("imp")` (structlog's stdlib integration). Nothing is printed
until that logger is configured:

- `imp.configure_logging(json=True)` gives the `imp` logger its own handler (stderr by
  default) that renders each line as JSON, or readable key=value text with `json=False`;
- or configure stdlib logging yourself and render imp's records with
  `structlog.stdlib.ProcessorFormatter` (the event dict travels on the record).

Levels: the run lifecycle (`run_started`, `run_finished`, `run_failed`, `run_cancelled`),
`model_response`, `model_error` and `tool_result` log at INFO; the other events at DEBUG;
imp's own problems (a failing event sink) at WARNING. With stdlib logging unconfigured the
`imp` logger's effective level is WARNING, so a program that never configures logging builds
no event for the log at all.
"""

from __future__ import annotations

import logging
import sys
from typing import TYPE_CHECKING, Any, TextIO

if TYPE_CHECKING:
    pass

__all__ = [
    "LOGGER_NAME",
    "configure_logging",
    "event_level",
    "get_logger",
    "logs_enabled",
    "reset_logging",
]

LOGGER_NAME = "imp"

_stdlib = logging.getLogger(LOGGER_NAME)
_stdlib.addHandler(logging.NullHandler())  # a library prints nothing until its host configures logging
_INFO_KINDS = frozenset(
    {"run_started", "run_finished", "run_failed", "run_cancelled", "model_response", "model_error", "tool_result"}
)
_installed: logging.Handler | None = None


class _EventDict(dict[str, Any]):
    """The event dict on a log record: `structlog.stdlib.ProcessorFormatter` renders it (JSON or
    console); a plain stdlib formatter gets readable `event key=value ...` text from `str()`."""

    def __str__(self) -> str:
        skip = ("event", "level", "logger", "timestamp")
        rest = " ".join(f"{k}={v!r}" for k, v in self.items() if k not in skip)
        return f"{self.get('event', '')} {rest}".strip()


def _to_record(logger: Any, name: str, event_dict: Any) -> tuple[tuple[Any, ...], dict[str, Any]]:
    import structlog

    args, kwargs = structlog.stdlib.ProcessorFormatter.wrap_for_formatter(logger, name, event_dict)
    return (_EventDict(args[0]),), kwargs


_logger: object = None


def get_logger() -> Any:
    """imp's structlog logger (a `structlog.stdlib.BoundLogger` over `logging.getLogger("imp")`).

    Built on first use, so `import imp` does not import structlog.
    """
    global _logger
    if _logger is None:
        import structlog

        _logger = structlog.wrap_logger(
            _stdlib,
            processors=[
                structlog.stdlib.add_logger_name,
                structlog.stdlib.add_log_level,
                structlog.processors.TimeStamper(fmt="iso", utc=True),
                _to_record,
            ],
            wrapper_class=structlog.stdlib.BoundLogger,
        )
    return _logger


def event_level(kind: str) -> int:
    """The stdlib level an event of this kind is logged at."""
    return logging.INFO if kind in _INFO_KINDS else logging.DEBUG


def logs_enabled(level: int = logging.INFO) -> bool:
    """Whether the `imp` logger would emit a line at this level (a cheap, cached check)."""
    return _stdlib.isEnabledFor(level)


def configure_logging(
    *,
    json: bool = False,
    level: int | str = "INFO",
    stream: TextIO | None = None,
) -> logging.Handler:
    """Show imp's log lines: JSON (`json=True`) or readable text, at `level` and above, on `stream`.

    Installs one handler on the `imp` logger (replacing the one an earlier call installed) and
    stops imp's lines from also reaching the root logger; other loggers and structlog's global
    configuration are left alone. `level="DEBUG"` adds model requests, tool calls and reasoning
    to the INFO lines (run lifecycle, model responses with usage and duration, tool results).
    Returns the handler; `reset_logging()` removes it.
    """
    global _installed
    import structlog

    renderer: Any = (
        structlog.processors.JSONRenderer(default=str) if json else structlog.dev.ConsoleRenderer(colors=False)
    )
    handler = logging.StreamHandler(stream if stream is not None else sys.stderr)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, renderer],
        )
    )
    if _installed is not None:
        _stdlib.removeHandler(_installed)
    _stdlib.addHandler(handler)
    _stdlib.setLevel(level.upper() if isinstance(level, str) else level)
    _stdlib.propagate = False
    _installed = handler
    return handler


def reset_logging() -> None:
    """Undo `configure_logging`: remove its handler and give the `imp` logger back to stdlib defaults."""
    global _installed
    if _installed is not None:
        _stdlib.removeHandler(_installed)
        _installed = None
    _stdlib.setLevel(logging.NOTSET)
    _stdlib.propagate = True
