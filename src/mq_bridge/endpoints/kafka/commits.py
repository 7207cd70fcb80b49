"""A group member's partitions and the offsets it acknowledged: what the `kafka` input commits.

Kafka commits are cumulative per partition: committing offset N says "everything before N
is done". So the input keeps, per partition it owns, the offset after the last record of the
last acked batch (`acked`), has it sent to the group coordinator, and forgets it only once
the coordinator confirmed it::

    ack(batch) ──> acked: {(topic, partition): last offset + 1}   (only owned partitions)
                     │  stored in librdkafka (`store_offsets`: local, no request), which
                     │  commits what is stored every ``auto.commit.interval.ms`` (100 ms)
                     │  from its own thread, whether or not the application keeps reading
                     ▼
    on_commit (librdkafka's callback, served inside the next consume/poll)
                     ├─ ok: forgotten (unless a later ack moved it on)
                     └─ failed: kept; librdkafka sends what is stored again next interval

    revoke(partitions) ─ commit(wait=True) of theirs, then they are no longer owned
    lose(partitions)   ─ no commit (the session expired: another member owns them already)

Why stored offsets and not one asynchronous commit per ack: each commit call wakes
librdkafka's threads, and on a busy machine the woken thread takes the reader's CPU; with
one commit per 500-message batch that cost the pull consumer about a third of its rate.
Storing is a local write; the interval bounds how long an ack waits to be sent (a crash in
that window delivers the batch again: at least once, as before). With
``enable.auto.commit=false`` in ``consumer_options`` (`interval_commits` False) each ack is
sent at once instead (`commit(wait=False)`), and a failed one is sent again before the next
read (`retry_due`).

Synchronous commits (``wait=True``) are used where something depends on the result: before
partitions move, before the lag is computed, at close. An ack for a partition this member no
longer owns is dropped: the new owner reads those records again (at least once).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from typing import Any

from mq_bridge.endpoints.kafka.client import confluent

__all__ = ["Partition", "PartitionCommits"]

log = logging.getLogger("mq_bridge.endpoints.kafka")

Partition = tuple[str, int]


class PartitionCommits:
    """The owned partitions and their acknowledged-but-unconfirmed offsets (thread-safe:
    acks may come from another thread than the one that reads)."""

    def __init__(self, where: str) -> None:
        self._where = where
        #: librdkafka commits the stored offsets on its interval (``enable.auto.commit``
        #: with ``enable.auto.offset.store=false``); False: `ack` callers commit themselves.
        self.interval_commits = False
        self._lock = threading.Lock()
        self._commit_lock = threading.Lock()  # one commit at a time, in order
        self._owned: set[Partition] = set()
        self._acked: dict[Partition, int] = {}
        self._in_flight = 0

    # --- ownership ------------------------------------------------------------------------

    def reset(self, owned: Iterable[Partition] = ()) -> None:
        """A new connection: nothing acked, `owned` (none until the group assigns some)."""
        with self._lock:
            self._acked.clear()
            self._in_flight = 0
            self._owned = set(owned)

    def assign(self, partitions: Iterable[Partition]) -> None:
        with self._lock:
            self._owned.update(partitions)

    def revoke(self, consumer: Any, partitions: set[Partition]) -> None:
        """Commit what was acked on `partitions` (synchronously), then give them up."""
        self.commit(consumer, only=partitions)
        self.lose(partitions)

    def lose(self, partitions: set[Partition]) -> None:
        with self._lock:
            self._owned -= partitions
            for key in partitions:
                self._acked.pop(key, None)

    def owns(self, partition: Partition) -> bool:
        with self._lock:
            return partition in self._owned

    def owned(self) -> list[Partition]:
        with self._lock:
            return sorted(self._owned)

    # --- acknowledging --------------------------------------------------------------------

    def ack(self, consumer: Any, ranges: Mapping[Partition, list[int]]) -> None:
        """Record, per owned partition, the offset after its last acked record, and have it
        committed: stored for librdkafka's interval commit, or (without interval commits,
        or when it cannot be stored) sent now (``commit(wait=False)``).

        The store happens under the lock that orders acks, so librdkafka never holds an
        older offset than one committed synchronously from `acked`.
        """
        with self._lock:
            moved: dict[Partition, int] = {}
            for key, (_first, last) in ranges.items():
                if key in self._owned and self._acked.get(key, -1) <= last:
                    self._acked[key] = moved[key] = last + 1
            if not moved:
                return
            stored = self.interval_commits and self._store(consumer, moved)
        if not stored:
            self.commit(consumer, wait=False)

    def _store(self, consumer: Any, offsets: dict[Partition, int]) -> bool:
        ck = confluent()
        partitions = [ck.TopicPartition(t, p, offset) for (t, p), offset in offsets.items()]
        try:
            consumer.store_offsets(offsets=partitions)
        except Exception as error:  # e.g. a partition being revoked: commit it instead
            log.debug("%s: could not store offsets, committing them: %s", self._where, error)
            return False
        return True

    @property
    def unconfirmed(self) -> bool:
        """Offsets acked and not yet confirmed by the coordinator."""
        return bool(self._acked)

    @property
    def retry_due(self) -> bool:
        """Unconfirmed offsets with no commit on its way: one failed, send it again. (Not
        with interval commits: librdkafka sends what is stored again itself.)"""
        return not self.interval_commits and bool(self._acked) and not self._in_flight

    def commit(self, consumer: Any, only: set[Partition] | None = None, wait: bool = True) -> None:
        """Commit the unconfirmed offsets (of `only` these partitions).

        ``wait=False`` sends the commit and returns; `on_commit` confirms it. Failures are
        logged and the offsets kept; this never raises.
        """
        ck = confluent()
        with self._commit_lock:
            with self._lock:
                offsets = {
                    key: offset
                    for key, offset in self._acked.items()
                    if only is None or key in only
                }
                if not offsets:
                    return
                if not wait:
                    self._in_flight += 1
            partitions = [ck.TopicPartition(t, p, offset) for (t, p), offset in offsets.items()]
            try:
                if wait:
                    consumer.commit(offsets=partitions, asynchronous=False)
                else:
                    consumer.commit(offsets=partitions, asynchronous=True)
            except Exception as error:
                if not wait:
                    with self._lock:
                        self._in_flight -= 1
                log.warning("%s: commit failed, kept for the next one: %s", self._where, error)
                return
            if wait:
                self._confirmed(partitions)

    def on_commit(self, error: Any, partitions: list[Any]) -> None:
        """librdkafka's report of an asynchronous commit (served inside consume/poll)."""
        with self._lock:
            self._in_flight = max(0, self._in_flight - 1)
        if error is not None:
            if error.code() == confluent().KafkaError._NO_OFFSET:
                return  # an interval commit with nothing new to send
            log.warning("%s: commit failed, kept to be sent again: %s", self._where, error)
            return
        self._confirmed([tp for tp in partitions if tp.error is None])

    def _confirmed(self, partitions: list[Any]) -> None:
        with self._lock:
            for tp in partitions:
                key = (tp.topic, tp.partition)
                if self._acked.get(key) == tp.offset:
                    del self._acked[key]
