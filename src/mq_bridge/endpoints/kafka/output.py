"""The `kafka` output: an idempotent producer; a send returns once every record is delivered.

`send` produces the whole batch, then `flush()`es: librdkafka sends at once (flush skips
``linger.ms``) and returns when every record has its delivery report, i.e. the partition
leader acknowledged it with ``acks=all``. A one-message send therefore never waits out the
linger (mq-bridge 1.2.0 does, ~2 ms per message). Failed reports fail their messages
(`SendError`; retriable ones as `EndpointUnavailableError`); records without a report within
``message.timeout.ms`` (+5 s) fail the batch as retriable. With ``delayed_ack`` a send returns
once librdkafka has the records; failures are logged.
"""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from mq_bridge.endpoints.base import BuildContext, EndpointStatus, JsonSender, OutputEndpoint
from mq_bridge.endpoints.kafka.client import (
    ProducerLink,
    client_error,
    confluent,
    ensure_topics,
    producer_key,
)
from mq_bridge.endpoints.kafka.codec import HeaderCache, record_key, record_value
from mq_bridge.endpoints.kafka.options import KafkaOptions
from mq_bridge.endpoints.kafka.replies import ReplyReader
from mq_bridge.endpoints.kit.replies import ReplyRegistry
from mq_bridge.errors import (
    ClosedError,
    ConfigError,
    EndpointUnavailableError,
    RequestTimeoutError,
    SendError,
)
from mq_bridge.message import (
    Message,
    fields_of,
    json_send_parts,
)

if TYPE_CHECKING:
    from confluent_kafka import Producer

    from mq_bridge.endpoints.kit.connections import Lease

__all__ = ["KafkaOutput"]

log = logging.getLogger("mq_bridge.endpoints.kafka")

#: Extra seconds a flush waits past ``message.timeout.ms`` (librdkafka fails records then).
_FLUSH_GRACE = 5.0
_DEFAULT_MESSAGE_TIMEOUT = 30.0
#: Delivery errors after which the producer is replaced (see `ProducerLink`): retriable.
_RENEW_AFTER = {"_MSG_TIMED_OUT", "UNKNOWN_PRODUCER_ID", "OUT_OF_ORDER_SEQUENCE_NUMBER"}


class _Reports:
    """Delivery reports of one send: counted, and the failures by index in the batch."""

    __slots__ = ("errors", "received")

    def __init__(self) -> None:
        self.received = 0
        self.errors: list[tuple[Any, Any]] = []

    def __call__(self, error: Any, record: Any) -> None:
        self.received += 1
        if error is not None:
            self.errors.append((error, record))


