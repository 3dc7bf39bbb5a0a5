"""Response caches: a bounded in-memory LRU and an optional SQLite file, with concurrent misses coalesced.

A cache is keyed by who asks and what: the endpoint, the request body, `rollout_id`, the headers
sent (those that may change the reply: a beta flag, an organisation, a routing header) and a digest
of the credential, so two keys (two tenants) never share an entry, and the key itself holds no
credential. A SQLite file is created readable by its owner only (0600). A hit reports zero usage
and `cache_hit=True`; a cache that fails to read or write never fails the call.
"""

from __future__ import annotations

import abc
import dataclasses
import hashlib
import json
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio

from imp._redact import is_secret_key
from imp.models._log import log_cache_failure
from imp.models._response import LMResponse
from imp.records import ToolCall, Usage

__all__ = [
    "CacheStats",
    "MemoryCache",
    "ResponseCache",
    "SQLiteCache",
    "cache_key",
    "configured_cache",
    "configured_cache_here",
    "load_response",
    "dump_response",
    "resolve_cache",
    "using_cache",
]


_NOT_KEYED_HEADERS = frozenset({"content-type", "accept", "user-agent", "content-length"})
"""Headers that never change a reply (the same for every request in a mode)."""


def cache_key(
    provider: str,
    base_url: str,
    body: Mapping[str, object],
    rollout_id: object = None,
    *,
    headers: Mapping[str, str] | None = None,
) -> str:
    """A SHA-256 over the provider, endpoint, request body, rollout id and headers sent, with each
    credential header (`authorization`, `x-api-key`, `api-key`, ...) as a digest of its value."""
    sent: dict[str, str] = {}
    for name, value in (headers or {}).items():
        lowered = name.lower()
        if lowered in _NOT_KEYED_HEADERS:
            continue
        sent[lowered] = "sha256:" + hashlib.sha256(value.encode()).hexdigest() if is_secret_key(lowered) else value
    material = {"provider": provider, "base_url": base_url, "body": body, "rollout_id": rollout_id, "headers": sent}
    encoded = json.dumps(material, sort_keys=True, ensure_ascii=False, separators=(",", ":"), default=str)
    return hashlib.sha256(encoded.encode()).hexdigest()


def dump_response(response: LMResponse) -> dict[str, Any]:
    """A JSON-friendly copy of a response, for a cache on disk."""
    data = dataclasses.asdict(response)
    data["tool_calls"] = [call.dump() for call in response.tool_calls]
    return data


def load_response(data: Mapping[str, Any]) -> LMResponse:
    """Rebuild a response from `dump_response`."""
    usage = Usage(**data.get("usage") or {})
    calls = tuple(
        ToolCall(id=c["id"], name=c["name"], arguments=c.get("arguments") or {}) for c in data.get("tool_calls") or ()
    )
    known = {f.name for f in dataclasses.fields(LMResponse)} - {"usage", "tool_calls"}
    rest = {k: v for k, v in data.items() if k in known}
    return LMResponse(**rest, usage=usage, tool_calls=calls)


def as_hit(response: LMResponse) -> LMResponse:
    """The response as a cache hit: zero usage, `cache_hit=True`."""
    return dataclasses.replace(response, usage=Usage(), cache_hit=True)


@dataclass(slots=True)
class CacheStats:
    """Counters of one cache."""

    hits: int = 0
    misses: int = 0
    writes: int = 0
    coalesced: int = 0
    evictions: int = 0
    errors: int = 0


class _Flight:
    __slots__ = ("done", "response")

    def __init__(self) -> None:
        self.done = anyio.Event()
        self.response: LMResponse | None = None


class ResponseCache(abc.ABC):
    """A store of responses by key; `get_or_fetch` adds hit accounting and miss coalescing."""

    def __init__(self) -> None:
        self.stats = CacheStats()
        self._inflight: dict[str, _Flight] = {}

    @abc.abstractmethod
    async def get(self, key: str) -> LMResponse | None:
        """The stored response, or None."""

    @abc.abstractmethod
    async def set(self, key: str, response: LMResponse) -> None:
        """Store a response."""

    async def get_or_fetch(self, key: str, fetch: Callable[[], Awaitable[LMResponse]]) -> LMResponse:
        """A hit, or the result of `fetch()`, stored; concurrent misses on one key fetch once."""
        try:
            found = await self.get(key)
        except Exception as exc:
            self.stats.errors += 1
            log_cache_failure("get", exc)
            found = None
        if found is not None:
            self.stats.hits += 1
            return as_hit(found)
        flight = self._inflight.get(key)
        if flight is not None:
            await flight.done.wait()
            if flight.response is not None:
                self.stats.coalesced += 1
                return as_hit(flight.response)
            return await fetch()  # the first request failed: this one tries for itself
        self.stats.misses += 1
        flight = self._inflight[key] = _Flight()
        try:
            response = await fetch()
            flight.response = response
            try:
                await self.set(key, response)
                self.stats.writes += 1
            except Exception as exc:
                self.stats.errors += 1
                log_cache_failure("set", exc)
            return response
        finally:
            del self._inflight[key]
            flight.done.set()


