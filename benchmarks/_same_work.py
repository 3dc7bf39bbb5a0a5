"""What every side-by-side benchmark checks before it prints a ratio: that the frameworks did the same
work (the LM calls made, the answers given, the candidates proposed, the best score, the demos
found), and what the fake models share: answering in the format each request asks for.

A comparison of unequal runs is worse than none. Each benchmark counts what every side did, hands
the counts to `same_work`, which prints one line saying so (or what differs), and stops with an
error when they differ: the ratio of unequal runs is never printed.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["Calls", "Side", "answer_format", "reply_as_asked", "same_work"]


class Calls:
    """A thread-safe count of the LM requests a fake model answered."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.count = 0

    def add(self, n: int = 1) -> None:
        with self._lock:
            self.count += n

    def take(self) -> int:
        """The count so far, and start again from zero."""
        with self._lock:
            count, self.count = self.count, 0
            return count


@dataclass
class Side:
    """What one framework did in a benchmark: the figures that must match the other sides'."""

    label: str
    work: dict[str, object] = field(default_factory=dict)


def same_work(what: str, sides: Sequence[Side]) -> None:
    """Print whether every side did the same work (each figure in `work` equal on all sides);
    stop the benchmark with an error when one differs."""
    if len(sides) < 2:
        only = sides[0] if sides else None
        shown = ", ".join(f"{k} {v}" for k, v in only.work.items()) if only else ""
        print(f"  work done ({what}): {only.label if only else 'none'}: {shown} (no other side to compare)")
        return
    keys = list(sides[0].work)
    differ = [k for k in keys if len({repr(s.work.get(k)) for s in sides}) > 1]
    names = " / ".join(s.label.strip() for s in sides)
    if differ:
        shown = "; ".join(f"{k} " + " / ".join(str(s.work.get(k)) for s in sides) for k in keys)
        print(f"  NOT the same work ({what}; {names}): {shown}")
        raise SystemExit(f"{what}: the sides did different work ({', '.join(differ)}), so no ratio is shown")
    shown = "; ".join(f"{k} {sides[0].work.get(k)}" for k in keys)
    print(f"  same work checked ({what}), on all {len(sides)} sides: {shown}")


_CHAT_FIELD = re.compile(r"\[\[ ## (\w+) ## \]\]")


def answer_format(messages: Sequence[Mapping[str, Any]] | None, prompt: str | None = None) -> str:
    """The reply format a request asks for: `chat` (`[[ ## field ## ]]` markers, DSPy's and imp's
    ChatAdapter), `json` (a JSON object, DSPy's JSONAdapter), `xml` (field tags), or `text`."""
    text = (prompt or "") + "\n".join(str(m.get("content") or "") for m in messages or ())
    if "[[ ## completed ## ]]" in text:
        return "chat"
    if re.search(r"\bJSON\b", text) and re.search(r"(?i)json object|in json format|valid json", text):
        return "json"
    if re.search(r"<(\w+)>\s*\.\.\.\s*</\1>|in XML|XML tags", text):
        return "xml"
    return "text"


def reply_as_asked(
    messages: Sequence[Mapping[str, Any]] | None, fields: Mapping[str, object], prompt: str | None = None
) -> str:
    """The output fields written as the request asks (see `answer_format`)."""
    kind = answer_format(messages, prompt)
    if kind == "chat":
        body = "".join(f"[[ ## {k} ## ]]\n{v}\n\n" for k, v in fields.items())
        return body + "[[ ## completed ## ]]"
    if kind == "json":
        return json.dumps(dict(fields))
    if kind == "xml":
        return "".join(f"<{k}>{v}</{k}>\n" for k, v in fields.items())
    return "\n".join(str(v) for v in fields.values())
