"""`python -m imp.trace events.jsonl [-o run.html]`: draw a recorded run as one HTML page."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

__all__ = ["main"]


def main(argv: Sequence[str] | None = None) -> int:
    """Read `Event.dump()` lines from a JSON Lines file and write the run's page beside it."""
    parser = argparse.ArgumentParser(prog="python -m imp.trace", description=__doc__)
    parser.add_argument("events", type=Path, help="a JSON Lines file, one Event.dump() per line")
    parser.add_argument("-o", "--output", type=Path, help="the HTML file to write (default: EVENTS.html)")
    args = parser.parse_args(argv)
    from imp.observe.picture import load_events
    from imp.observe.trace_html import trace_html

    try:
        events = load_events(args.events)
        target = trace_html(events, args.output or args.events.with_suffix(".html"))
    except (OSError, ValueError) as exc:
        print(f"imp.trace: {exc}", file=sys.stderr)
        return 1
    print(target)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
