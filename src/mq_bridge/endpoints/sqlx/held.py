"""PostgreSQL with `delete_after_read`: a claim is a DELETE held open until the ack.

The lease protocol (`dialects`) writes every row twice: the claim UPDATEs ``locked_until``
(a new row version and two index entries, as the column is indexed) and the ack DELETEs
it. With `delete_after_read` on PostgreSQL a batch is claimed by deleting it instead,
inside a transaction left open until the batch is settled::

    claim   BEGIN; SET LOCAL idle_in_transaction_session_timeout = <lease_ms>;
            DELETE FROM t WHERE id IN (SELECT id FROM t WHERE <ready> ORDER BY id
                                       LIMIT n FOR UPDATE SKIP LOCKED) RETURNING ...
            (one round trip; the rows stay locked by this transaction)
    ack     COMMIT      nack, close: ROLLBACK (the rows are ready again at once)

so each row is written once (measured ~1.7x the claim + ack rate of the lease protocol
here). The safety is the lease protocol's: other consumers (ours with either protocol,
and mq-bridge's) skip locked rows, so no row is taken twice; a consumer that dies drops
its connection and the server rolls back (its rows are ready at once, not after the
lease); one that hangs is cut off by the server after `lease_ms` idle in the transaction
(``idle_in_transaction_session_timeout``), which rolls back too. An ack whose COMMIT fails
(the connection broke) leaves the rows in the table: delivered again, never lost.

A transaction needs its connection until it ends, so each held batch has a `Slot` (a
pooled connection of its own): two per input, one handed out and one claimed ahead
(`ahead`). When both are busy (the caller holds more unsettled batches), or the shared
pool has no free connection for a slot, the input falls back to a lease claim on its own
connection (it never waits for a connection).
"""

from __future__ import annotations

import logging
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from typing import Any

from mq_bridge.endpoints.sqlx.connection import Database, checkout, is_connection_error, translate
from mq_bridge.errors import EndpointUnavailableError

__all__ = ["HeldBatch", "Slot", "SlotPool"]

log = logging.getLogger("mq_bridge.endpoints.sqlx")

Rows = list[tuple[Any, ...]]

#: idle_in_transaction_session_timeout is an int4 of milliseconds
_MAX_TIMEOUT_MS = 2_147_483_647


class HeldBatch:
    """Rows deleted by one open transaction on `slot`: settled all at once."""

    __slots__ = ("ids", "rows", "slot", "transaction")

    def __init__(self, slot: Slot, rows: Rows, transaction: int) -> None:
        self.slot = slot
        self.rows = rows
        self.ids = [row[0] for row in rows]
        self.transaction = transaction  # which of the slot's transactions holds them


