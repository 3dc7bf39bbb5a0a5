"""One call of a run id at a time across processes: a lock on one byte of a file beside the journal.

Two processes calling one run id at once would both run what is not recorded yet (a tool with side
effects, twice). The in-process guard (`_scope.one_call`) cannot see another process, so a SQLite
journal also takes a POSIX record lock (`fcntl.lockf`) on the byte of `<journal>-runs` that the run
id's hash names. The operating system drops the lock when its process dies, so a killed run is
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

from imp.errors import JournalError

fcntl: ModuleType | None
try:
    import fcntl
except ImportError:  # pragma: no cover - Windows
    fcntl = None

__all__ = ["lock_path", "one_process"]

_files: dict[str, int] = {}
"""The lock file of each journal, opened once in this process."""
_files_lock = threading.Lock()


def lock_path(journal: Path) -> Path:
    """The file whose bytes the runs of `journal` lock: `<journal>-runs`, created 0600, holding no data."""
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
def one_process(journal: Path, run_id: str) -> Iterator[None]:
    """Hold run `run_id` of `journal` (a resolved path) for this process while the block runs; a run
    held by another process is a `JournalError`, never a wait."""
    if fcntl is None:  # pragma: no cover - Windows
        yield
        return
    path = lock_path(journal)
    try:
        fd = _descriptor(path)
    except OSError as exc:
        raise JournalError(f"cannot open {path} to hold run {run_id!r}: {exc.strerror}") from None
    offset = int.from_bytes(hashlib.sha256(run_id.encode()).digest()[:7], "big")
    try:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, offset)
    except OSError as exc:
        if exc.errno in (errno.EACCES, errno.EAGAIN):
            raise JournalError(
                f"run {run_id!r} is running in another process; call it again once that call has ended "
                "(it then replays what was recorded)"
            ) from None
        raise JournalError(f"cannot lock {path} to hold run {run_id!r}: {exc.strerror}") from None
    try:
        yield
    finally:
        fcntl.lockf(fd, fcntl.LOCK_UN, 1, offset)
