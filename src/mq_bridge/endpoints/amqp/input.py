"""The `amqp` input: a consumer of a queue (or of a subscriber's queue on a fanout exchange).

Deliveries arrive on the connection's I/O thread, up to `prefetch_count` unacknowledged,
and wait in an inbox; `receive` takes up to `max_messages` of them at once, so a backlog
gives full batches. Acks and nacks go back to the I/O thread (see `settlement`).

A channel that closes (a lost connection, a restarted broker) is reopened by the next
`receive`; what was delivered on the old one is redelivered by the broker, so its acks are
dropped (at least once: nothing acknowledged is lost, a message may come twice).
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any

from mq_bridge.endpoints.amqp.codec import decode
from mq_bridge.endpoints.amqp.connection import CONNECT_TIMEOUT, AmqpConnection, Channel, acquire
from mq_bridge.endpoints.amqp.options import AmqpOptions
from mq_bridge.endpoints.amqp.replies import ReplyForwarders
from mq_bridge.endpoints.amqp.settlement import Settlement, Span
from mq_bridge.endpoints.amqp.topology import declare
from mq_bridge.endpoints.base import Batch, BuildContext, EndpointStatus, InputEndpoint
from mq_bridge.endpoints.kit.connections import Lease
from mq_bridge.endpoints.kit.source_metadata import with_source
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.errors import ClosedError, EndpointError

__all__ = ["AmqpInput"]

_SLICE = 0.5  # a waiting receive checks the channel's health this often
_STEP = 0.001  # gathering a batch: a pause this long without a delivery ends it
_GATHER = 0.02  # ... and it ends after this in any case
_REFILL = 0.01  # ... unless an ack went out this recently (more deliveries will follow)
_MAX_AUTO_PREFETCH = 5000

# One delivery as the I/O thread hands it over: (delivery tag, exchange, routing key,
# properties, body).
Delivery = tuple[int, str, str, Any, bytes]


class AmqpInput(InputEndpoint):
    """Consumes a queue with manual acks; see the module docstring."""

    acks_in_any_order = True  # each delivery tag is acked on its own

    def __init__(self, options: AmqpOptions, context: BuildContext) -> None:
        self._options = options
        self._context = context
        self._tag_source = context.source_metadata or options.source_metadata
        self._lease: Lease[AmqpConnection] | None = None
        self._channel: Channel | None = None
        self._settlement: Settlement | None = None
        self._queue = ""
        self._inbox: collections.deque[Delivery] = collections.deque()
        self._ready = threading.Condition()
        self._wakeup = Wakeup(self._ready)
        self._epoch = 0  # the channel's incarnation: tokens of an older one are stale
        self._closed = False
        self._lock = threading.Lock()  # (re)opening the channel
        self._prefetch = options.prefetch  # raised by large receives (see _raise_prefetch)
        self._settled_at = 0.0
        # Requests answered by a route's `response` output go back to their reply_to.
        self._forwarders = ReplyForwarders(options, context)

    def connect(self) -> None:
        with self._lock:
            with self._ready:
                # A route reconnects a failed input by close() then connect(): start afresh.
                # (A closed `Consumer` refuses use itself; the endpoint may be reopened.)
                self._closed = False
            if self._lease is None:
                self._lease = acquire(self._options, self._context)
            self._open_channel()

    def _open_channel(self) -> Channel:
        """The consuming channel, (re)opened when needed. Lock held."""
        channel = self._channel
        if channel is not None and channel.is_open:
            return channel
        if self._lease is None:
            raise ClosedError(f"{self.describe()} is closed" if self._closed else "not connected")
        channel = self._lease.connection.open_channel(self._channel_closed)
        try:
            self._queue = declare(channel, self._options, consumer=True)
            prefetch = self._prefetch
            channel.run(lambda done: channel.pika.basic_qos(0, prefetch, True, callback=done), 10)
            with self._ready:
                self._epoch += 1
                self._inbox.clear()
                epoch = self._epoch
            deliver = self._deliverer(epoch)
            channel.run(
                lambda done: channel.pika.basic_consume(self._queue, deliver, callback=done),
                CONNECT_TIMEOUT,
            )
        except BaseException:
            channel.close()
            raise
        self._channel, self._settlement = channel, Settlement(channel.pika, epoch)
        return channel

    def _deliverer(self, epoch: int) -> Any:
        inbox, ready = self._inbox, self._ready

        def deliver(_channel: Any, method: Any, properties: Any, body: bytes) -> None:
            # I/O thread: one lock and one append per delivery, nothing else.
            with ready:
                if self._epoch == epoch:
                    inbox.append(
                        (method.delivery_tag, method.exchange, method.routing_key, properties, body)
                    )
                    ready.notify()

        return deliver

    def _channel_closed(self, _pika_channel: Any, _reason: BaseException) -> None:
        with self._ready:
            self._ready.notify_all()

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        deadline = None if timeout is None else time.monotonic() + timeout
        wakeup = self._wakeup
        while True:
            channel = self._healthy_channel()
            with self._ready:
                if self._inbox or self._closed:
                    break
                if not channel.is_open:
                    continue
                if wakeup.consume():
                    return Batch([])
                remaining = _SLICE if deadline is None else deadline - time.monotonic()
                if remaining <= 0:
                    return Batch([])
                self._ready.wait(min(remaining, _SLICE))
        if not wakeup.consume():  # interrupted: what is there, without gathering more
            self._gather(max_messages)
        return self._take(max_messages)

    def _gather(self, max_messages: int) -> None:
        """While deliveries keep arriving, wait for a full batch (bounded: `_GATHER`).

        Deliveries of a backlog arrive a few per socket read; returning the first few
        would hand out small batches (mq-bridge returns about 7 of 500). A trickle costs
        one `_STEP` at most: no new delivery within it ends the wait.
        """
        self._raise_prefetch(max_messages)
        deadline = time.monotonic() + _GATHER
        with self._ready:
            inbox = self._inbox
            while 0 < len(inbox) < max_messages and not self._closed:
                before = len(inbox)
                self._ready.wait(_STEP)
                now = time.monotonic()
                refilling = now - self._settled_at < _REFILL  # the broker answers an ack
                if (len(inbox) <= before and not refilling) or now >= deadline:
                    return

    def _raise_prefetch(self, max_messages: int) -> None:
        """Without an explicit `prefetch_count`, let `max_messages` be in flight twice."""
        wanted = min(_MAX_AUTO_PREFETCH, 2 * max_messages)
        channel = self._channel
        if self._options.prefetch_count is not None or wanted <= self._prefetch or not channel:
            return
        self._prefetch = wanted
        self._settled_at = time.monotonic()  # more deliveries follow: gather waits for them
        pika_channel = channel.pika
        try:
            channel.connection.post(
                lambda: pika_channel.is_open and pika_channel.basic_qos(0, wanted, True)
            )
        except ClosedError:
            pass

    def _healthy_channel(self) -> Channel:
        channel = self._channel
        if channel is not None and channel.is_open and not self._closed:
            return channel
        with self._lock:
            if self._closed:
                raise ClosedError(f"{self.describe()} is closed")
            return self._open_channel()

    def _take(self, max_messages: int) -> Batch:
        with self._ready:
            if self._closed:
                raise ClosedError(f"{self.describe()} is closed")
            inbox = self._inbox
            count = min(max_messages, len(inbox))
            deliveries = [inbox.popleft() for _ in range(count)]
            epoch = self._epoch
        messages = [self._message(delivery) for delivery in deliveries]
        self._forwarders.expect(messages)
        return Batch(messages, Span(epoch, deliveries[0][0], deliveries[-1][0]))

    def _message(self, delivery: Delivery) -> Any:
        tag, exchange, routing_key, properties, body = delivery
        message = decode(body, properties)
        if not self._tag_source:
            return message
        fields = {
            "amqp_exchange": exchange,
            "amqp_routing_key": routing_key,
            "amqp_delivery_tag": tag,
        }
        metadata = with_source(message.metadata, fields, True)
        return type(message).trusted(message.payload, metadata, message.id_int)

    def ack(self, batch: Batch) -> None:
        self._forwarders.forget(batch.messages)
        self._settle(batch, requeue=None)

    def nack(self, batch: Batch) -> None:
        """Requeue the batch (``basic.nack``, requeue) and what waits in the inbox behind
        it, so the broker hands them out again in their order."""
        self._forwarders.forget(batch.messages)
        self._settle(batch, requeue=True)

    def _settle(self, batch: Batch, requeue: bool | None) -> None:
        span, settlement, channel = batch.token, self._settlement, self._channel
        if not isinstance(span, Span) or settlement is None or channel is None:
            return
        self._settled_at = time.monotonic()
        behind: list[Span] = []
        if requeue:
            with self._ready:
                if self._inbox and self._epoch == span.epoch:
                    behind.append(Span(span.epoch, self._inbox[0][0], self._inbox[-1][0]))
                    self._inbox.clear()
        try:
            channel.connection.post(lambda: settlement.settle([span, *behind], requeue))
        except ClosedError:
            pass  # closed: the broker requeues whatever was not acked

    def status(self) -> EndpointStatus:
        channel = self._channel
        capacity = self._options.prefetch or None
        details = {"queue": self._queue, "mode": "subscribe" if self._options.subscribe_mode
                   else "queue"}  # fmt: skip
        if self._closed or channel is None or not channel.is_open:
            error = "closed" if self._closed else str(channel.error if channel else "not connected")
            return EndpointStatus(False, self.describe(), capacity=capacity, error=error)
        try:
            frame = channel.run(
                lambda done: channel.pika.queue_declare(self._queue, passive=True, callback=done),
                CONNECT_TIMEOUT,
            )
        except EndpointError as error:
            return EndpointStatus(False, self.describe(), capacity=capacity, error=str(error))
        pending = frame.method.message_count + len(self._inbox)
        return EndpointStatus(True, self.describe(), pending, capacity, details=details)

    def describe(self) -> str:
        return self._options.describe()

    def interrupt(self) -> None:
        self._wakeup.interrupt()

    def close(self) -> None:
        """Close the channel (the broker requeues what was not acked) and the lease."""
        with self._lock:
            with self._ready:
                if self._closed:
                    return
                self._closed = True
                self._inbox.clear()
                self._ready.notify_all()
            channel, self._channel = self._channel, None
            lease, self._lease = self._lease, None
        self._forwarders.close()
        if channel is not None:
            channel.close()
        if lease is not None:
            lease.release()