class Slot:
    """One pooled connection that holds at most one claim's transaction at a time.

    No retry on a new connection (unlike `Session`): a transaction cannot move, and a
    COMMIT on a fresh connection would "succeed" without committing anything.
    """

    def __init__(self, database: Database, claim_sql: str) -> None:
        self._database = database
        self._claim_sql = claim_sql  # with {limit} to fill in (an int: nothing to escape)
        self._connection: Any = None
        self._since = self._last_used = 0.0
        self._transaction = 0  # counts the claims that held rows
        self._holding = False  # a transaction with rows is open
        self._lock = threading.Lock()
        self.busy = False  # claiming, or holding a transaction (guarded by SlotPool's lock)

    @property
    def connected(self) -> bool:
        return self._connection is not None

    def claim(self, limit: int) -> HeldBatch | None:
        """Claim up to `limit` rows; None when there were none (nothing held)."""
        sql = self._claim_sql.format(limit=int(limit))
        with self._lock:
            self._renew_if_stale()
            for attempt in (1, 2):
                reused = self._connection is not None
                if not reused:
                    self._connection = checkout(self._database)
                    self._since = time.monotonic()
                try:
                    rows = _run_claim(self._connection, sql)
                    break
                except BaseException as error:
                    self._drop(error)
                    # nothing was held: safe to repeat on a new connection (after a restart)
                    if not (reused and attempt == 1 and is_connection_error(error)):
                        raise self._translated(error) from error
            self._last_used = time.monotonic()
            if not rows:
                return None
            self._transaction += 1
            self._holding = True
            transaction = self._transaction
        rows.sort(key=_row_id)
        return HeldBatch(self, rows, transaction)

    def _renew_if_stale(self) -> None:
        """`idle_timeout_ms` / `max_lifetime_ms`, as `Session` keeps them (nothing is held
        between claims, so the connection may be swapped)."""
        connection, now = self._connection, time.monotonic()
        if connection is None:
            return
        database = self._database
        idle = database.idle_timeout > 0 and now - self._last_used > database.idle_timeout
        old = database.max_lifetime > 0 and now - self._since > database.max_lifetime
        if idle or old:
            self._connection = None
            try:
                connection.close()
            except Exception:
                log.debug("closing a stale claim connection failed", exc_info=True)

    def end(self, held: HeldBatch, commit: bool) -> bool:
        """COMMIT (ack) or ROLLBACK (give back) `held`'s transaction. False, and nothing
        sent, when that transaction is not the one open here (settled already: the slot
        may hold another batch by now, whose transaction this must not end)."""
        with self._lock:
            if not (self._holding and held.transaction == self._transaction):
                return False
            self._holding = False
            connection = self._connection
            if connection is None:  # broken since: the server rolled it back
                raise self._translated(ConnectionError("the claim's connection was lost"))
            try:
                cursor = connection.cursor()
                try:
                    cursor.execute("COMMIT" if commit else "ROLLBACK")
                    # a COMMIT of an aborted transaction answers ROLLBACK, not an error
                    ended = cursor.statusmessage
                finally:
                    cursor.close()
                if commit and ended != "COMMIT":
                    raise EndpointUnavailableError(
                        f"{self._database.where}: the claim's transaction was rolled back "
                        f"({ended}): its rows are ready again"
                    )
            except BaseException as error:
                self._drop(error)
                raise self._translated(error) from error
        return True

    def _drop(self, error: BaseException) -> None:
        """After an error the transaction is gone or aborted: roll back, or drop the
        connection when it broke."""
        connection = self._connection
        if connection is None:
            return
        if not is_connection_error(error):
            try:
                connection.cursor().execute("ROLLBACK")
                return
            except Exception:
                pass
        self._connection = None
        try:
            connection.invalidate()
        except Exception:
            log.debug("dropping a broken claim connection failed", exc_info=True)

    def _translated(self, error: BaseException) -> BaseException:
        if isinstance(error, ConnectionError):
            return EndpointUnavailableError(f"{self._database.where}: {error}")
        return translate(error, self._database.where)

    def close(self) -> None:
        """Roll back whatever is held and hand the connection back to the pool."""
        with self._lock:
            connection, self._connection = self._connection, None
            self._holding = False
        if connection is None:
            return
        try:
            connection.cursor().execute("ROLLBACK")  # a warning only when nothing is held
            connection.close()
        except Exception:
            try:
                connection.invalidate()
            except Exception:
                log.debug("closing a claim connection failed", exc_info=True)


