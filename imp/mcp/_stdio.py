"""The stdio transport of `imp.mcp`: one server process in its own session (process
group), a minimal environment, JSON-RPC lines over its stdin and stdout, and an ending that
leaves nothing of the group behind.
"""

from __future__ import annotations

import contextlib
import math
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from pathlib import Path

import anyio
import anyio.abc
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage

from imp.mcp._sdk import read_message, write_message

__all__ = ["ENV_PASSED", "group_alive", "minimal_environment", "stdio_streams"]

ENV_PASSED = (
    "HOME",
    "LANG",
    "LANGUAGE",
    "LC_ALL",
    "LC_CTYPE",
    "LOGNAME",
    "PATH",
    "SHELL",
    "SYSTEMROOT",
    "TEMP",
    "TERM",
    "TMP",
    "TMPDIR",
    "TZ",
    "USER",
)
"""The parent's variables a stdio server inherits; everything else (API keys, tokens) stays out."""

_STDERR_KEPT = 4096


def minimal_environment(extra: Mapping[str, str]) -> dict[str, str]:
    """The parent's harmless variables (`ENV_PASSED`) plus the descriptor's `env`."""
    env = {
        key: value
        for key in ENV_PASSED
        if (value := os.environ.get(key)) is not None and not value.startswith("()")  # no shell functions
    }
    env.update(extra)
    return env


def group_alive(pgid: int) -> bool:
    """Whether any process of the group still runs (zombies, which hold nothing, do not count)."""
    proc = Path("/proc")
    if sys.platform.startswith("linux") and proc.is_dir():
        for entry in proc.iterdir():
            if not entry.name.isdigit():
                continue
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            # pid (comm) state ppid pgrp ...; comm may hold spaces and parentheses
            fields = stat[stat.rfind(")") + 2 :].split()
            if len(fields) > 2 and fields[2] == str(pgid) and fields[0] not in ("Z", "X"):
                return True
        return False
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _signal_group(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


async def _wait_gone(pgid: int, seconds: float) -> bool:
    deadline = anyio.current_time() + seconds
    while group_alive(pgid):
        if anyio.current_time() >= deadline:
            return False
        await anyio.sleep(0.02)
    return True


async def end_process_group(process: anyio.abc.Process, pgid: int, *, grace: float) -> None:
    """Close stdin, then SIGTERM the whole group, then SIGKILL whatever is left after `grace` s."""
    with anyio.CancelScope(shield=True):
        if process.stdin is not None:
            with contextlib.suppress(Exception):
                await process.stdin.aclose()
        with anyio.move_on_after(min(grace, 0.5)):
            await process.wait()
        if group_alive(pgid):
            _signal_group(pgid, signal.SIGTERM)
        if not await _wait_gone(pgid, grace):
            _signal_group(pgid, signal.SIGKILL)
            await _wait_gone(pgid, 5.0)
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            with anyio.move_on_after(5.0):
                await process.wait()


class StderrTail:
    """The last few KB a server wrote to stderr, for the reason of a failure."""

    def __init__(self) -> None:
        self.data = b""

    def add(self, chunk: bytes) -> None:
        self.data = (self.data + chunk)[-_STDERR_KEPT:]

    def last_line(self) -> str:
        lines = [line.strip() for line in self.data.decode("utf-8", "replace").splitlines() if line.strip()]
        return lines[-1][:300] if lines else ""


@contextlib.asynccontextmanager
async def stdio_streams(
    command: str,
    args: Sequence[str],
    env: Mapping[str, str],
    cwd: str | None,
    *,
    grace: float,
    on_exit: Callable[[str], None],
    on_start: Callable[[int], None] | None = None,
) -> AsyncIterator[
    tuple[MemoryObjectReceiveStream[SessionMessage | Exception], MemoryObjectSendStream[SessionMessage]]
]:
    """Start the server in a new session and yield the (read, write) streams a `ClientSession` takes.

    `on_exit(reason)` is called once when the server's stdout ends (it exited or closed it).
    Leaving the context ends the whole process group (`end_process_group`).
    """
    full_env = minimal_environment(env)
    executable = shutil.which(command, path=full_env.get("PATH")) or command
    process = await anyio.open_process(
        [executable, *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=full_env,
        cwd=cwd,
        start_new_session=True,
    )
    pgid = process.pid  # a new session: the leader's pid is the group's id
    if on_start is not None:
        on_start(pgid)
    stderr = StderrTail()
    stderr_done = anyio.Event()
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](math.inf)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def read_stdout() -> None:
        assert process.stdout is not None
        buffer = b""
        try:
            async for chunk in process.stdout:
                buffer += chunk
                *lines, buffer = buffer.split(b"\n")
                for line in lines:
                    if not line.strip():
                        continue
                    try:
                        message = read_message(line)
                    except Exception as exc:  # a line that is not JSON-RPC (a stray print)
                        read_writer.send_nowait(exc)
                        continue
                    read_writer.send_nowait(SessionMessage(message))
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            # Say why before the session sees its stream end, so pending calls can tell.
            with anyio.move_on_after(0.2, shield=True):
                await process.wait()
            await exited()
            read_writer.close()

    async def exited() -> None:
        with anyio.move_on_after(0.2, shield=True):
            await stderr_done.wait()
        code = process.returncode
        said = stderr.last_line()
        why = f"it exited with code {code}" if code is not None else "it closed its output"
        on_exit(f"{why}: {said}" if said else why)

    async def watch_exit() -> None:
        # The server may exit while a child of its still holds stdout open.
        await process.wait()
        await exited()

    async def read_stderr() -> None:
        assert process.stderr is not None
        try:
            async for chunk in process.stderr:
                stderr.add(chunk)
        except (anyio.ClosedResourceError, anyio.BrokenResourceError):
            pass
        finally:
            stderr_done.set()

    async def write_stdin() -> None:
        assert process.stdin is not None
        try:
            async with write_reader:
                async for message in write_reader:
                    line = write_message(message.message)
                    await process.stdin.send(line.encode() + b"\n")
        except (anyio.ClosedResourceError, anyio.BrokenResourceError, OSError):
            pass

    ended = False

    async def end() -> None:
        nonlocal ended
        if not ended:
            ended = True
            await end_process_group(process, pgid, grace=grace)

    try:
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(read_stdout)
            tasks.start_soon(read_stderr)
            tasks.start_soon(write_stdin)
            tasks.start_soon(watch_exit)
            try:
                yield read_stream, write_stream
            finally:
                await end()
                tasks.cancel_scope.cancel()
    finally:
        with anyio.CancelScope(shield=True):
            await end()  # also when starting the tasks failed
            for stream in (read_stream, write_stream, read_writer, write_reader):
                await stream.aclose()
