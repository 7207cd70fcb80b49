"""The input side of the `twain` endpoint: one member of a twainmq consumer group."""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from typing import Any

from mq_bridge.endpoints.base import Batch, EndpointStatus, InputEndpoint
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.endpoints.twain.codec import decode_batch
from mq_bridge.endpoints.twain.exactly_once import OutputLedger
from mq_bridge.endpoints.twain.options import TwainOptions, open_store
from mq_bridge.errors import ClosedError, EndpointError
from twainmq import TwainMQError
from twainmq.admin import CommitFencedError, GroupConsumer, GroupPaths, read_commits

__all__ = ["TwainInput"]

log = logging.getLogger("mq_bridge.endpoints.twain")

_FIRST_PAUSE = 0.0002  # a waiting receive polls again after this, doubling each time ...
_MAX_PAUSE = 0.005  # ... up to this: new messages and `interrupt()` are noticed this fast


@dataclass(frozen=True, slots=True)
class _Span:
    """Where a batch starts and ends in each partition it touches (a batch's token)."""

    first: dict[int, int]
    next: dict[int, int]
    output_ends: dict[int, int] | None = None  # exactly-once: the output's ends when handed out


class TwainInput(InputEndpoint):
    """Reads a topic as one member of a consumer group.

    A group consumer is not thread-safe, and a pipelined route acks on another thread than
    it receives on: one lock serializes every use of it. Waiting for messages happens
    outside the lock (short non-blocking polls with growing pauses), so an ack never waits
    for an idle receive.

    With `commit_interval_ms`, acks are remembered and committed at most that often; what
    is left is committed as soon as the input is idle, before a partition is handed to
    another member (``on_revoke``) and on close.
    """

    def __init__(self, options: TwainOptions, group: str, tag_source: bool = False) -> None:
        self._options = options
        self._group = group
        self._consumer: GroupConsumer | None = None
        self._lock = threading.Lock()
        self._closed = False
        self._wakeup = Wakeup()
        self._tag_source = tag_source
        self._uncommitted: dict[int, int] = {}  # acked, not yet committed: partition -> next
        self._next_commit = 0.0
        self._ledger: OutputLedger | None = None  # exactly_once_output
        self._unacked: dict[int, dict[int, int]] = {}  # id(span) -> output ends, oldest first

    def connect(self) -> None:
        with self._lock:
            if self._consumer is not None:
                return
            options = self._options
            store = open_store(options)
            if options.exactly_once_output is not None:
                output = options.exactly_once_output
                self._ledger = OutputLedger(store, self._group, options.topic, output)
                self._unacked = {}
            try:
                self._consumer = store.consumer(
                    options.topic,
                    options.start_from,
                    group=self._group,
                    session_timeout=options.session_timeout,
                    on_revoke=self._commit_revoked,
                    on_assign=self._assigned if self._ledger is not None else None,
                    commit_fsync=options.fsync,
                )
            except (OSError, TwainMQError) as error:
                if self._ledger is not None:
                    self._ledger.close()
                raise EndpointError(f"{self}: cannot join the group: {error}") from error
            self._closed = False

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        records = self._poll(max_messages, timeout)
        if not records:
            return Batch([])
        topic = self._options.topic
        messages, first, after = decode_batch(records, topic)
        if self._tag_source:
            messages = [
                m.with_metadata(_source_tags(topic, r.partition, r.offset))
                for m, r in zip(messages, records)
            ]
        ledger = self._ledger
        if ledger is None:
            return Batch(messages, _Span(first, after))
        ends = ledger.ends()  # before this batch's output can be written
        with self._lock:
            kept = [
                m.with_metadata(ledger.source(r.partition, r.offset))
                for m, r in zip(messages, records)
                if not ledger.skip(r.partition, r.offset)
            ]
            if len(kept) < len(messages):
                skipped = len(messages) - len(kept)
                log.info("%s: %d messages have their output already: skipped", self, skipped)
            if not kept:  # nothing to hand out: these count as acked
                self._uncommitted.update(after)
                return Batch([])
            span = _Span(first, after, ends)
            self._unacked[id(span)] = ends
        return Batch(kept, span)

    def _poll(self, max_messages: int, timeout: float | None) -> list[Any]:
        """Messages as soon as there are any, until `timeout` or an `interrupt()`."""
        wakeup = self._wakeup
        deadline = None if timeout is None else time.monotonic() + timeout
        pause = _FIRST_PAUSE
        while True:
            with self._lock:
                consumer = self._open()
                records: list[Any] = consumer.poll_many(max_messages, 0)
                if not records and self._uncommitted:  # idle: commit what acks deferred
                    self._commit(consumer)
            remaining = None if deadline is None else deadline - time.monotonic()
            if wakeup.consume() or records or (remaining is not None and remaining <= 0):
                return records
            wakeup.pause(pause if remaining is None else min(pause, remaining))
            pause = min(pause * 2, _MAX_PAUSE)

    def ack(self, batch: Batch) -> None:
        """Commit the batch's end offsets (now, or within `commit_interval_ms`)."""
        span = batch.token
        if not isinstance(span, _Span):
            return
        with self._lock:
            consumer = self._open()
            self._uncommitted.update(span.next)
            self._unacked.pop(id(span), None)
            if time.monotonic() >= self._next_commit:
                self._commit(consumer)

    def _commit(self, consumer: GroupConsumer, partitions: list[int] | None = None) -> None:
        """Commit the acked offsets (of `partitions`, else all) still owned. Lock held."""
        pending = self._uncommitted
        chosen = list(pending) if partitions is None else [p for p in partitions if p in pending]
        offsets = {p: pending.pop(p) for p in chosen}
        owned = set(consumer.assignment())
        moved = sorted(set(offsets) - owned)
        try:
            consumer.commit({p: o for p, o in offsets.items() if p in owned})
        except CommitFencedError as error:
            moved = error.partitions
        else:
            if self._ledger is not None:  # after the commit: a crash between keeps the old
                oldest = next(iter(self._unacked.values()), None)
                self._ledger.save(owned, oldest)
        self._next_commit = time.monotonic() + self._options.commit_interval
        if moved:  # at least once: the new owner reads them again from the last commit
            log.info("%s: partitions %s moved before the commit; redelivered there", self, moved)

    def _commit_revoked(self, partitions: list[int]) -> None:
        """``on_revoke``: hand over exact progress (runs inside a poll or close: lock held)."""
        consumer = self._consumer
        if consumer is not None and self._uncommitted:
            self._commit(consumer, partitions)
        if self._ledger is not None:
            self._ledger.forget(partitions)

    def _assigned(self, partitions: list[int]) -> None:
        """``on_assign`` with `exactly_once_output`: learn which messages of the partitions
        taken have output already (runs inside a poll or the join: lock held)."""
        assert self._ledger is not None
        options = self._options
        paths = GroupPaths.of(options.store_root, options.topic, self._group)
        self._ledger.take(partitions, read_commits(paths))

    def nack(self, batch: Batch) -> None:
        """Seek back to the batch's start in every partition this member still owns."""
        span = batch.token
        if not isinstance(span, _Span):
            return
        with self._lock:
            consumer = self._consumer
            if consumer is None:
                return
            owned = set(consumer.assignment())
            for partition, offset in span.first.items():
                if partition in owned and offset < consumer.position(partition):
                    consumer.seek(partition, offset)

    def status(self) -> EndpointStatus:
        with self._lock:
            consumer = self._consumer
            if consumer is None:
                state = "closed" if self._closed else "not connected"
                return EndpointStatus(healthy=False, target=self.describe(), error=state)
            try:
                ends, committed = consumer.end_offsets(), consumer.committed()
                assignment = consumer.assignment()
            except (OSError, TwainMQError) as error:
                return EndpointStatus(healthy=False, target=self.describe(), error=str(error))
        lag = sum(max(0, end - committed.get(p, 0)) for p, end in ends.items())
        details = {"group": self._group, "partitions": len(ends), "assignment": assignment}
        return EndpointStatus(healthy=True, target=self.describe(), pending=lag, details=details)

    def describe(self) -> str:
        return self._options.describe()

    def __str__(self) -> str:
        return f"{self.describe()} (group {self._group})"

    def interrupt(self) -> None:
        self._wakeup.interrupt()

    def close(self) -> None:
        """Leave the group at once: the other members take the partitions over."""
        with self._lock:
            consumer = self._consumer
            self._closed = True
            if consumer is None:
                return
            try:
                if self._uncommitted:
                    self._commit(consumer)
            finally:
                self._consumer = None
                consumer.close()
                if self._ledger is not None:
                    self._ledger.close()

    def _open(self) -> GroupConsumer:
        consumer = self._consumer
        if consumer is None:
            raise ClosedError(f"{self.describe()} is closed" if self._closed else "not connected")
        return consumer


def _source_tags(topic: str, partition: int, offset: int) -> dict[str, str]:
    return {
        "mqb.src.twain_topic": topic,
        "mqb.src.twain_partition": str(partition),
        "mqb.src.twain_offset": str(offset),
    }