class SlotPool:
    """The input's slots: hands out a free one, takes it back when its batch is settled."""

    def __init__(self, database: Database, claim_sql: str, lease_ms: int, size: int = 2) -> None:
        timeout = min(max(lease_ms, 1), _MAX_TIMEOUT_MS)
        sql = f"BEGIN; SET LOCAL idle_in_transaction_session_timeout = {timeout}; {claim_sql}"
        self._database = database
        self._slots = [Slot(database, sql) for _ in range(size)]
        self._lock = threading.Lock()
        self._ahead: Future[HeldBatch | None] | None = None
        self._executor: ThreadPoolExecutor | None = None

    def claim(self, limit: int) -> HeldBatch | bool | None:
        """Claim on a free slot: the batch, None when no row was ready, False when every
        slot holds a batch (the caller claims by lease instead)."""
        slot = self._reserve()
        if slot is None:
            return False
        if not slot.connected and not _pool_has_room(self._database):
            self._free(slot)  # never wait for a connection: the lease claim needs none
            return False
        try:
            held = slot.claim(limit)
        except BaseException:
            self._free(slot)
            raise
        if held is None:
            self._free(slot)
        return held

    def settle(self, held: HeldBatch, commit: bool) -> None:
        """COMMIT or ROLLBACK `held`'s transaction; its slot is free again either way.
        A batch settled already is refused: its slot may hold another batch by now, whose
        transaction must not be ended by this one's ack."""
        try:
            ended = held.slot.end(held, commit)
        except BaseException:
            self._free(held.slot)
            raise
        if not ended:
            raise EndpointUnavailableError(
                f"{self._database.where}: the batch was settled already (acked, nacked or "
                "given back); this ack or nack cannot apply"
            )
        self._free(held.slot)

    def _reserve(self) -> Slot | None:
        with self._lock:
            for slot in self._slots:
                if not slot.busy:
                    slot.busy = True
                    return slot
        return None

    def _free(self, slot: Slot) -> None:
        with self._lock:
            slot.busy = False

    # -- one claim ahead (see `ahead`: the same policy) ----------------------------------

    def start_ahead(self, limit: int) -> None:
        """Claim up to `limit` rows in the background on a free slot, unless a claim ahead
        is in flight or held, or no slot is free."""
        with self._lock:
            if self._ahead is not None:
                return
            if self._executor is None:
                self._executor = ThreadPoolExecutor(1, thread_name_prefix="mqb-sqlx-ahead")
            self._ahead = self._executor.submit(self._claim_quietly, limit)

    def _claim_quietly(self, limit: int) -> HeldBatch | None:
        try:
            held = self.claim(limit)
        except Exception as error:  # the caller's own claim will meet it, if it lasts
            log.info("a claim ahead failed: %s", error)
            return None
        return held if isinstance(held, HeldBatch) else None

    def take_ahead(self, limit: int, timeout: float | None) -> HeldBatch | None:
        """The batch claimed ahead, if there is one, it came within `timeout` seconds and
        it has at most `limit` rows (a larger one is given back: a transaction is settled
        whole, so it is never split)."""
        with self._lock:
            ahead = self._ahead
        if ahead is None:
            return None
        try:
            held = ahead.result(timeout)
        except FutureTimeout:
            return None
        with self._lock:
            if self._ahead is not ahead:  # a nack's drain_ahead took it (and gave it back)
                return None
            self._ahead = None
        if held is not None and len(held.rows) > limit:
            self._give_back(held)
            return None
        return held

    def drain_ahead(self) -> None:
        """Give back the batch claimed ahead (waiting for a claim in flight)."""
        with self._lock:
            ahead, self._ahead = self._ahead, None
        held = ahead.result() if ahead is not None else None
        if held is not None:
            self._give_back(held)

    def _give_back(self, held: HeldBatch) -> None:
        try:
            self.settle(held, commit=False)
        except Exception as error:  # the server rolls back a broken connection's claim
            log.info("giving back a claim ahead failed: %s", error)

    def close(self) -> None:
        """Give back everything held (ROLLBACK) and hand the connections back."""
        self.drain_ahead()
        executor, self._executor = self._executor, None
        if executor is not None:
            executor.shutdown(wait=True)
        for slot in self._slots:
            slot.close()


def _pool_has_room(database: Database) -> bool:
    """Whether the pool can hand out a connection without waiting (slots are extra
    connections: when endpoints sharing the pool use them all, the input claims by lease
    on its own connection instead of waiting `acquire_timeout_ms`)."""
    pool: Any = database.engine.pool
    try:
        return bool(pool.checkedout() < pool.size())
    except AttributeError:  # a pool without those counts
        return True


def _run_claim(connection: Any, sql: str) -> Rows:
    cursor = connection.cursor()
    try:
        cursor.execute(sql)
        while cursor.nextset():  # BEGIN, SET LOCAL, then the DELETE's rows
            pass
        rows: Rows = list(cursor.fetchall())
        if not rows:
            cursor.execute("ROLLBACK")
    finally:
        cursor.close()
    return rows


def _row_id(row: tuple[Any, ...]) -> Any:
    return row[0]
