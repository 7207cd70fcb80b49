"""The `sqlx` output: INSERTs, one transaction per `send`, returning after COMMIT."""

from __future__ import annotations

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
    bind_placeholders,
    dialect_for,
)
from mq_bridge.endpoints.sqlx.options import SqlxOptions, table_parts
from mq_bridge.endpoints.sqlx.table import prepare_table
from mq_bridge.errors import ClosedError, ConfigError
from mq_bridge.message import Message

if TYPE_CHECKING:
    from mq_bridge.endpoints.kit.connections import Lease
    from mq_bridge.endpoints.sqlx.connection import Database

__all__ = ["SqlxOutput"]


class SqlxOutput(OutputEndpoint):
    """Writes each message as a row (payload; message_id and metadata where the table has
    those columns), or through the configured `insert_query` (payload only).

    `send` is one transaction: a batch goes in as one COPY (PostgreSQL) or one
    ``executemany`` (PyMySQL rewrites it into multi-row INSERTs; SQLite; PostgreSQL with an
    `insert_query`), then COMMIT; it returns once the database confirmed the COMMIT. A
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
        self._hex_inserts: MysqlDialect | None = None
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
        self._copy = None
        self._hex_inserts = None
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
        elif isinstance(self._dialect, MysqlDialect):
            self._hex_inserts = self._dialect

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
            cursor.execute(self._single, row)
        finally:
            cursor.close()
        commit(connection, self._dialect)

    def _insert(self, connection: Any, rows: list[tuple[Any, ...]]) -> None:
        cursor = connection.cursor()
        began = False
        try:
            if len(rows) == 1:
                cursor.execute(self._single, rows[0])
            elif self._copy is not None:
                with cursor.copy(self._copy) as copy:  # one statement: its own transaction
                    for row in rows:
                        copy.write_row(row)
            elif self._hex_inserts is not None:
                statements = self._hex_inserts.insert_statements(self._layout, rows)
                began = len(statements) > 1 and begin(cursor, self._dialect)
                for statement in statements:
                    cursor.execute(statement)
            else:
                began = begin(cursor, self._dialect)
                cursor.executemany(self._single, rows)
        finally:
            cursor.close()
        commit(connection, self._dialect, began)

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
