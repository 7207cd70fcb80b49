"""`listen_notify` (PostgreSQL): the input wakes when an output says it committed rows.

An output with `listen_notify` sends ``NOTIFY <channel>`` after each send (in the INSERT's
own statement for one message, right after the COPY for a batch); PostgreSQL delivers it
when that transaction commits, so a woken input finds the rows. The input LISTENs on a
connection of its own (taken from the pool and detached from it: it is never handed back,
as its LISTEN would go with it) and a thread sets the input's wake-up event on every
notification. Polling stays: a notification lost (the listener reconnecting, a writer
without `listen_notify`) costs at most `polling_interval_ms`, never a row.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from mq_bridge.endpoints.sqlx.connection import Database, checkout

__all__ = ["Listener", "notify_statement"]

log = logging.getLogger("mq_bridge.endpoints.sqlx")

#: how often the listening thread looks up from its socket (to notice close)
_TICK = 0.25
_MAX_BACKOFF = 5.0


def notify_statement(channel: str) -> str:
    """``NOTIFY "<channel>"`` (channels are made of a validated table name: no quotes)."""
    return f'NOTIFY "{channel}"'


class Listener:
    """LISTENs on `channel` and calls `wake` on every notification (and after a
    reconnect, as notifications may have been missed meanwhile)."""

    def __init__(self, database: Database, channel: str, wake: Callable[[], None]) -> None:
        self._database = database
        self._channel = channel
        self._wake = wake
        self._stopped = threading.Event()
        self._connection: Any = self._listen()  # at connect: a wrong setup fails there
        self._thread = threading.Thread(
            target=self._run, name=f"mqb-sqlx-listen-{channel}", daemon=True
        )
        self._thread.start()

    def _listen(self) -> Any:
        proxy = checkout(self._database)
        connection = proxy.driver_connection
        proxy.detach()  # ours for good: the pool makes another in its place
        connection.execute(f'LISTEN "{self._channel}"')
        return connection

    def _run(self) -> None:
        backoff = _TICK
        while not self._stopped.is_set():
            try:
                if self._connection is None:
                    self._connection = self._listen()
                    backoff = _TICK
                    self._wake()  # notifications may have come while we were away
                for _ in self._connection.notifies(timeout=_TICK):
                    self._wake()
            except Exception as error:
                log.info("%s: LISTEN connection lost, polling meanwhile: %s", self._where, error)
                self._drop()
                self._stopped.wait(backoff)
                backoff = min(backoff * 2, _MAX_BACKOFF)
        self._drop()

    @property
    def _where(self) -> str:
        return self._database.where

    def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            try:
                connection.close()
            except Exception:
                log.debug("closing the LISTEN connection failed", exc_info=True)

    def close(self) -> None:
        """Stop listening (the thread ends, closing its connection, within a tick)."""
        self._stopped.set()
