"""Evaluation progress: a redrawn bar with the running score on a terminal, plain lines otherwise."""

from __future__ import annotations

import time
from typing import TextIO

__all__ = ["Progress"]

_BAR = 24
_TTY_INTERVAL = 0.1
_LOG_INTERVAL = 10.0


class Progress:
    """Shows how far an evaluation is, its running mean score and its error count."""

    def __init__(self, total: int, stream: TextIO | None, *, label: str = "imp.evaluate") -> None:
        self.total = total
        self.stream = stream
        self.label = label
        self.tty = bool(stream is not None and _isatty(stream))
        self.done = 0
        self.errors = 0
        self.score_sum = 0.0
        self.started = time.monotonic()
        self._last_draw = 0.0
        self._next_line = max(1, total // 10)
        self._drawn = False

    def update(self, score: float, *, error: bool) -> None:
        """Count one finished row."""
        self.done += 1
        self.score_sum += score
        self.errors += int(error)
        if self.stream is None:
            return
        now = time.monotonic()
        if self.tty:
            if now - self._last_draw >= _TTY_INTERVAL or self.done == self.total:
                self._draw(now)
        elif self.done >= self._next_line or now - self._last_draw >= _LOG_INTERVAL or self.done == self.total:
            self._line(now)

    def close(self, *, stopped: str | None = None) -> None:
        """End the display (a newline after the bar; a last line when stopped early)."""
        if self.stream is None:
            return
        if self.tty and self._drawn:
            self._draw(time.monotonic())
            self.stream.write("\n")
        if stopped:
            self.stream.write(f"{self.label}: stopped: {stopped}\n")
        self.stream.flush()

    def _status(self, now: float) -> str:
        mean = self.score_sum / self.done if self.done else 0.0
        rate = self.done / max(now - self.started, 1e-9)
        return f"{self.done}/{self.total}  score {mean:.3f}  errors {self.errors}  {rate:.1f}/s"

    def _draw(self, now: float) -> None:
        assert self.stream is not None
        filled = _BAR * self.done // self.total if self.total else _BAR
        bar = "█" * filled + "·" * (_BAR - filled)
        self.stream.write(f"\r{self.label} {bar} {self._status(now)}\x1b[K")
        self.stream.flush()
        self._last_draw = now
        self._drawn = True

    def _line(self, now: float) -> None:
        assert self.stream is not None
        percent = 100 * self.done // self.total if self.total else 100
        self.stream.write(f"{self.label}: {percent}% {self._status(now)}  {now - self.started:.1f}s\n")
        self.stream.flush()
        self._last_draw = now
        while self._next_line <= self.done:
            self._next_line += max(1, self.total // 10)


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
