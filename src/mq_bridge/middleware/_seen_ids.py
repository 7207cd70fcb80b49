"""The ids a deduplication middleware has seen, with the time it saw them, in SQLite.

    seen_ids(key TEXT PRIMARY KEY, seen_at REAL) WITHOUT ROWID   -- seen_at: Unix seconds

WITHOUT ROWID keeps one B-tree instead of a table plus a key index: about twice as fast to
insert keys that arrive in random order (caller-given ids, metadata values).

WAL mode with ``synchronous=NORMAL``: a committed id survives a crash of the process (only a
power loss may forget the last few). Expired ids are purged now and then, not on every
write. One connection per file is shared by every user in the process, behind a lock.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
from collections.abc import Iterable

from mq_bridge.errors import ConfigError

_PURGE_EVERY = 60.0  # seconds between purges of expired ids
_QUERY_CHUNK = 500  # stay below SQLite's bound-parameter limit


class SeenIds:
    """A set of keys whose members expire `ttl` seconds after they were added."""

    def __init__(
        self, connection: sqlite3.Connection, lock: threading.Lock, ttl: float, private: bool
    ) -> None:
        self._db = connection
        self._lock = lock
        self.ttl = ttl
        self._private = private  # an in-memory store nobody else uses: closed with us
        self._last_purge = 0.0
        with self._lock, self._db:
            self._db.execute(
                "CREATE TABLE IF NOT EXISTS seen_ids"
                " (key TEXT PRIMARY KEY, seen_at REAL NOT NULL) WITHOUT ROWID"
            )

    def known(self, keys: list[str]) -> set[str]:
        """The keys among `keys` added less than `ttl` seconds ago."""
        oldest = time.time() - self.ttl
        found: set[str] = set()
        with self._lock:
            for start in range(0, len(keys), _QUERY_CHUNK):
                chunk = keys[start : start + _QUERY_CHUNK]
                marks = ",".join("?" * len(chunk))
                rows = self._db.execute(
                    f"SELECT key FROM seen_ids WHERE seen_at >= ? AND key IN ({marks})",
                    (oldest, *chunk),
                )
                found.update(row[0] for row in rows)
        return found

    def add(self, keys: Iterable[str]) -> None:
        """Remember `keys` as seen now (committed before this returns)."""
        now = time.time()
        rows = [(key, now) for key in keys]
        if not rows:
            return
        with self._lock, self._db:
            self._db.executemany("INSERT OR REPLACE INTO seen_ids VALUES (?, ?)", rows)
            if now - self._last_purge > _PURGE_EVERY:
                self._db.execute("DELETE FROM seen_ids WHERE seen_at < ?", (now - self.ttl,))
                self._last_purge = now

    def close(self) -> None:
        """Release an in-memory store (a file store stays open for other users in the process)."""
        if self._private:
            with self._lock:
                self._db.close()


_connections: dict[str, tuple[sqlite3.Connection, threading.Lock]] = {}
_connections_lock = threading.Lock()


def open_seen_ids(store: str | None, ttl: float) -> SeenIds:
    """The seen-ids set kept at `store` (sqlite:///path, a file path, or memory://)."""
    path = store_path(store)
    with _connections_lock:
        shared = _connections.get(path)
        if shared is None:
            shared = (_connect(path), threading.Lock())
            if path != ":memory:":
                _connections[path] = shared
    return SeenIds(*shared, ttl, private=path == ":memory:")


def store_path(store: str | None) -> str:
    """The SQLite path for the `store` option (``:memory:`` for memory://); ValueError for a
    store it cannot use."""
    if store is None or store.startswith("memory://"):
        return ":memory:"
    if store.startswith("sqlite://"):
        store = store[len("sqlite://") :]
    elif "://" in store:
        raise ValueError(
            f"unsupported store {store!r}; use sqlite:///path, a file path or memory://"
        )
    if not store:
        raise ValueError("sqlite:// needs a file path")
    return os.path.abspath(store)


def _connect(path: str) -> sqlite3.Connection:
    try:
        if path != ":memory:":
            os.makedirs(os.path.dirname(path), exist_ok=True)
        connection = sqlite3.connect(path, check_same_thread=False)
        connection.execute("PRAGMA journal_mode=WAL")
        connection.execute("PRAGMA synchronous=NORMAL")
    except (OSError, sqlite3.Error) as error:
        raise ConfigError(f"cannot open {path}: {error}", "deduplication.store") from None
    return connection
