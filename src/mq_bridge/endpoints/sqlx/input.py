"""The `sqlx` input: claims rows with a lease, acks by DELETE or by marking them processed."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from operator import itemgetter
from typing import TYPE_CHECKING, Any

from mq_bridge.endpoints.base import Batch, BuildContext, EndpointStatus, InputEndpoint
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.endpoints.sqlx.ahead import ReadAhead
from mq_bridge.endpoints.sqlx.codec import RowDecoder
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
from mq_bridge.endpoints.sqlx.held import HeldBatch, SlotPool
from mq_bridge.endpoints.sqlx.listen import Listener
from mq_bridge.endpoints.sqlx.options import SqlxOptions, table_parts
from mq_bridge.endpoints.sqlx.table import prepare_table
from mq_bridge.errors import ClosedError, ConfigError, EndpointUnavailableError

if TYPE_CHECKING:
    from mq_bridge.endpoints.kit.connections import Lease
    from mq_bridge.endpoints.sqlx.connection import Database

__all__ = ["SqlxInput"]

log = logging.getLogger("mq_bridge.endpoints.sqlx")

Rows = list[tuple[Any, ...]]
_BY_ID = itemgetter(0)


class SqlxInput(InputEndpoint):
    """A competing consumer of a queue table (see `dialects` for the claim protocol).

    `receive` claims up to `max` ready rows (lowest ids first) in one short transaction
    that leases them for `lease_ms`; when there are none it polls every
    `polling_interval_ms` (backing off to `max_polling_interval_ms` if set) until the
    timeout. `ack` deletes the rows (`delete_after_read`) or marks them processed; `nack`
    and `close` make unacked rows ready again at once. A consumer that dies without either
    leaves its rows leased: they are ready again when the lease runs out. On a server, a
    full batch starts the next claim ahead (`ahead.ReadAhead`). Acks may come
    in any order and from another thread; an ack that cannot reach the server is kept and
    sent before the next claim (meanwhile the rows stay leased: at least once).

    On PostgreSQL with `delete_after_read` a claim is a DELETE held in an open transaction
    on a slot of its own (`held.SlotPool`; ack = COMMIT, nack/close = ROLLBACK), and with
    `listen_notify` a `listen.Listener` wakes a waiting `receive` on NOTIFY.
    """

    acks_in_any_order = True

    def __init__(self, options: SqlxOptions, context: BuildContext) -> None:
        self._options = options
        self._context = context
        self._parts = table_parts(options.table)
        self._dialect: Dialect = dialect_for(options.kind, self._parts)
        self._source = options.source_metadata or context.source_metadata
        self._lease: Lease[Database] | None = None
        self._session: Session | None = None
        self._ahead: ReadAhead | None = None
        self._slots: SlotPool | None = None  # PostgreSQL + delete_after_read (see `held`)
        self._held_out: set[HeldBatch] = set()
        self._listener: Listener | None = None  # listen_notify
        self._claim: Callable[[Any, int], Rows] | None = None
        self._decoder = RowDecoder(options.table, False, False)
        self._closed = False
        self._wakeup = Wakeup()
        self._pause = options.polling_interval
        self._outstanding: set[int] = set()
        self._unsent_acks: list[int] = []
        self._lock = threading.Lock()
        self._where = f"sqlx:{options.table}"

    # -- lifecycle ------------------------------------------------------------------------

    def connect(self) -> None:
        """Reach the database and check (or create) the table; raises if either fails."""
        self._closed = False
        if self._lease is not None:
            return
        lease = acquire_database(self._options, self._context.connections)
        session = Session(lease.connection)
        try:
            self._claim = self._prepare(session, lease.connection)
        except BaseException:
            session.close()
            lease.release()
            raise
        if self._options.listen_notify:
            try:
                self._listener = Listener(
                    lease.connection, self._options.notify_channel, self._wakeup.nudge
                )
            except BaseException:
                session.close()
                lease.release()
                raise
        self._where = f"{lease.connection.where}/{self._options.table}"
        if self._dialect.name != "sqlite" and self._slots is None:  # SQLite: one writer
            self._ahead = ReadAhead(lease.connection, self._claim, self._track)
        self._lease, self._session = lease, session

    def _prepare(self, session: Session, database: Database) -> Callable[[Any, int], Rows]:
        options = self._options
        custom = options.select_query is not None
        layout = prepare_table(
            session, self._dialect, options.table, options.auto_create_table,
            for_input=not custom,
        )  # fmt: skip
        if custom:
            return self._custom_claim()
        self._decoder = RowDecoder(options.table, layout.message_id, layout.metadata)
        if isinstance(self._dialect, PostgresDialect) and options.delete_after_read:
            lease_ms = int(options.lease_seconds * 1000)
            self._slots = SlotPool(database, self._dialect.claim_by_delete(layout), lease_ms)
        return self._claim_for(layout, database)

    def _claim_for(self, layout: Layout, database: Database) -> Callable[[Any, int], Rows]:
        dialect, lease = self._dialect, self._options.lease_seconds
        if isinstance(dialect, PostgresDialect):
            sql, lease_ms = dialect.claim(layout), int(lease * 1000)

            def claim(connection: Any, limit: int) -> Rows:
                rows = _fetch(connection, sql, (limit, lease_ms))
                rows.sort(key=_BY_ID)
                return rows

        elif isinstance(dialect, MysqlDialect):
            select = dialect.select_for_claim(layout, database.skip_locked)
            lease_us = int(lease * 1_000_000)

            def claim(connection: Any, limit: int) -> Rows:
                cursor = connection.cursor()
                try:
                    cursor.execute("BEGIN")  # autocommit otherwise: the lock must last
                    cursor.execute(select, (limit,))
                    rows = list(cursor.fetchall())
                    if rows:
                        ids = [row[0] for row in rows]
                        cursor.execute(dialect.lease(len(ids)), (lease_us, *ids))
                finally:
                    cursor.close()
                connection.commit()
                return rows

        else:
            assert isinstance(dialect, SqliteDialect)
            sql, span = dialect.claim(layout), f"+{lease:.3f} seconds"

            def claim(connection: Any, limit: int) -> Rows:
                rows = _fetch(connection, sql, (span, limit))
                rows.sort(key=_BY_ID)
                return rows

        return claim

    def _custom_claim(self) -> Callable[[Any, int], Rows]:
        """`select_query`: the batch size bound to its one placeholder; columns by name."""
        query = self._options.select_query or ""
        sql, count = bind_placeholders(query, self._dialect.placeholder)
        if count != 1:
            raise ConfigError(
                f"select_query must have exactly one placeholder (`$1` or `?`) for the batch "
                f"size; it has {count}",
                path="sqlx.select_query",
            )

        def claim(connection: Any, limit: int) -> Rows:
            cursor = connection.cursor()
            try:
                cursor.execute(sql, (limit,))
                names = [str(column[0]).lower() for column in cursor.description or ()]
                rows = list(cursor.fetchall())
            finally:
                cursor.close()
            connection.commit()
            return self._reshape(names, rows)

        return claim

    def _reshape(self, names: list[str], rows: Rows) -> Rows:
        """Rows of a custom query as ``(id, payload, message_id, metadata)``."""
        if "id" not in names or "payload" not in names:
            raise ConfigError(
                f"select_query must return `id` and `payload` columns; it returned {names}",
                path="sqlx.select_query",
            )
        picks = [names.index(name) if name in names else None for name in (
            "id", "payload", "message_id", "metadata",
        )]  # fmt: skip
        shape = (picks[2] is not None, picks[3] is not None)
        if shape != (self._decoder.has_message_id, self._decoder.has_metadata):
            self._decoder = RowDecoder(self._options.table, *shape)
        kept = [pick for pick in picks if pick is not None]
        return [tuple(row[pick] for pick in kept) for row in rows]

    def _current_session(self) -> Session:
        if self._closed:
            raise ClosedError(f"{self._where} input is closed")
        if self._session is None:  # a reconnect failed earlier: try again (retriable)
            self.connect()
        assert self._session is not None
        return self._session

    # -- reading --------------------------------------------------------------------------

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        session = self._current_session()
        claim = self._claim
        assert claim is not None
        if max_messages <= 0:
            return Batch([])
        wakeup = self._wakeup
        deadline = None if timeout is None else time.monotonic() + timeout
        ahead, slots = self._ahead, self._slots
        if ahead is not None:
            taken = ahead.take(max_messages, timeout)
            if taken:
                wakeup.consume()  # these answer an interrupt
                return self._batch(taken, max_messages)
        if slots is not None:
            held = slots.take_ahead(max_messages, timeout)
            if held is not None:
                wakeup.consume()
                return self._held_batch(held, max_messages)
        while True:
            if self._unsent_acks:
                self._send_unsent_acks(session)
            rows: Rows | None = None
            if slots is not None:
                claimed = slots.claim(max_messages)
                if isinstance(claimed, HeldBatch):
                    wakeup.consume()
                    self._pause = self._options.polling_interval
                    return self._held_batch(claimed, max_messages)
                if claimed is None:
                    rows = []  # none ready; False: every slot holds a batch: lease instead
            if rows is None:
                rows = session.run(lambda connection: claim(connection, max_messages))
            interrupted = wakeup.consume()  # rows claimed meanwhile answer it
            if rows:
                self._pause = self._options.polling_interval
                return self._batch(rows, max_messages)
            remaining = None if deadline is None else deadline - time.monotonic()
            if interrupted or (remaining is not None and remaining <= 0):
                return Batch([])
            pause = self._pause
            woken = wakeup.pause(pause if remaining is None else min(pause, remaining))
            if self._closed:
                raise ClosedError(f"{self._where} input is closed")
            if woken:  # a notification (listen_notify) or interrupt(): claim again now
                continue
            # drained: back off (while it stays drained, across receives) up to the max
            self._pause = min(pause * 2, self._options.max_polling_interval)

    def _batch(self, rows: Rows, asked: int) -> Batch:
        """The batch of `rows`; a full one (a backlog) starts the next claim ahead."""
        ids = self._track(rows)
        if len(rows) == asked and self._ahead is not None:
            self._ahead.start(asked)
        return Batch(self._decoder.messages(rows, self._source), ids)

    def _held_batch(self, held: HeldBatch, asked: int) -> Batch:
        """The batch of a held claim; a full one starts the next claim ahead."""
        with self._lock:
            self._held_out.add(held)
        if len(held.rows) == asked and self._slots is not None:
            self._slots.start_ahead(asked)
        return Batch(self._decoder.messages(held.rows, self._source), held)

    def _track(self, rows: Rows) -> list[int]:
        """Count `rows` as handed out (nack and close give back what is not acked)."""
        ids = [row[0] for row in rows]
        with self._lock:
            self._outstanding.update(ids)
        return ids

    # -- settling -------------------------------------------------------------------------

    def ack(self, batch: Batch) -> None:
        """Delete the rows (`delete_after_read`) or mark them processed."""
        if isinstance(batch.token, HeldBatch):
            self._current_session()  # ClosedError once closed
            self._settle_held(batch.token, commit=True)
            return
        ids: list[int] = batch.token or []
        if not ids:
            return
        session = self._current_session()
        with self._lock:
            self._outstanding.difference_update(ids)
        try:
            self._settle(session, ids, acked=True)
        except EndpointUnavailableError as error:
            log.warning("%s: ack failed, kept for the next claim: %s", self._where, error)
            with self._lock:
                self._unsent_acks.extend(ids)

    def nack(self, batch: Batch) -> None:
        """Make the rows ready again at once (they come back in id order: rows claimed
        ahead are given back too, so they do not overtake the nacked ones)."""
        if self._slots is not None:
            self._slots.drain_ahead()
        if isinstance(batch.token, HeldBatch):
            self._current_session()  # ClosedError once closed
            self._settle_held(batch.token, commit=False)
            return
        ids: list[int] = batch.token or []
        if not ids:
            return
        if self._ahead is not None:
            ids = [*ids, *(row[0] for row in self._ahead.drain())]
        with self._lock:
            self._outstanding.difference_update(ids)
        session = self._current_session()
        try:
            self._settle(session, ids, acked=False)
        except EndpointUnavailableError as error:
            log.warning(
                "%s: nack failed; the rows return when their lease ends: %s", self._where, error
            )

    def _settle_held(self, held: HeldBatch, commit: bool) -> None:
        """COMMIT (ack) or ROLLBACK (nack) a held claim. When its connection broke, the
        server rolled it back: the rows are ready again (delivered again, not lost)."""
        with self._lock:
            self._held_out.discard(held)
        slots = self._slots
        if slots is None:
            return
        try:
            slots.settle(held, commit)
        except EndpointUnavailableError as error:
            action = "ack" if commit else "nack"
            log.warning("%s: %s failed, its rows are ready again: %s", self._where, action, error)

    def _settle(self, session: Session, ids: Sequence[int], acked: bool) -> None:
        dialect = self._dialect
        if not acked:
            statement = dialect.release
        elif self._options.delete_after_read:
            statement = dialect.delete
        else:
            statement = dialect.mark_processed
        step = dialect.max_ids

        def settle(connection: Any) -> None:
            cursor = connection.cursor()
            began = False
            try:
                began = len(ids) > step and begin(cursor, dialect)  # one transaction
                for start in range(0, len(ids), step):
                    chunk = ids[start : start + step]
                    cursor.execute(statement(len(chunk)), dialect.id_parameters(chunk))
            finally:
                cursor.close()
            commit(connection, dialect, began)

        session.run(settle)

    def _send_unsent_acks(self, session: Session) -> None:
        with self._lock:
            ids, self._unsent_acks = self._unsent_acks, []
        try:
            self._settle(session, ids, acked=True)
        except BaseException:
            with self._lock:
                self._unsent_acks[:0] = ids
            raise

    # -- the rest -------------------------------------------------------------------------

    def status(self) -> EndpointStatus:
        target = self.describe()
        session = self._session
        if session is None:
            error = "closed" if self._closed else "not connected"
            return EndpointStatus(healthy=False, target=target, error=error)
        try:
            # rows claimed ahead are not ready for others, but still to come from here
            ahead = self._ahead.count() if self._ahead is not None else 0
            ready = session.run(lambda connection: _count(connection, self._dialect.pending()))
            # rows deleted by our open claims still count as there for others: those
            # handed out are not pending (those claimed ahead are, still to come)
            with self._lock:
                held_out = sum(len(held.ids) for held in self._held_out)
            pending = max(0, ready + ahead - held_out)
        except Exception as error:
            return EndpointStatus(healthy=False, target=target, error=str(error))
        details = {
            "database": session.database.kind,
            "table": self._options.table,
            "in_flight": len(self._outstanding) + held_out,
        }
        return EndpointStatus(healthy=True, target=target, pending=pending, details=details)

    def describe(self) -> str:
        return self._where

    def interrupt(self) -> None:
        self._wakeup.interrupt()

    def close(self) -> None:
        """Send kept acks, make unacked rows ready again, hand the connection back."""
        self._closed = True
        self._wakeup.nudge()  # a waiting receive sees it closed
        session, self._session = self._session, None
        lease, self._lease = self._lease, None
        ahead, self._ahead = self._ahead, None
        slots, self._slots = self._slots, None
        listener, self._listener = self._listener, None
        if listener is not None:
            listener.close()
        if ahead is not None:
            ahead.drain()  # its rows are in _outstanding: given back below
            ahead.close()
        if slots is not None:
            slots.close()  # ROLLBACK: held rows are ready again at once
            with self._lock:
                self._held_out.clear()
        if session is None:
            return
        with self._lock:
            unacked, self._outstanding = sorted(self._outstanding), set()
        try:
            if self._unsent_acks:
                self._send_unsent_acks(session)
            if unacked:
                self._settle(session, unacked, acked=False)
        except Exception as error:  # they stay leased: ready again when the lease ends
            log.info("%s: could not hand rows back on close: %s", self._where, error)
        finally:
            session.close()
            if lease is not None:
                lease.release()


def _fetch(connection: Any, sql: str, parameters: tuple[Any, ...]) -> Rows:
    cursor = connection.cursor()
    try:
        cursor.execute(sql, parameters)
        rows = list(cursor.fetchall())
    finally:
        cursor.close()
    connection.commit()
    return rows


def _count(connection: Any, sql: str) -> int:
    cursor = connection.cursor()
    try:
        cursor.execute(sql)
        (count,) = cursor.fetchone()
    finally:
        cursor.close()
    connection.commit()
    return int(count)
