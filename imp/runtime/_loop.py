"""Which async library, if any, runs an event loop in this thread."""

from __future__ import annotations

import sys

__all__ = ["running_async_library"]


def running_async_library() -> str | None:
    """The async library running an event loop in this thread (`"asyncio"`, `"trio"`), or None."""
    import asyncio

    try:
        asyncio.get_running_loop()
        return "asyncio"
    except RuntimeError:
        pass
    trio = sys.modules.get("trio")
    if trio is None:
        return None
    try:
        trio.lowlevel.current_task()
        return "trio"
    except RuntimeError:
        return None