class KafkaOutput(OutputEndpoint):
    """Produces to one topic (see the module docstring for what a returning send means)."""

    def __init__(self, options: KafkaOptions, context: BuildContext) -> None:
        topics = options.topics or [context.route_name]
        if len(topics) != 1 or topics[0].startswith("^"):
            raise ConfigError(
                "an output produces to one topic, not a list or a regex", "kafka.topic"
            )
        self.topic = topics[0]
        self._options = options
        self._context = context
        self._where = options.describe(self.topic)
        self._partition_key = options.partition_key
        self._headers = HeaderCache()
        self._lease: Lease[ProducerLink] | None = None
        self._closed = False
        self._replies: ReplyReader | None = None
        self._replies_lock = threading.Lock()
        self._own_replies = ReplyRegistry()
        self._flush_timeout = _flush_timeout(options)

    # --- lifecycle ------------------------------------------------------------------------

    def connect(self) -> None:
        """Reach the brokers, create the topic if missing (`create_topic`), open the producer."""
        self._closed = False
        if self._lease is not None:
            return
        confluent()
        ensure_topics(
            self._options, [self.topic], self._where, self._options.create_topic is not False
        )
        self._lease = self._context.connections.acquire(
            producer_key(self._options),
            lambda: ProducerLink(self._options),
            ProducerLink.close,
            shared=self._options.shared is not False,
        )

    def _link(self) -> ProducerLink:
        if self._closed:
            raise ClosedError(f"{self._where} output is closed")
        if self._lease is None:  # a reconnect failed earlier: try again (retriable)
            self.connect()
        assert self._lease is not None
        return self._lease.connection

    # --- sending --------------------------------------------------------------------------

    def send(self, messages: Sequence[Message]) -> None:
        if not messages:
            return
        link = self._link()
        producer = link.current()
        reports = _Reports()
        produce, headers_for, key_field = (
            producer.produce,
            self._headers.headers,
            self._partition_key,
        )
        topic = self.topic
        on_delivery = self._log_failure if self._options.delayed_ack else reports
        for message in messages:
            metadata, payload, id_value = fields_of(message)
            if id_value is None:
                id_value = message.id_int
            key = (
                record_key(metadata, id_value, key_field)
                if key_field
                else id_value.to_bytes(16, "big")
            )
            value = payload if payload else record_value(payload, metadata)
            headers = headers_for(metadata, id_value)
            try:
                produce(topic, value, key, headers=headers, on_delivery=on_delivery)
            except BufferError:  # librdkafka's queue is full: let it drain, then go on
                producer.poll(0.1)
                self._produce_blocking(producer, topic, value, key, headers, on_delivery)
            except Exception as error:
                raise self._translated(link, producer, error) from error
        self._settle(link, producer, reports, messages)

    def send_one(self, message: Message) -> None:
        self.send((message,))

    def _log_failure(self, error: Any, record: Any) -> None:
        """``delayed_ack``: nobody waits for the report, so a failure is logged."""
        if error is not None:
            log.error("%s: a record sent with delayed_ack was lost: %s", self._where, error.str())

    def json_sender(self) -> JsonSender | None:
        """`send_json` without building a `Message`: the same checks, the same record."""

        def send_json(data: Any, metadata: Mapping[str, str] | None, id: str | int | None) -> None:
            self.send((Message.trusted(*json_send_parts(data, metadata, id)),))

        return send_json

    def _produce_blocking(
        self, producer: Producer, topic: str, value: Any, key: bytes, headers: Any, callback: Any
    ) -> None:
        deadline = time.monotonic() + self._flush_timeout
        while True:
            try:
                producer.produce(topic, value, key, headers=headers, on_delivery=callback)
                return
            except BufferError:
                if time.monotonic() > deadline:
                    waited = f"{self._flush_timeout:.0f}s"
                    message = f"{self._where}: librdkafka's queue stayed full for {waited}"
                    raise EndpointUnavailableError(message) from None
                producer.poll(0.1)

    def _settle(
        self, link: ProducerLink, producer: Producer, reports: _Reports, messages: Sequence[Message]
    ) -> None:
        if self._options.delayed_ack:
            producer.poll(0)  # serve earlier reports; failures are only logged
            return
        remaining = producer.flush(self._flush_timeout)
        if reports.received < len(messages) and not remaining:
            # A shared producer: another thread's poll may have taken our last reports and
            # be running their callbacks right now.
            deadline = time.monotonic() + 1.0
            while reports.received < len(messages) and time.monotonic() < deadline:
                producer.poll(0.01)
        if reports.received < len(messages):
            if link.fatal is not None:
                link.renew(producer)
            raise EndpointUnavailableError(
                f"{self._where}: {len(messages) - reports.received} of {len(messages)} record(s) "
                f"got no delivery report within {self._flush_timeout:.0f}s "
                f"({remaining} still queued)"
            )
        if reports.errors:
            self._fail(link, producer, reports, messages)

    def _fail(
        self, link: ProducerLink, producer: Producer, reports: _Reports, messages: Sequence[Message]
    ) -> None:
        """Map each failed report to its message (by the id header) and raise SendError."""
        renew = link.fatal is not None
        index: dict[int, list[int]] = {}
        for position, message in enumerate(messages):
            index.setdefault(message.id_int, []).append(position)
        failures: dict[int, BaseException] = {}
        ck = confluent()
        for error, record in reports.errors:
            cause = client_error(ck.KafkaException(error), self._where)
            name = error.name()
            if name in {"UNKNOWN_TOPIC_OR_PART", "_UNKNOWN_TOPIC"}:
                cause = EndpointUnavailableError(f"{self._where}: topic missing: {error.str()}")
                self._recreate_topic()
            elif name in _RENEW_AFTER:
                cause = EndpointUnavailableError(f"{self._where}: {error.str()} ({name})")
                renew = True
            record_id = _record_id(record)
            positions = [] if record_id is None else index.get(record_id, [])
            if not positions:  # cannot tell which: fail every message not yet failed
                positions = [p for p in range(len(messages)) if p not in failures]
            failures[positions.pop(0)] = cause
        if renew:
            link.renew(producer)
        raise SendError(failures)

    def _recreate_topic(self) -> None:
        try:
            ensure_topics(
                self._options, [self.topic], self._where, self._options.create_topic is not False
            )
        except Exception as error:
            log.debug("%s: could not recreate the topic: %r", self._where, error)

    def _translated(self, link: ProducerLink, producer: Producer, error: Exception) -> Exception:
        if link.fatal is not None:
            link.renew(producer)
        return client_error(error, self._where)

    # --- request/reply --------------------------------------------------------------------

    def request(self, message: Message, timeout: float | None) -> Message:
        """Produce with ``reply_to`` = this output's private reply topic and a
        ``correlation_id``; wait for the reply there."""
        correlation_id = message.get("correlation_id") or message.assigned_id()
        reader = self._reply_reader()
        message = message.with_metadata(correlation_id=correlation_id, reply_to=reader.topic)
        started = time.monotonic()
        # A registry of the output's own: a route of this process that reads the request
        # registers its forwarder under the same correlation_id in the process's registry.
        with self._own_replies.expect(correlation_id) as waiter:
            self.send_one(message)
            while True:
                left = None if timeout is None else timeout - (time.monotonic() - started)
                if waiter.reply is not None:
                    return waiter.reply
                if left is not None and left <= 0:
                    break
                reader.read_into(self._own_replies, 0.1 if left is None else min(0.1, left))
                if waiter.wait(0):
                    return waiter.reply  # type: ignore[return-value]
        raise RequestTimeoutError(
            f"no reply for {correlation_id} on {self.describe()} within {timeout}s; does a route "
            "read the topic and answer through a `response` output?"
        )

    def _reply_reader(self) -> ReplyReader:
        with self._replies_lock:
            if self._replies is None:
                self._link()
                self._replies = ReplyReader(self._options, f"mqb-reply-{uuid.uuid4().hex}")
            return self._replies

    # --- status and close -----------------------------------------------------------------

    def flush(self) -> None:
        if self._lease is not None:
            self._lease.connection.producer.flush(self._flush_timeout)

    def status(self) -> EndpointStatus:
        lease = self._lease
        if lease is None:
            error = "closed" if self._closed else "not connected"
            return EndpointStatus(healthy=False, target=self.describe(), error=error)
        link = lease.connection
        queued = len(link.producer)
        details = {"queued": queued, "delayed_ack": self._options.delayed_ack}
        return EndpointStatus(
            healthy=link.fatal is None, target=self.describe(), error=link.fatal, details=details
        )

    def describe(self) -> str:
        return self._where

    def close(self) -> None:
        self._closed = True
        lease, self._lease = self._lease, None
        replies, self._replies = self._replies, None
        if replies is not None:
            replies.close()
        if lease is not None:
            if self._options.delayed_ack:
                lease.connection.producer.flush(self._flush_timeout)
            lease.release()


def _record_id(record: Any) -> int | None:
    for key, value in record.headers() or ():
        if key == "mq_bridge.message_id" and value is not None:
            try:
                return int(value, 16)
            except ValueError:
                return None
    return None


def _flush_timeout(options: KafkaOptions) -> float:
    settings = dict(options.producer_settings)
    text = settings.get("message.timeout.ms") or settings.get("delivery.timeout.ms")
    try:
        seconds = float(text) / 1000 if text else _DEFAULT_MESSAGE_TIMEOUT
    except ValueError:
        seconds = _DEFAULT_MESSAGE_TIMEOUT
    return (seconds or 300.0) + _FLUSH_GRACE
