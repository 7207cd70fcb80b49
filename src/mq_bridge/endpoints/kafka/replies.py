"""Request/reply over Kafka, emulated through ``reply_to`` (Kafka has none of its own).

Requester (`KafkaOutput.request`): the output owns a private reply topic
(``mqb-reply-<uuid>``, one partition, deleted at close). A request is produced with
metadata ``reply_to`` = that topic and ``correlation_id``; the requesting thread then reads
the reply topic (`ReplyReader`, one thread at a time) and hands every reply to the process's
`ReplyRegistry`, which completes the matching wait (a reply from a route in this process
through a `response` output completes it directly).

Responder (a route whose `kafka` input receives a request and whose output is `response`):
the input registers a `ReplyForwarder` for the request's ``correlation_id``; the handler's
result, delivered there by `response`, is produced to the request's ``reply_to`` topic with
the same ``correlation_id`` (and without ``reply_to``, so it is not taken for a request).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from mq_bridge.endpoints.kafka.client import (
    CONSUMER_DEFAULTS,
    ProducerLink,
    base_settings,
    confluent,
    delete_topic,
    ensure_topics,
    make_client,
    with_user_settings,
)
from mq_bridge.endpoints.kafka.codec import (
    CORRELATION_KEY,
    REPLY_TO_KEY,
    HeaderCache,
    decode_records,
)
from mq_bridge.endpoints.kafka.options import KafkaOptions
from mq_bridge.endpoints.kit.replies import ReplyRegistry, ReplyWaiter
from mq_bridge.message import Message

if TYPE_CHECKING:
    from mq_bridge.endpoints.kit.connections import Lease

__all__ = ["ReplyForwarders", "ReplyReader"]

log = logging.getLogger("mq_bridge.endpoints.kafka")


class ReplyReader:
    """An output's private reply topic and the consumer that reads it from offset 0."""

    def __init__(self, options: KafkaOptions, topic: str) -> None:
        ck = confluent()
        self.topic = topic
        self._options = options.model_copy(update={"partitions": 1})
        ensure_topics(self._options, [topic], f"kafka reply topic {topic}")
        settings = with_user_settings(
            base_settings(options),
            {**CONSUMER_DEFAULTS, "group.id": f"mqb-reply-reader-{topic}"},
            options.consumer_settings,
        )
        self._consumer = make_client(ck.Consumer, settings, "kafka.consumer_options")
        self._consumer.assign([ck.TopicPartition(topic, 0, 0)])
        self._lock = threading.Lock()

    def read_into(self, replies: ReplyRegistry, timeout: float) -> None:
        """Read for up to `timeout` seconds (if no other thread is reading) and deliver."""
        if not self._lock.acquire(timeout=timeout):
            return
        try:
            record = self._consumer.poll(timeout)
            if record is None:
                return
            records = [record, *self._consumer.consume(100, 0)]
        finally:
            self._lock.release()
        good = [record for record in records if record.error() is None]
        for message in decode_records(good, False):
            replies.deliver(message)

    def close(self) -> None:
        with self._lock:
            try:
                self._consumer.close()
            except Exception as error:
                log.debug("closing the reply reader of %s: %r", self.topic, error)
        delete_topic(self._options, self.topic)


class ReplyForwarder(ReplyWaiter):
    """Produces the reply that `response` delivers to the request's ``reply_to`` topic."""

    __slots__ = ("_link", "_reply_to")

    def __init__(
        self, correlation_id: str, registry: ReplyRegistry, link: ProducerLink, reply_to: str
    ) -> None:
        super().__init__(correlation_id, registry)
        self._link = link
        self._reply_to = reply_to

    def complete(self, reply: Message) -> None:
        super().complete(reply)
        metadata = {k: v for k, v in reply.metadata_view.items() if k != REPLY_TO_KEY}
        metadata[CORRELATION_KEY] = self.correlation_id
        id_value = reply.id_int
        producer = self._link.current()
        producer.produce(
            self._reply_to,
            reply.payload,
            id_value.to_bytes(16, "big"),
            headers=HeaderCache().headers(metadata, id_value),
        )
        if producer.flush(10.0):
            log.warning("kafka reply to %s was not delivered within 10s", self._reply_to)


class ReplyForwarders:
    """An input's forwarders by ``correlation_id``, forgotten when their batch is settled.

    The producer (a shared lease, as outputs use) is acquired with the first request.
    """

    def __init__(self, options: KafkaOptions, registry: ReplyRegistry, acquire: Any) -> None:
        self._options = options
        self._registry = registry
        self._acquire = acquire
        self._lease: Lease[ProducerLink] | None = None
        self._waiting: dict[str, ReplyForwarder] = {}

    def expect(self, messages: Iterable[Message]) -> None:
        plain: dict[str, str] | None = None  # a metadata dict known to hold no request
        for message in messages:
            metadata = message.metadata_view
            if metadata is plain:
                continue
            reply_to = metadata.get(REPLY_TO_KEY)
            correlation_id = metadata.get(CORRELATION_KEY)
            if not (reply_to and correlation_id):
                plain = metadata
            else:
                if self._lease is None:
                    self._lease = self._acquire()
                assert self._lease is not None
                forwarder = ReplyForwarder(
                    correlation_id, self._registry, self._lease.connection, reply_to
                )
                self._waiting[correlation_id] = forwarder
                self._registry.register(forwarder)

    def forget(self, messages: Iterable[Message]) -> None:
        if not self._waiting:
            return
        for message in messages:
            correlation_id = message.get(CORRELATION_KEY)
            forwarder = self._waiting.pop(correlation_id, None) if correlation_id else None
            if forwarder is not None:
                self._registry.forget(forwarder)

    def close(self) -> None:
        for forwarder in self._waiting.values():
            self._registry.forget(forwarder)
        self._waiting.clear()
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()
