"""The `sqlx` output: INSERTs, one transaction per `send`, returning after COMMIT."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from mq_bridge.endpoints.base import BuildContext, EndpointStatus, OutputEndpoint
from mq_bridge.endpoints.sqlx.codec import RowEncoder
from mq_bridge.endpoints.sqlx.connection import Session, acquire_database, begin, commit
from mq_bridge.endpoints.sqlx.dialects import (
    Dialect,
    Layout,
    MysqlDialect,
    PostgresDialect,
    SqliteDialect,
    bind_placeholders,
    dialect_for,
)
from mq_bridge.endpoints.sqlx.listen import notify_statement
from mq_bridge.endpoints.sqlx.options import SqlxOptions, table_parts
from mq_bridge.endpoints.sqlx.table import prepare_table
from mq_bridge.errors import ClosedError, ConfigError
from mq_bridge.message import Message

if TYPE_CHECKING:
    from mq_bridge.endpoints.kit.connections import Lease
    from mq_bridge.endpoints.sqlx.connection import Database

__all__ = ["SqlxOutput"]

log = logging.getLogger("mq_bridge.endpoints.sqlx")


class SqlxOutput(OutputEndpoint):
    """Writes each message as a row (payload; message_id and metadata where the table has
    those columns), or through the configured `insert_query` (payload only).

    `send` is one transaction: a batch goes in as one COPY (PostgreSQL; binary when the
    column types allow), multi-row INSERTs of hex literals (MariaDB), multi-row INSERTs of
    up to 500 rows (SQLite) or one ``executemany`` (an `insert_query`), then COMMIT; it
    returns once the database confirmed the COMMIT. With `listen_notify` a NOTIFY follows
    (`listen`). A
    lost connection fails the whole batch (`EndpointUnavailableError`, retriable); if the
    COMMIT was lost in flight, a retry may insert the batch twice (at least once), never
    lose it.
    """

    def __init__(self, options: SqlxOptions, context: BuildContext) -> None:
        self._options = options
        self._context = context
        self._parts = table_parts(options.table)
        self._dialect: Dialect = dialect_for(options.kind, self._parts)
        self._lease: Lease[Database] | None = None
        self._session: Session | None = None
        self._closed = False
        self._single = ""
        self._copy: str | None = None
        self._binary_copy: str | None = None  # COPY in the binary format (PostgreSQL)
        self._hex_inserts: MysqlDialect | None = None
        self._rows_per_insert = 0  # SQLite: multi-row INSERTs of up to this many rows
        self._inserts: dict[int, str] = {}  # row count -> its multi-row INSERT
        self._notify: str | None = None  # listen_notify: NOTIFY after a send
        self._single_notifying: str | None = None  # INSERT and NOTIFY in one statement
        self._layout = Layout(frozenset())
        self._encoder = RowEncoder(False, False)
        self._where = f"sqlx:{options.table}"

    def connect(self) -> None:
        self._closed = False
        if self._lease is not None:
            return
        lease = acquire_database(self._options, self._context.connections)
        session = Session(lease.connection)
        try:
            layout = prepare_table(
                session, self._dialect, self._options.table,
                self._options.auto_create_table, for_input=False,
            )  # fmt: skip
            self._prepare_statements(layout)
        except BaseException:
            session.close()
            lease.release()
            raise
        self._where = f"{lease.connection.where}/{self._options.table}"
        self._lease, self._session = lease, session

    def _prepare_statements(self, layout: Layout) -> None:
        query = self._options.insert_query
        self._copy = self._binary_copy = None
        self._hex_inserts = None
        self._rows_per_insert = 0
        self._inserts = {}
        self._single_notifying = None
        self._notify = None
        if self._options.listen_notify:
            self._notify = notify_statement(self._options.notify_channel)
        if query is not None:
            sql, count = bind_placeholders(query, self._dialect.placeholder)
            if count != 1:
                raise ConfigError(
                    f"insert_query must have exactly one placeholder (`?` or `$1`) for the "
                    f"payload; it has {count}",
                    path="sqlx.insert_query",
                )
            self._single = sql
            self._encoder = RowEncoder(False, False)
            return
        self._encoder = RowEncoder(layout.message_id, layout.metadata)
        self._single = self._dialect.insert(layout)
        self._layout = layout
        if isinstance(self._dialect, PostgresDialect):
            self._copy = self._dialect.copy(layout)
            self._binary_copy = self._dialect.binary_copy(layout)
            if self._notify is not None:
                channel = self._options.notify_channel
                self._single_notifying = (
                    f"WITH inserted AS ({self._single}) SELECT pg_notify('{channel}', '')"
                )
        elif isinstance(self._dialect, MysqlDialect):
            self._hex_inserts = self._dialect
        elif isinstance(self._dialect, SqliteDialect):
            # one statement per up to 500 rows: half the CPU of executemany's row-by-row
            # steps (measured 3.1 -> 1.5 us a row), within SQLite's parameter limit
            width = len(self._dialect.inserted(layout))
            self._rows_per_insert = min(500, self._dialect.max_parameters() // width)

    def _current_session(self) -> Session:
        if self._closed:
            raise ClosedError(f"{self._where} output is closed")
        if self._session is None:  # a reconnect failed earlier: try again (retriable)
            self.connect()
        assert self._session is not None
        return self._session

    def send(self, messages: Sequence[Message]) -> None:
        if not messages:
            return
        session = self._current_session()
        rows = self._encoder.rows(messages)
        session.run(lambda connection: self._insert(connection, rows))

    def send_one(self, message: Message) -> None:
        session = self._current_session()
        (row,) = self._encoder.rows((message,))
        session.run(lambda connection: self._insert_one(connection, row))

    def _insert_one(self, connection: Any, row: tuple[Any, ...]) -> None:
        cursor = connection.cursor()
        try:
            if self._single_notifying is not None:
                cursor.execute(self._single_notifying, row)
            else:
                cursor.execute(self._single, row)
                self._notify_after(cursor)
        finally:
            cursor.close()
        commit(connection, self._dialect)

    def _notify_after(self, cursor: Any) -> None:
        """`listen_notify`: NOTIFY once the rows are committed (the connection autocommits).
        A failure is not the send's: the rows are in, and inputs still poll."""
        if self._notify is None:
            return
        try:
            cursor.execute(self._notify)
        except Exception as error:
            log.info("%s: NOTIFY failed (inputs find the rows at their next poll): %s",
                     self._where, error)  # fmt: skip

    def _insert(self, connection: Any, rows: list[tuple[Any, ...]]) -> None:
        cursor = connection.cursor()
        began = False
        try:
            if len(rows) == 1 and self._single_notifying is not None:
                cursor.execute(self._single_notifying, rows[0])
            elif len(rows) == 1:
                cursor.execute(self._single, rows[0])
            elif self._binary_copy is not None:
                assert isinstance(self._dialect, PostgresDialect)
                data = self._dialect.binary_copy_data(self._layout, rows)
                with cursor.copy(self._binary_copy) as copy:  # one statement
                    copy.write(data)
            elif self._copy is not None:
                with cursor.copy(self._copy) as copy:  # one statement: its own transaction
                    for row in rows:
                        copy.write_row(row)
            elif self._hex_inserts is not None:
                statements = self._hex_inserts.insert_statements(self._layout, rows)
                began = len(statements) > 1 and begin(cursor, self._dialect)
                for statement in statements:
                    cursor.execute(statement)
            elif self._rows_per_insert:
                began = begin(cursor, self._dialect)  # (SQLite's module opens one itself)
                step = self._rows_per_insert
                for start in range(0, len(rows), step):
                    chunk = rows[start : start + step]
                    cursor.execute(self._insert_of(len(chunk)), [v for row in chunk for v in row])
            else:
                began = begin(cursor, self._dialect)
                cursor.executemany(self._single, rows)
            commit(connection, self._dialect, began)
            if self._single_notifying is None or len(rows) > 1:
                self._notify_after(cursor)
        finally:
            cursor.close()

    def _insert_of(self, count: int) -> str:
        statement = self._inserts.get(count)
        if statement is None:
            statement = self._dialect.insert(self._layout, count)
            if len(self._inserts) < 8:  # a full chunk and a few remainders
                self._inserts[count] = statement
        return statement

    def status(self) -> EndpointStatus:
        target = self.describe()
        if self._session is None:
            error = "closed" if self._closed else "not connected"
            return EndpointStatus(healthy=False, target=target, error=error)
        database = self._session.database
        details = {"database": database.kind, "table": self._options.table}
        return EndpointStatus(healthy=True, target=target, details=details)

    def describe(self) -> str:
        return self._where

    def close(self) -> None:
        self._closed = True
        session, self._session = self._session, None
        lease, self._lease = self._lease, None
        if session is not None:
            session.close()
        if lease is not None:
            lease.release()
