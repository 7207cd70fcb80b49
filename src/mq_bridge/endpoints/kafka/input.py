"""The `kafka` input: a consumer-group member with manual commits, or an ephemeral subscriber.

Group mode (`group_id`): `subscribe` with rebalance callbacks; a new group starts at the
earliest offset. Acks are cumulative per partition, as Kafka's commits are: acking a batch
commits, for each partition in it, the offset after its last record. Batches must be acked
in the order they were received (`acks_in_any_order` is False: `Consumer.ack(token)` out of
order raises). An ack stores the offsets in librdkafka, which commits what is stored every
100 ms from its own thread (`commits.PartitionCommits`; with ``enable.auto.commit=false``
each ack sends its own asynchronous commit instead; a synchronous one costs a round trip
per batch, ~5 ms on Tansu, which halved the poll+commit rate). librdkafka's commit callback
confirms them during a later read; until then they are kept, and they are committed
synchronously when partitions are revoked, before `status()` computes the lag and at
close. A commit that fails (a rebalance in progress, the coordinator away) is sent again.
A crash between an ack and its confirmation delivers that batch again: at least once,
never lost. Partitions revoked from this
member first get what was acked committed; acks that come later for partitions it no longer
owns are dropped (their new owner reads them again: at least once). `nack` seeks each
partition back to the batch's first offset, so the batch is delivered again at once, in
order; a nack that cannot seek (the partition moved) leaves it to the next owner.

Subscriber mode (no `group_id`): the topic's partitions are assigned at their end offsets
as found by `connect()`, so exactly what is published after `connect()` returns is read
(nothing is committed: an ephemeral group keeps no progress). A ``^regex`` topic in
subscriber mode subscribes with an ephemeral group at ``latest`` instead.

A broker outage that takes every broker away (``_ALL_BROKERS_DOWN``) fails the next
`receive` with the retriable `EndpointUnavailableError`; the route then closes and connects
again, and the new member resumes from the committed offsets.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from typing import TYPE_CHECKING, Any

from mq_bridge.endpoints.base import Batch, BuildContext, EndpointStatus, InputEndpoint
from mq_bridge.endpoints.kafka.client import (
    CONNECT_TIMEOUT,
    CONSUMER_DEFAULTS,
    INTERVAL_COMMITS,
    ProducerLink,
    base_settings,
    client_error,
    confluent,
    ensure_topics,
    make_client,
    producer_key,
    raise_client_error,
    with_user_settings,
)
from mq_bridge.endpoints.kafka.codec import decode_batch
from mq_bridge.endpoints.kafka.commits import Partition, PartitionCommits
from mq_bridge.endpoints.kafka.options import KafkaOptions
from mq_bridge.endpoints.kafka.replies import ReplyForwarders
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.errors import ClosedError, EndpointUnavailableError

if TYPE_CHECKING:
    from confluent_kafka import Consumer

__all__ = ["KafkaInput"]

log = logging.getLogger("mq_bridge.endpoints.kafka")

#: Longest single wait inside `receive`, so `interrupt()` and timeouts are noticed quickly.
_SLICE = 0.1
#: Bound on a consumer's close (leaving the group; librdkafka may wait for an absent broker).
_CLOSE_TIMEOUT = 10.0
_IGNORED_RECORD_ERRORS = {"_PARTITION_EOF", "UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC"}


class _Positions:
    """A batch's token: the connection it came from and, per partition, its first and last
    offsets."""

    __slots__ = ("generation", "ranges")

    def __init__(self, generation: int, ranges: dict[Partition, list[int]]) -> None:
        self.generation = generation
        self.ranges = ranges


class KafkaInput(InputEndpoint):
    """Reads one or more topics (see the module docstring)."""

    acks_in_any_order = False

    def __init__(self, options: KafkaOptions, context: BuildContext) -> None:
        self._options = options
        self._context = context
        self._topics = options.topics or [context.route_name]
        self._regex = any(topic.startswith("^") for topic in self._topics)
        #: The topic every record comes from, when there is exactly one.
        self._one_topic = self._topics[0] if len(self._topics) == 1 and not self._regex else None
        self._group_mode = options.group_id is not None
        self._where = options.describe(",".join(self._topics))
        self._source_metadata = options.source_metadata or context.source_metadata
        self._consumer: Consumer | None = None
        self._generation = 0
        self._closed = False
        self._wakeup = Wakeup()
        self._commits = PartitionCommits(self._where)
        self._partition_counts: dict[str, int] = {}
        self._unavailable: str | None = None
        self._forwarders = ReplyForwarders(context.replies, self._acquire_producer)

    # --- lifecycle ------------------------------------------------------------------------

    def connect(self) -> None:
        """Reach the brokers (bounded), create missing topics, join or assign; raise if not."""
        self._closed = False
        if self._consumer is not None:
            return
        ck = confluent()
        self._partition_counts = ensure_topics(
            self._options, self._topics, self._where, self._options.create_topic is not False
        )
        group_id = self._options.group_id or f"mq-bridge-subscriber-{uuid.uuid4().hex}"
        earliest = self._group_mode
        own: dict[str, Any] = {
            **CONSUMER_DEFAULTS,
            **(INTERVAL_COMMITS if self._group_mode else {}),
            "group.id": group_id,
            "auto.offset.reset": "earliest" if earliest else "latest",
            "on_commit": self._commits.on_commit,
        }
        settings = with_user_settings(
            base_settings(self._options, self._on_error), own, self._options.consumer_settings
        )
        consumer = make_client(ck.Consumer, settings, "kafka.consumer_options")
        self._unavailable = None
        self._commits.reset()
        self._commits.interval_commits = str(settings["enable.auto.commit"]).lower() == "true"
        try:
            if self._group_mode or self._regex:
                consumer.subscribe(
                    self._topics,
                    on_assign=self._on_assign,
                    on_revoke=self._on_revoke,
                    on_lost=self._on_lost,
                )
            else:
                self._assign_at_end(ck, consumer)
        except BaseException:
            _close_bounded(consumer)
            raise
        self._generation += 1
        self._consumer = consumer

    def _assign_at_end(self, ck: Any, consumer: Consumer) -> None:
        """Subscriber mode: every partition, at its end offset as of now."""
        partitions = []
        for topic, count in self._partition_counts.items():
            for partition in range(count):
                tp = ck.TopicPartition(topic, partition)
                try:
                    _low, high = consumer.get_watermark_offsets(tp, timeout=CONNECT_TIMEOUT)
                except Exception as error:
                    raise_client_error(error, f"{self._where}: reading the end offsets")
                partitions.append(ck.TopicPartition(topic, partition, high))
        consumer.assign(partitions)
        self._commits.reset((tp.topic, tp.partition) for tp in partitions)

    def _open(self) -> Consumer:
        if self._closed:
            raise ClosedError(f"{self._where} input is closed")
        if self._consumer is None:  # a reconnect failed earlier: try again (retriable)
            self.connect()
        assert self._consumer is not None
        return self._consumer

    def _on_error(self, error: Any) -> None:
        """librdkafka's error callback (served inside consume/poll)."""
        if error.name() == "_ALL_BROKERS_DOWN":
            self._unavailable = error.str()
        elif error.fatal():
            self._unavailable = f"fatal: {error.str()}"
        log.debug("%s: %s (%s)", self._where, error.str(), error.name())

    def _acquire_producer(self) -> Any:
        return self._context.connections.acquire(
            producer_key(self._options), lambda: ProducerLink(self._options), ProducerLink.close
        )

    # --- rebalance callbacks (run inside consume/poll, on the reading thread) ------------

    def _on_assign(self, consumer: Consumer, partitions: list[Any]) -> None:
        self._commits.assign((tp.topic, tp.partition) for tp in partitions)
        log.debug("%s: assigned %s", self._where, _names(partitions))

    def _on_revoke(self, consumer: Consumer, partitions: list[Any]) -> None:
        """Commit what was acked on these partitions before they move to another member."""
        self._commits.revoke(consumer, {(tp.topic, tp.partition) for tp in partitions})
        log.debug("%s: revoked %s", self._where, _names(partitions))

    def _on_lost(self, consumer: Consumer, partitions: list[Any]) -> None:
        """Lost, not revoked (the session expired): another member already owns them."""
        self._commits.lose({(tp.topic, tp.partition) for tp in partitions})
        log.info(
            "%s: lost %s; their unacked records go to their new owner",
            self._where,
            _names(partitions),
        )

    # --- reading --------------------------------------------------------------------------

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        consumer = self._open()
        wakeup = self._wakeup
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            self._raise_if_unavailable()
            if self._commits.retry_due:
                self._commits.commit(consumer, wait=False)  # one that failed: again
            try:
                records = consumer.consume(max_messages, 0)
                if not records:
                    remaining = None if deadline is None else deadline - time.monotonic()
                    wait = _SLICE if remaining is None else max(0.0, min(_SLICE, remaining))
                    if wakeup.pending:  # interrupted: only what is already there
                        wait = 0
                    first = consumer.poll(wait)
                    if first is not None:
                        records = [first]
                        if max_messages > 1:
                            records += consumer.consume(max_messages - 1, 0)
            except RuntimeError as error:  # "Consumer closed" from another thread's close
                if self._closed:
                    raise ClosedError(f"{self._where} input is closed") from error
                raise
            except Exception as error:
                raise_client_error(error, self._where)
            interrupted = wakeup.consume()  # records found meanwhile answer it
            if records:
                batch = self._batch(records)
                if batch.messages:
                    return batch
            if interrupted:
                return Batch([])
            if deadline is not None and time.monotonic() >= deadline:
                return Batch([])

    def _raise_if_unavailable(self) -> None:
        reason = self._unavailable
        if reason is not None:
            self._unavailable = None
            raise EndpointUnavailableError(f"{self._where}: {reason}")

    def _batch(self, records: list[Any]) -> Batch:
        decoded = decode_batch(records, self._source_metadata, self._one_topic)
        for record in decoded.errors:
            self._record_error(record)
        if not decoded.messages:
            return Batch([])
        if decoded.requests:
            self._forwarders.expect(decoded.messages)
        return Batch(decoded.messages, _Positions(self._generation, decoded.ranges))

    def _record_error(self, record: Any) -> None:
        error = record.error()
        if error.name() in _IGNORED_RECORD_ERRORS:
            log.debug("%s: %s", self._where, error.str())
            return
        if error.fatal():
            raise client_error(confluent().KafkaException(error), self._where)
        log.warning("%s: %s (%s)", self._where, error.str(), error.name())

    # --- acknowledging --------------------------------------------------------------------

    def ack(self, batch: Batch) -> None:
        """Commit, per partition, the offset after the batch's last record.

        The commit is stored for librdkafka's interval commit (or sent), not awaited (see the
        module docstring for when it is confirmed).
        Acks of batches from an earlier connection, or of partitions this member no longer
        owns, are dropped: those records are delivered again (at least once). A failed
        commit is kept and tried again; it never raises.
        """
        token = batch.token
        if not isinstance(token, _Positions):
            return
        self._forwarders.forget(batch.messages)
        consumer = self._consumer
        if consumer is None or token.generation != self._generation:
            if self._closed and consumer is None:
                raise ClosedError(f"{self._where} input is closed")
            return
        if not self._group_mode:
            return  # an ephemeral group: nothing to keep
        self._commits.ack(consumer, token.ranges)

    def nack(self, batch: Batch) -> None:
        """Seek each partition back to the batch's first offset: delivered again, in order."""
        token = batch.token
        if not isinstance(token, _Positions):
            return
        self._forwarders.forget(batch.messages)
        consumer = self._consumer
        if consumer is None or token.generation != self._generation:
            return
        ck = confluent()
        for (topic, partition), (first, _last) in token.ranges.items():
            if not self._commits.owns((topic, partition)):
                continue
            try:
                consumer.seek(ck.TopicPartition(topic, partition, first))
            except Exception as error:  # redelivered on the next run / by the next owner
                log.info("%s: nack could not seek %s[%d]: %s", self._where, topic, partition, error)

    # --- status and close -----------------------------------------------------------------

    def status(self) -> EndpointStatus:
        target = self.describe()
        consumer = self._consumer
        if consumer is None:
            error = "closed" if self._closed else "not connected"
            return EndpointStatus(healthy=False, target=target, error=error)
        mode = "group" if self._group_mode else "subscriber"
        assigned = self._commits.owned()
        details: dict[str, Any] = {
            "mode": mode,
            "group_id": self._options.group_id,
            "assigned": [f"{t}[{p}]" for t, p in assigned],
        }
        try:
            if self._commits.unconfirmed:  # acked: the lag must count it (0 = caught up)
                self._commits.commit(consumer)
            pending = self._lag(consumer, assigned)
        except Exception as error:
            return EndpointStatus(healthy=False, target=target, error=str(error), details=details)
        return EndpointStatus(healthy=True, target=target, pending=pending, details=details)

    def _lag(self, consumer: Consumer, assigned: list[Partition]) -> int:
        """Group: end offset minus committed offset (or the start, when nothing is committed)
        over every partition of the topics; subscriber: minus the read position."""
        ck = confluent()
        keys = set(assigned)
        if self._group_mode:
            keys |= {(t, p) for t, n in self._partition_counts.items() for p in range(n)}
        partitions = [ck.TopicPartition(t, p) for t, p in sorted(keys)]
        if not partitions:
            return 0
        if self._group_mode:
            bases = consumer.committed(partitions, timeout=CONNECT_TIMEOUT)
        else:
            bases = consumer.position(partitions)
        pending = 0
        for tp in bases:
            low, high = consumer.get_watermark_offsets(tp, timeout=CONNECT_TIMEOUT, cached=False)
            base = tp.offset if tp.offset >= 0 else (low if self._group_mode else high)
            pending += max(0, high - base)
        return pending

    def describe(self) -> str:
        return self._where

    def interrupt(self) -> None:
        self._wakeup.interrupt()

    def close(self) -> None:
        """Commit what was acked, leave the group (bounded), release the reply producer."""
        self._closed = True
        consumer, self._consumer = self._consumer, None
        try:
            if consumer is not None:
                if self._commits.unconfirmed:
                    self._commits.commit(consumer)
                _close_bounded(consumer)
        finally:
            self._forwarders.close()


def _close_bounded(consumer: Any) -> None:
    """`consumer.close()` (which leaves the group and runs the revoke callback), given at
    most `_CLOSE_TIMEOUT`: with every broker gone librdkafka may wait much longer."""
    errors: list[BaseException] = []

    def close() -> None:
        try:
            consumer.close()
        except Exception as error:
            errors.append(error)

    closer = threading.Thread(target=close, name="kafka-consumer-close", daemon=True)
    closer.start()
    closer.join(_CLOSE_TIMEOUT)
    if closer.is_alive():
        log.warning("kafka consumer did not close within %.0fs; left to finish", _CLOSE_TIMEOUT)
    elif errors:
        log.debug("kafka consumer close: %r", errors[0])


def _names(partitions: list[Any]) -> str:
    return ", ".join(f"{tp.topic}[{tp.partition}]" for tp in partitions)
