"""The `amqp` output: publishes to a queue or an exchange, waiting for publisher confirms."""

from __future__ import annotations

import concurrent.futures
import threading
from collections.abc import Sequence
from typing import Any

from mq_bridge.endpoints.amqp.codec import decode, encode_properties
from mq_bridge.endpoints.amqp.connection import (
    CONNECT_TIMEOUT,
    AmqpConnection,
    Channel,
    acquire,
    connection_parameters,
)
from mq_bridge.endpoints.amqp.direct import DirectPublisher
from mq_bridge.endpoints.amqp.frames import is_direct_reply_to
from mq_bridge.endpoints.amqp.options import AmqpOptions
from mq_bridge.endpoints.amqp.publishing import Confirms, Pending
from mq_bridge.endpoints.amqp.topology import declare
from mq_bridge.endpoints.base import BuildContext, EndpointStatus, OutputEndpoint
from mq_bridge.endpoints.kit.connections import Lease
from mq_bridge.errors import ClosedError, EndpointUnavailableError, RequestTimeoutError, SendError
from mq_bridge.message import Message

__all__ = ["CONFIRM_TIMEOUT", "DIRECT_REPLY_TO", "AmqpOutput"]

#: How long a send waits for the broker's confirms before it fails (retriable).
CONFIRM_TIMEOUT = 30.0
#: RabbitMQ's pseudo-queue for replies: no queue to declare or delete.
DIRECT_REPLY_TO = "amq.rabbitmq.reply-to"