class MemoryCache(ResponseCache):
    """A bounded LRU in memory, with an optional time to live in seconds."""

    def __init__(self, max_entries: int = 1024, ttl: float | None = None) -> None:
        super().__init__()
        if max_entries < 1:
            raise ValueError("max_entries must be at least 1")
        self.max_entries = max_entries
        self.ttl = ttl
        self._entries: OrderedDict[str, tuple[float, LMResponse]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    async def get(self, key: str) -> LMResponse | None:
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return None
            stored_at, response = entry
            if self.ttl is not None and time.monotonic() - stored_at > self.ttl:
                del self._entries[key]
                return None
            self._entries.move_to_end(key)
            return response

    async def set(self, key: str, response: LMResponse) -> None:
        with self._lock:
            self._entries[key] = (time.monotonic(), response)
            self._entries.move_to_end(key)
            while len(self._entries) > self.max_entries:
                self._entries.popitem(last=False)
                self.stats.evictions += 1

    def clear(self) -> None:
        """Forget every entry."""
        with self._lock:
            self._entries.clear()


class SQLiteCache(ResponseCache):
    """Responses in a SQLite file (read and written off the event loop), in front of a memory LRU."""

    def __init__(self, path: str | Path, *, memory_entries: int = 256) -> None:
        super().__init__()
        self.path = Path(path)
        self._memory = MemoryCache(memory_entries)
        self._lock = threading.Lock()
        self._conn: sqlite3.Connection | None = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            # Created readable by its owner only: replies may hold what a user's prompts held.
            # (SQLite gives its journal the database file's permissions.)
            os.close(os.open(self.path, os.O_CREAT | os.O_RDWR, 0o600))
            conn = sqlite3.connect(self.path, check_same_thread=False)
            conn.execute("CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, value TEXT NOT NULL)")
            conn.commit()
            self._conn = conn
        return self._conn

    def _read(self, key: str) -> str | None:
        with self._lock:
            row = self._connection().execute("SELECT value FROM responses WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _write(self, key: str, value: str) -> None:
        with self._lock:
            conn = self._connection()
            conn.execute("INSERT OR REPLACE INTO responses (key, value) VALUES (?, ?)", (key, value))
            conn.commit()

    async def get(self, key: str) -> LMResponse | None:
        found = await self._memory.get(key)
        if found is not None:
            return found
        text = await anyio.to_thread.run_sync(self._read, key)
        if text is None:
            return None
        response = load_response(json.loads(text))
        await self._memory.set(key, response)
        return response

    async def set(self, key: str, response: LMResponse) -> None:
        await self._memory.set(key, response)
        text = json.dumps(dump_response(response), ensure_ascii=False, default=str)
        await anyio.to_thread.run_sync(self._write, key, text)

    def close(self) -> None:
        """Close the database file."""
        with self._lock:
            if self._conn is not None:
                self._conn.close()
                self._conn = None


CacheSetting = ResponseCache | bool | str | Path | None
"""`True` (the process-wide memory LRU), `False` (off), a path (a SQLite file), a cache, or None
(the context's default)."""

_default: ContextVar[ResponseCache | None] = ContextVar("imp_lm_cache", default=None)
_shared_memory: MemoryCache | None = None
_sqlite_by_path: dict[Path, SQLiteCache] = {}
# The `cache` setting, handed down by `imp.configure` / `imp.context` (imp.settings, a layer above,
# which this module never imports): the process's, and a block's own (a 1-tuple: None is a value).
_configured: Any = None
_configured_in_block: ContextVar[tuple[Any] | None] = ContextVar("imp_configured_cache", default=None)


def configured_cache(cache: object) -> None:
    """Set the process's `cache` setting (what `imp.configure(cache=...)` calls), resolved when used."""
    global _configured
    _configured = cache


@contextmanager
def configured_cache_here(cache: object) -> Iterator[None]:
    """The `cache` setting inside the block only (what `imp.context(...)` enters)."""
    token = _configured_in_block.set((cache,))
    try:
        yield
    finally:
        _configured_in_block.reset(token)


@contextmanager
def using_cache(cache: CacheSetting) -> Iterator[ResponseCache | None]:
    """Use a default cache inside the block only."""
    resolved = resolve_cache(cache, use_default=False)
    token = _default.set(resolved)
    try:
        yield resolved
    finally:
        _default.reset(token)


def resolve_cache(cache: CacheSetting, *, use_default: bool = True) -> ResponseCache | None:
    """Turn an LM's or a call's `cache` setting into a cache.

    None defers to the context's default (`using_cache`, then `imp.configure(cache=...)`); True is
    the process-wide in-memory LRU; a path (str or Path) is a SQLite file; False is off.
    """
    global _shared_memory
    if cache is None:
        if not use_default:
            return None
        found = _default.get()
        if found is not None:
            return found
        in_block = _configured_in_block.get()
        configured = _configured if in_block is None else in_block[0]
        return None if configured is None else resolve_cache(configured, use_default=False)
    if cache is False:
        return None
    if cache is True:
        if _shared_memory is None:
            _shared_memory = MemoryCache()
        return _shared_memory
    if isinstance(cache, ResponseCache):
        return cache
    if isinstance(cache, str | Path):
        path = Path(cache).expanduser()
        if path not in _sqlite_by_path:
            _sqlite_by_path[path] = SQLiteCache(path)
        return _sqlite_by_path[path]
    raise TypeError(f"cache must be True, False, None, a path or a ResponseCache, got {type(cache).__name__}")
