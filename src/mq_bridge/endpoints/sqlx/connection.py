"""Connecting to the database: SQLAlchemy's pool over psycopg 3, PyMySQL or sqlite3.

SQLAlchemy (2, Core only) gives the pool (`max_connections`, `acquire_timeout_ms`,
`max_lifetime_ms`, a ping on every checkout; `idle_timeout_ms` through pool events), URL
handling and the server's version; the endpoint's SQL goes to the DBAPI connection directly
(`Session`): per call, no statement compilation, no result objects.

One `Database` (engine + pool) per URL, credentials, TLS and pool settings is shared by
every endpoint of the process (``shared: true``, `BuildContext.connections`). Each endpoint
holds one pooled connection in a `Session` and hands it back when it closes.

Every wait is bounded: connecting by `CONNECT_TIMEOUT` (and the pool's acquire timeout),
PostgreSQL sockets by TCP keepalives, MySQL replies by `READ_TIMEOUT`. A connection that
breaks (a server restart) is dropped; a call on a connection that had worked before is
tried once more on a new one; otherwise the error surfaces as `EndpointUnavailableError`,
which routes retry with backoff.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

from mq_bridge.endpoints.kit.connections import ConnectionRegistry, Lease, connection_key
from mq_bridge.endpoints.kit.drivers import require_driver
from mq_bridge.endpoints.sqlx.urls import CONNECT_TIMEOUT, describe_url, engine_url
from mq_bridge.errors import (
    ConfigError,
    EndpointError,
    EndpointUnavailableError,
    MQBridgeError,
)

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from mq_bridge.endpoints.sqlx.dialects import Dialect
    from mq_bridge.endpoints.sqlx.options import SqlxOptions

__all__ = [
    "CONNECT_TIMEOUT",
    "Database",
    "Session",
    "acquire_database",
    "begin",
    "commit",
    "translate",
]

log = logging.getLogger("mq_bridge.endpoints.sqlx")

T = TypeVar("T")

ENDPOINT = "sqlx"
_DRIVERS = {"postgresql": ("psycopg", "psycopg[binary]"), "mysql": ("pymysql", "pymysql")}
# server messages that mean the config is wrong, not that the server is away
_CONFIG_MARKERS = (
    "password authentication failed",
    "no pg_hba.conf entry",
    "does not exist",
    "access denied",
    "unknown database",
    "invalid connection option",
    "unable to open database file",
)


@dataclass
class Database:
    """A pool on one database, and what was learnt about the server at connect."""

    engine: Engine
    kind: str
    where: str
    #: MariaDB >= 10.6 and MySQL >= 8.0 have ``SKIP LOCKED``
    skip_locked: bool = True
    #: SQLite in memory: one connection, so one user at a time
    lock: threading.Lock | None = None
    idle_timeout: float = 600.0
    max_lifetime: float = 1800.0
    versions: dict[str, Any] = field(default_factory=dict)


def acquire_database(options: SqlxOptions, registry: ConnectionRegistry) -> Lease[Database]:
    """A lease on the pool for `options`' database, whose server answered.

    `ConfigError` for a bad URL, TLS files, credentials or database name;
    `EndpointUnavailableError` when the server cannot be reached in time.
    """
    key = connection_key(
        ENDPOINT, url=options.url, username=options.username, password=options.password,
        tls=options.tls, max_connections=options.max_connections,
        min_connections=options.min_connections, acquire_timeout_ms=options.acquire_timeout_ms,
        idle_timeout_ms=options.idle_timeout_ms, max_lifetime_ms=options.max_lifetime_ms,
        test_before_acquire=options.test_before_acquire,
    )  # fmt: skip
    return registry.acquire(
        key, lambda: _open(options), _dispose, shared=options.shared is not False
    )


def _dispose(database: Database) -> None:
    database.engine.dispose()


def _open(options: SqlxOptions) -> Database:
    sqlalchemy = require_driver("sqlalchemy", endpoint=ENDPOINT, extra="sqlx")
    kind = options.kind
    if kind in _DRIVERS:
        module, package = _DRIVERS[kind]
        require_driver(module, endpoint=ENDPOINT, extra="sqlx", package=package)
    url, connect_args, memory = engine_url(options)
    where = f"sqlx:{describe_url(options.url)}"
    arguments: dict[str, Any] = {"connect_args": connect_args, "pool_reset_on_return": None}
    if kind != "sqlite":
        # Most of what we send a server is one statement (an INSERT, a COPY, an ack, a
        # PostgreSQL claim): autocommit saves the BEGIN and COMMIT round trips. Work of
        # several statements (a MySQL claim, an executemany) opens a transaction itself.
        arguments["isolation_level"] = "AUTOCOMMIT"
    if memory:
        from sqlalchemy.pool import StaticPool

        arguments["poolclass"] = StaticPool
    else:
        arguments.update(
            pool_size=options.max_connections or 10,
            max_overflow=0,
            pool_timeout=(options.acquire_timeout_ms or 0) / 1000 or 30.0,
            pool_recycle=(options.max_lifetime_ms or 0) / 1000 or -1,
            # Endpoints hold their connection, so a checkout is rare (connect, after a
            # break): always check what the pool hands out. After a server restart every
            # idle pooled connection is dead; this replaces them instead of failing calls.
            pool_pre_ping=True,
        )
    engine = sqlalchemy.create_engine(url, **arguments)
    database = Database(
        engine,
        kind,
        where,
        lock=threading.Lock() if memory else None,
        idle_timeout=(options.idle_timeout_ms or 0) / 1000,
        max_lifetime=(options.max_lifetime_ms or 0) / 1000,
    )
    _watch_idle_connections(sqlalchemy, database)
    if kind == "sqlite" and not memory:
        sqlalchemy.event.listen(engine, "connect", _sqlite_wal)
    try:
        _warm_up(database, options.min_connections or 0)
    except BaseException:
        engine.dispose()
        raise
    return database


def _warm_up(database: Database, count: int) -> None:
    """Connect (so a wrong config fails now), learn the server, keep `count` connections."""
    held = []
    try:
        for _ in range(max(1, count)):
            held.append(checkout(database))
        dialect = database.engine.dialect
        version = tuple(getattr(dialect, "server_version_info", None) or ())
        database.versions["server"] = version
        if database.kind == "mysql":
            mariadb = bool(getattr(dialect, "is_mariadb", False))
            database.skip_locked = version >= ((10, 6) if mariadb else (8, 0))
        if database.kind == "sqlite":
            import sqlite3

            if sqlite3.sqlite_version_info < (3, 35):
                raise ConfigError(
                    f"the sqlx endpoint needs SQLite 3.35 or newer (UPDATE ... RETURNING); "
                    f"this Python has {sqlite3.sqlite_version}"
                )
    finally:
        for connection in held:
            connection.close()


def checkout(database: Database) -> Any:
    """A pooled DBAPI connection (SQLAlchemy's proxy); errors as the bridge's."""
    try:
        return database.engine.raw_connection()
    except Exception as error:
        translated = translate(error, database.where)
        if translated is error:
            raise
        raise translated from error


def _watch_idle_connections(sqlalchemy: Any, database: Database) -> None:
    """`idle_timeout_ms`: a pooled connection idle that long is replaced on checkout."""
    if database.idle_timeout <= 0:
        return
    from sqlalchemy.exc import DisconnectionError

    def checked_in(dbapi_connection: Any, record: Any) -> None:
        record.info["mqb_idle_since"] = time.monotonic()

    def checked_out(dbapi_connection: Any, record: Any, proxy: Any) -> None:
        since = record.info.pop("mqb_idle_since", None)
        if since is not None and time.monotonic() - since > database.idle_timeout:
            raise DisconnectionError("idle longer than idle_timeout_ms")

    sqlalchemy.event.listen(database.engine, "checkin", checked_in)
    sqlalchemy.event.listen(database.engine, "checkout", checked_out)


def _sqlite_wal(dbapi_connection: Any, record: Any) -> None:
    """Readers never wait for the writer (sqlx opens SQLite in WAL mode too)."""
    cursor = dbapi_connection.cursor()
    try:
        cursor.execute("PRAGMA journal_mode=WAL")
    finally:
        cursor.close()


# -- transactions ---------------------------------------------------------------------------


def begin(cursor: Any, dialect: Dialect) -> bool:
    """Open a transaction for work of several statements: on the servers, whose connections
    autocommit (see `_open`), BEGIN; SQLite's module opens one itself. True when it did."""
    if dialect.name == "sqlite":
        return False
    cursor.execute("BEGIN")
    return True


def commit(connection: Any, dialect: Dialect, began: bool = False) -> None:
    """End the work: COMMIT where a transaction is open. (On an autocommit connection
    PyMySQL would still send a COMMIT, a round trip for nothing.)"""
    if began or dialect.name == "sqlite":
        connection.commit()


# -- errors ---------------------------------------------------------------------------------


def _names(error: BaseException) -> set[str]:
    return {cls.__name__ for cls in type(error).__mro__}


def is_connection_error(error: BaseException) -> bool:
    """Whether `error` (a DBAPI or SQLAlchemy error) means the connection is unusable."""
    error = getattr(error, "orig", None) or error
    if isinstance(error, OSError):
        return True
    if _names(error) & {"OperationalError", "InterfaceError"}:
        return "no such table" not in str(error)  # SQLite says that as an OperationalError
    return False


def is_missing_table(error: BaseException) -> bool:
    """Whether `error` says the table does not exist (PostgreSQL, MySQL, SQLite)."""
    error = getattr(error, "orig", None) or error
    if getattr(error, "sqlstate", None) == "42P01":
        return True
    args: tuple[Any, ...] = getattr(error, "args", ())
    if args and args[0] == 1146:
        return True
    return "no such table" in str(error)


def translate(error: BaseException, where: str) -> BaseException:
    """A driver's (or SQLAlchemy's) error as the bridge's.

    Wrong credentials or database, a bad URL option -> `ConfigError`; the server away, a
    broken connection, no free connection in the pool -> `EndpointUnavailableError`
    (retriable); any other database error -> `EndpointError`. Others are returned as is.
    """
    if isinstance(error, MQBridgeError):
        return error
    orig = getattr(error, "orig", None) or error
    text = str(orig).strip().splitlines()[0] if str(orig).strip() else type(orig).__name__
    names = _names(error) | _names(orig)
    if "TimeoutError" in names and "sqlalchemy" in type(error).__module__:
        return EndpointUnavailableError(
            f"{where}: no free connection in the pool within acquire_timeout_ms ({text})"
        )
    if names & {"OperationalError", "InterfaceError", "ProgrammingError"} and any(
        marker in text.lower() for marker in _CONFIG_MARKERS
    ):
        return ConfigError(f"{where}: {text}", path="sqlx.url")
    if is_connection_error(orig):
        return EndpointUnavailableError(f"{where}: {text}")
    if "DatabaseError" in names or ("Error" in names and "sqlalchemy" in type(error).__module__):
        return EndpointError(f"{where}: {text}")
    return error


# -- one held connection --------------------------------------------------------------------


class Session:
    """One pooled connection an endpoint holds, used under a lock, replaced when broken.

    ``run(work)`` calls ``work(connection)`` (which executes and commits); on an error it
    rolls back, and a broken connection is dropped. When a connection that had worked
    before breaks (the server restarted since), `work` is run once more on a new one; a
    failure there is raised as `EndpointUnavailableError`. `work` must therefore be safe to
    repeat: at worst a row is inserted twice (at least once), never lost.
    """

    def __init__(self, database: Database) -> None:
        self.database = database
        self._lock = database.lock or threading.Lock()
        self._connection: Any = None
        self._since = 0.0
        self._last_used = 0.0
        self._closed = False

    def run(self, work: Callable[[Any], T]) -> T:
        with self._lock:
            for attempt in (1, 2):
                if self._closed:
                    from mq_bridge.errors import ClosedError

                    raise ClosedError(f"{self.database.where}: the session is closed")
                connection, reused = self._current()
                try:
                    result = work(connection)
                except BaseException as error:
                    broken = is_connection_error(error)
                    self._rollback(connection, broken)
                    if broken and reused and attempt == 1:
                        log.info(
                            "%s: connection lost, retrying once: %s", self.database.where, error
                        )
                        continue
                    translated = translate(error, self.database.where)
                    if translated is error:
                        raise
                    raise translated from error
                self._last_used = time.monotonic()
                return result
        raise AssertionError("not reached")

    def _current(self) -> tuple[Any, bool]:
        """The held connection (True: it worked before), renewed when idle or old."""
        connection, now = self._connection, time.monotonic()
        if connection is not None:
            database = self.database
            stale = (
                database.idle_timeout > 0 and now - self._last_used > database.idle_timeout
            ) or (database.max_lifetime > 0 and now - self._since > database.max_lifetime)
            if not stale:
                return connection, True
            self._connection = None
            _close_quietly(connection)
        self._connection = checkout(self.database)
        self._since = self._last_used = now
        return self._connection, False

    def _rollback(self, connection: Any, broken: bool) -> None:
        if not broken:
            try:
                connection.rollback()
                return
            except Exception:
                pass
        self._connection = None
        try:
            connection.invalidate()
        except Exception:
            log.debug("%s: dropping a broken connection failed", self.database.where, exc_info=True)

    def close(self) -> None:
        """Hand the connection back to the pool. Idempotent."""
        with self._lock:
            self._closed = True
            connection, self._connection = self._connection, None
        if connection is not None:
            _close_quietly(connection)


def _close_quietly(connection: Any) -> None:
    try:
        connection.close()
    except Exception:
        log.debug("closing a pooled connection failed", exc_info=True)
