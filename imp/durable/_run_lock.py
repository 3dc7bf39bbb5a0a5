"""One call of a run id (or one turn of a session) at a time across processes: a lock on one byte
of a file beside the SQLite file.

Two processes calling one run id at once would both run what is not recorded yet (a tool with side
effects, twice); two turns of one session at once would each keep the history without the other's
turn. The in-process guard (`_scope.one_call`) cannot see another process, so the journal and the
session store also take a POSIX record lock (`fcntl.lockf`) on the byte of `<file>-runs` that the
hash of the kind and the id names. The operating system drops the lock when its process dies, so a killed run is
resumed at once, with no lease to expire. Record locks belong to the process: the file is opened
once per process and never closed (closing any descriptor of it would drop every lock the process
holds on it). Where `fcntl` is missing (Windows) only the in-process guard holds.
"""

from __future__ import annotations

import errno
import hashlib
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Literal

from imp.errors import JournalBusy, JournalError

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

__all__ = ["Held", "busy", "lock_path", "one_process"]

Held = Literal["run", "session"]
"""What a lock holds: a journal's run, or a session store's conversation (one file may keep both)."""


def busy(kind: Held, key: str, where: str) -> str:
    """The error's words for a run or a session that another call holds, and what to do."""
    if kind == "run":
        return f"run {key!r} is running {where}; call it again once that call has ended (it then replays what was recorded)"
    return (
        f"session {key!r} has a turn running {where}: a second turn at once would keep the history "
        "without the first's turn; send it once that turn has ended"
    )


_files: dict[str, int] = {}
"""The lock file of each journal, opened once in this process."""
_files_lock = threading.Lock()


def lock_path(journal: Path) -> Path:
    """The file whose bytes the runs and sessions of `journal` lock: `<journal>-runs`, created 0600,
    holding no data."""
    return journal.with_name(journal.name + "-runs")


def _descriptor(path: Path) -> int:
    key = str(path)
    with _files_lock:
        fd = _files.get(key)
        if fd is None:
            fd = os.open(path, os.O_CREAT | os.O_RDWR, 0o600)
            _files[key] = fd
        return fd


@contextmanager
def one_process(file: Path, kind: Held, key: str) -> Iterator[None]:
    """Hold run (or session) `key` of `file` (a resolved path) for this process while the block runs;
    one held by another process is a `JournalError`, never a wait."""
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    path = lock_path(file)
    try:
        fd = _descriptor(path)
    except OSError as exc:
        raise JournalError(f"cannot open {path} to hold {kind} {key!r}: {exc.strerror}") from None
    offset = int.from_bytes(hashlib.sha256(f"{kind}\0{key}".encode()).digest()[:7], "big")
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            raise JournalBusy(busy(kind, key, "in another process"), kind=kind, key=key) from None
        raise JournalError(f"cannot lock {path} to hold {kind} {key!r}: {exc.strerror}") from None
    try:
        yield
    finally:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)