class AmqpOutput(OutputEndpoint):
    """Publishes each message (persistent unless `no_persistence`) and, unless
    `delayed_ack`, returns only once the broker confirmed every message of the send.

    A batch is pipelined: every message is published, then the confirms are awaited
    together. With confirms, sends go through a `DirectPublisher` (a connection of the
    output's own, written and read by the sending thread); declarations, `request` and
    `delayed_ack` sends use the (shared) pika connection. With neither `queue` nor
    `exchange`, each message goes to the queue its ``reply_to`` metadata names (the output
    of a responder route).
    """

    def __init__(self, options: AmqpOptions, context: BuildContext) -> None:
        self._options = options
        self._context = context
        self._lease: Lease[AmqpConnection] | None = None
        self._channel: Channel | None = None
        self._confirms: Confirms | None = None
        self._lock = threading.Lock()  # (re)opening the channel
        self._closed = False
        # subscribe_mode: to the fanout exchange the subscribers bind (as both peers).
        self._exchange = (
            options.fanout_exchange if options.subscribe_mode else options.exchange or ""
        )
        self._routing_key = options.queue or ""
        # Straight to a queue: a missing queue makes the broker return the message, and
        # the send fails instead of the message vanishing.
        self._mandatory = not self._exchange
        self._delivery_mode = 1 if options.no_persistence else 2
        self._replies: dict[str, concurrent.futures.Future[Message]] = {}
        self._reply_consumer: Channel | None = None
        self._direct: DirectPublisher | None = None  # with confirms, once connected

    def connect(self) -> None:
        with self._lock:
            self._closed = False  # a closed output opens again: the route's reconnect
            if self._lease is None:
                self._lease = acquire(self._options, self._context)
            self._open_channel()
            if self._direct is None and not self._options.delayed_ack:
                self._direct = DirectPublisher(
                    connection_parameters(self._options), self.describe(), self._exchange,
                    self._routing_key, self._mandatory, self._delivery_mode,
                )  # fmt: skip
            direct = self._direct
        if direct is not None:
            direct.open()

    def _open_channel(self) -> Channel:
        """The channel, (re)opened with confirms and declarations when needed. Lock held."""
        channel = self._channel
        if channel is not None and channel.is_open:
            return channel
        if self._lease is None:
            raise ClosedError(f"{self.describe()} is closed" if self._closed else "not connected")
        channel = self._lease.connection.open_channel(self._channel_closed)
        try:
            confirms = None if self._options.delayed_ack else Confirms(channel, self.describe())
            if confirms is not None:
                channel.run(confirms.enable, CONNECT_TIMEOUT)
            declare(channel, self._options, consumer=False)
        except BaseException:
            channel.close()
            raise
        self._channel, self._confirms = channel, confirms
        return channel

    def _channel_closed(self, _pika_channel: Any, reason: BaseException) -> None:
        """I/O thread: fail whatever waits for this channel's confirms or replies."""
        confirms = self._confirms
        if confirms is not None and confirms.channel.pika is _pika_channel:
            confirms.fail_all(reason)
        for future in list(self._replies.values()):
            if not future.done():
                future.set_exception(reason)

    def send(self, messages: Sequence[Message]) -> None:
        """Publish every message; return once all are confirmed (see the class)."""
        if not messages:
            self._ready()
            return
        direct = self._direct
        if direct is None:
            self._settle(self._publish(messages))
            return
        self._ready()  # the declarations, made again after a loss
        _raise_failures(direct.send(messages, CONFIRM_TIMEOUT), len(messages))

    def send_one(self, message: Message) -> None:
        self.send((message,))

    def _publish(self, messages: Sequence[Message], reply_to: str | None = None) -> Pending:
        from pika import BasicProperties

        mode = self._delivery_mode
        items = [
            (message, encode_properties(BasicProperties, message, mode, reply_to))
            for message in messages
        ]
        channel = self._ready()
        pending = Pending(len(items))
        confirms = self._confirms
        exchange, key, mandatory = self._exchange, self._routing_key, self._mandatory
        if not exchange and not key:
            mandatory = True

        def publish() -> None:
            publish_on = channel.pika.basic_publish
            for index, (message, properties) in enumerate(items):
                routing_key = key or properties.reply_to or ""
                returnable = mandatory and not is_direct_reply_to(routing_key)
                try:
                    publish_on(exchange, routing_key, message.payload, properties, returnable)
                except Exception as error:
                    pending.fail_from(index, error)
                    return
                if confirms is not None:
                    confirms.expect(pending, index, properties.message_id if returnable else None)
            if confirms is None:
                pending.done_all()

        channel.connection.post(publish)
        return pending

    def _settle(self, pending: Pending) -> None:
        if not pending.wait(CONFIRM_TIMEOUT):
            raise EndpointUnavailableError(
                f"{self.describe()}: no publisher confirm within {CONFIRM_TIMEOUT:g} s"
            )
        _raise_failures(pending.failures, pending.size)

    def _ready(self) -> Channel:
        with self._lock:
            if self._closed:
                raise ClosedError(f"{self.describe()} is closed")
            return self._open_channel()

    def request(self, message: Message, timeout: float | None) -> Message:
        """Publish `message` with ``reply_to`` (RabbitMQ's direct reply-to) and a
        ``correlation_id`` (its own, or the message id) and wait for the reply."""
        correlation_id = message.get("correlation_id")
        if correlation_id is None:
            correlation_id = message.assigned_id()
            message = message.with_metadata(correlation_id=correlation_id)
        future: concurrent.futures.Future[Message] = concurrent.futures.Future()
        self._replies[correlation_id] = future
        try:
            self._consume_replies()
            self._settle(self._publish((message,), reply_to=DIRECT_REPLY_TO))
            return future.result(timeout)
        except concurrent.futures.TimeoutError:
            raise RequestTimeoutError(
                f"no reply from {self.describe()} within {timeout} s "
                f"(correlation_id {correlation_id}); does a route answer to reply_to?"
            ) from None
        finally:
            self._replies.pop(correlation_id, None)

    def _consume_replies(self) -> None:
        """Start consuming direct reply-to on the publishing channel (once per channel)."""
        channel = self._ready()
        if self._reply_consumer is channel:
            return

        def deliver(_channel: Any, _method: Any, properties: Any, body: bytes) -> None:
            future = self._replies.get(properties.correlation_id or "")
            if future is not None and not future.done():
                future.set_result(decode(body, properties))

        channel.run(
            lambda done: channel.pika.basic_consume(
                DIRECT_REPLY_TO, deliver, auto_ack=True, callback=done
            ),
            CONNECT_TIMEOUT,
        )
        self._reply_consumer = channel

    def status(self) -> EndpointStatus:
        channel = self._channel
        healthy = not self._closed and channel is not None and channel.is_open
        error = None if healthy else (str(channel.error) if channel and channel.error else None)
        direct = self._direct
        if healthy and direct is not None and direct.error is not None:
            healthy, error = False, str(direct.error)
        details = {
            "exchange": self._exchange,
            "queue": self._routing_key or None,
            "confirms": not self._options.delayed_ack,
        }
        return EndpointStatus(healthy=healthy, target=self.describe(), error=error, details=details)

    def describe(self) -> str:
        return self._options.describe()

    def close(self) -> None:
        """Close the channel and release the connection. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            channel, self._channel = self._channel, None
            lease, self._lease = self._lease, None
            direct, self._direct = self._direct, None
        if direct is not None:
            direct.close()
        if channel is not None:
            channel.close()
        if lease is not None:
            lease.release()


def _raise_failures(failures: dict[int, BaseException], size: int) -> None:
    """Raise for a send with `failures` among its `size` messages: the error itself when
    all failed, else a `SendError` naming the failed ones."""
    if failures:
        if len(failures) == size:
            raise next(iter(failures.values()))
        raise SendError(failures)
