"""Acknowledge an input's batches in the order they were received, however they finish.

Middleware that changes batches (drops duplicates, holds messages back for a join) may
finish an inner batch before an earlier one: an input that takes acks in order only
(`acks_in_any_order` false: offsets, file positions) must still get them in order. Each
inner batch is queued when handed out; finished batches leave the queue from the front.
"""

from __future__ import annotations

import threading
from collections import deque

from mq_bridge.endpoints.base import Batch, InputEndpoint


class Pending:
    """One inner batch and how it finished: None while open, then "ack" or "nack"."""

    __slots__ = ("batch", "outcome")

    def __init__(self, batch: Batch) -> None:
        self.batch = batch
        self.outcome: str | None = None


class OrderedAcks:
    """Passes acks and nacks to `inner` in receive order (at once when it takes any order)."""

    def __init__(self, inner: InputEndpoint) -> None:
        self.inner = inner
        self._lock = threading.Lock()
        self._queue: deque[Pending] = deque()

    def handed_out(self, batch: Batch) -> Pending:
        """Track a batch just received from `inner`."""
        pending = Pending(batch)
        if not self.inner.acks_in_any_order:
            with self._lock:
                self._queue.append(pending)
        return pending

    def done(self, pending: Pending) -> None:
        """The batch was handled: ack it once every earlier batch has been settled."""
        self._settle(pending, "ack")

    def failed(self, pending: Pending) -> None:
        """The batch was not handled: nack it once every earlier batch has been settled."""
        self._settle(pending, "nack")

    @property
    def open_batches(self) -> int:
        with self._lock:
            return len(self._queue)

    def _settle(self, pending: Pending, outcome: str) -> None:
        if pending.outcome is not None:
            return
        if self.inner.acks_in_any_order:
            pending.outcome = outcome
            self._pass_on(pending)
            return
        with self._lock:
            pending.outcome = outcome
            while self._queue and self._queue[0].outcome is not None:
                self._pass_on(self._queue.popleft())

    def _pass_on(self, pending: Pending) -> None:
        if pending.outcome == "ack":
            self.inner.ack(pending.batch)
        else:
            self.inner.nack(pending.batch)
