"""Request/reply over Kafka, emulated through ``reply_to`` (Kafka has none of its own).

Requester (`KafkaOutput.request`): the output owns a private reply topic
(``mqb-reply-<uuid>``, one partition, deleted at close). A request is produced with
metadata ``reply_to`` = that topic and ``correlation_id``; the requesting thread then reads
the reply topic (`ReplyReader`, one thread at a time) and hands every reply to the process's
`ReplyRegistry`, which completes the matching wait (a reply from a route in this process
through a `response` output completes it directly).

Responder (a route whose `kafka` input receives a request and whose output is `response`):
the input registers a forwarder for the request's ``correlation_id``; the handler's
result, delivered there by `response`, is produced to the request's ``reply_to`` topic with
the same ``correlation_id`` (and without ``reply_to``, so it is not taken for a request).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

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
from mq_bridge.endpoints.kit import replies
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

    def read_into(self, registry: replies.ReplyRegistry, timeout: float) -> None:
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
            registry.deliver(message)

    def close(self) -> None:
        with self._lock:
            try:
                self._consumer.close()
            except Exception as error:
                log.debug("closing the reply reader of %s: %r", self.topic, error)
        delete_topic(self._options, self.topic)


class ReplyForwarders(replies.ReplyForwarders):
    """Produces each reply to its request's ``reply_to`` topic, without ``reply_to`` (so it is
    not taken for a request). The producer (a shared lease, as outputs use) is acquired with
    the first request, released at close.
    """

    def __init__(
        self, registry: replies.ReplyRegistry, acquire: Callable[[], Lease[ProducerLink]]
    ) -> None:
        super().__init__(registry)
        self._acquire = acquire
        self._lease: Lease[ProducerLink] | None = None
        self._link: ProducerLink | None = None

    def prepare(self) -> None:
        if self._lease is None:
            self._lease = self._acquire()
            self._link = self._lease.connection

    def forward(self, reply: Message, reply_to: str, correlation_id: str) -> None:
        metadata = {k: v for k, v in reply.metadata_view.items() if k != REPLY_TO_KEY}
        metadata[CORRELATION_KEY] = correlation_id
        id_value = reply.id_int
        assert self._link is not None  # `prepare` ran before the forwarder was registered
        producer = self._link.current()
        producer.produce(
            reply_to,
            reply.payload,
            id_value.to_bytes(16, "big"),
            headers=HeaderCache().headers(metadata, id_value),
        )
        if producer.flush(10.0):
            log.warning("kafka reply to %s was not delivered within 10s", reply_to)

    def release(self) -> None:
        lease, self._lease = self._lease, None
        if lease is not None:
            lease.release()
