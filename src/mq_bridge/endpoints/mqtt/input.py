"""The `mqtt` input: a subscription whose messages are acknowledged only once committed.

paho's network thread puts each PUBLISH in a bounded buffer; `receive` takes batches out::

    broker --PUBLISH--> network thread --> buffer (bounded) --> receive() --> Batch
    broker <--PUBACK--- ack(batch) (one write for the whole batch)

Backpressure never hangs: the broker sends at most `window` unacknowledged QoS 1/2
messages (the v5 receive maximum; Mosquitto's own limit, 20 by default, for v3), so the
buffer holds at most that many; QoS 0 messages wait in the network thread for room.
`receive` returns what is there as soon as something is, and [] at its timeout.

`nack` puts the batch back at the head of the buffer: handed out again at once, in order,
still unacknowledged at the broker. Acks and buffered messages belong to one connection:
after a reconnect a persistent session redelivers everything unacknowledged (so the old
buffer is dropped and acks of older batches are skipped), a clean session loses it.
"""

from __future__ import annotations

import collections
import threading
import time
from typing import Any, NamedTuple

from mq_bridge.endpoints.base import Batch, BuildContext, EndpointStatus, InputEndpoint
from mq_bridge.endpoints.kit.source_metadata import with_source
from mq_bridge.endpoints.kit.wakeup import Wakeup
from mq_bridge.endpoints.mqtt.client import MqttClient, new_client_id
from mq_bridge.endpoints.mqtt.codec import decode_v3, decode_v5
from mq_bridge.endpoints.mqtt.options import MqttOptions
from mq_bridge.endpoints.mqtt.replies import ReplyForwarders
from mq_bridge.errors import ClosedError, ConfigError
from mq_bridge.message import Message

__all__ = ["MqttInput"]

_CONNECT_TIMEOUT = 10.0  # within the route's startup timeout (30 s by default)


class _Received(NamedTuple):
    """A buffered PUBLISH: its message, packet id, QoS and the connection it came on."""

    message: Message
    mid: int
    qos: int
    generation: int


class _Token(NamedTuple):
    items: list[_Received]


class MqttInput(InputEndpoint):
    """Subscribes `topic` and hands out batches; `ack` PUBACKs them (see module docstring)."""

    acks_in_any_order = True

    def __init__(self, options: MqttOptions, context: BuildContext) -> None:
        if not options.topic:
            raise ConfigError("an mqtt input needs a `topic`", path="mqtt.topic")
        self._options = options
        self._context = context
        self._topic = options.topic
        self._client_id = options.client_id or _default_client_id(options, context)
        self._buffer: collections.deque[_Received] = collections.deque()
        self._limit = max(options.capacity, options.window)
        self._ready = threading.Condition()
        self._wakeup = Wakeup(self._ready)
        self._closed = False
        self._lease: Any = None
        self._client: MqttClient | None = None
        self._forwarders: ReplyForwarders | None = None
        self._handed_out = 0

    def connect(self) -> None:
        if self._client is not None:
            return
        self._closed = False
        lease = self._context.connections.acquire(
            ("mqtt-input", self._client_id), self._open, MqttClient.close, shared=False
        )
        self._lease, self._client = lease, lease.connection
        self._forwarders = ReplyForwarders(self._context.replies, lease.connection)

    def _open(self) -> MqttClient:
        options = self._options
        client = MqttClient(
            options,
            self._client_id,
            clean_start=options.clean_session,
            manual_ack=not options.delayed_ack,
            subscription=(self._topic, options.quality),
            on_message=self._on_message,
            on_connected=self._on_connected,
        )
        client.open(_CONNECT_TIMEOUT)
        return client

    # -- network thread ------------------------------------------------------------------

    def _on_message(self, raw: Any, generation: int) -> None:
        item = _Received(self._decode(raw), raw.mid, raw.qos, generation)
        with self._ready:
            # QoS 0 has no window: wait for room (TCP pushes back on the broker).
            while len(self._buffer) >= self._limit and not self._closed:
                self._ready.wait(0.1)
            self._buffer.append(item)
            self._ready.notify_all()

    def _decode(self, raw: Any) -> Message:
        if self._options.protocol_version == "v5":
            props = getattr(raw, "properties", None)
            message = decode_v5(
                raw.payload,
                getattr(props, "UserProperty", None),
                getattr(props, "ResponseTopic", None),
                getattr(props, "CorrelationData", None),
            )
        else:
            message = decode_v3(raw.payload)
        if self._context.source_metadata:
            metadata = with_source(message.metadata, {"mqtt_topic": raw.topic}, True)
            message = Message.trusted(message.payload, metadata, message.id_int)
        return message

    def _on_connected(self, generation: int) -> None:
        if self._options.clean_session or generation == 1:
            return
        # A resumed session redelivers whatever was not acknowledged: drop our copies.
        with self._ready:
            self._buffer = collections.deque(r for r in self._buffer if r.generation == generation)

    # -- the route's thread --------------------------------------------------------------

    def receive(self, max_messages: int, timeout: float | None) -> Batch:
        self._open_client()
        deadline = None if timeout is None else time.monotonic() + timeout
        with self._ready:
            self._wakeup.wait_until(lambda: self._buffer or self._closed, deadline)
            buffer = self._buffer  # (a resumed session replaces it)
            if not buffer:
                if self._closed:
                    raise ClosedError(f"{self.describe()} is closed")
                return Batch([])
            count = min(max_messages, len(buffer))
            items = [buffer.popleft() for _ in range(count)]
            self._ready.notify_all()
        self._handed_out += len(items)
        if self._forwarders is not None:
            self._forwarders.expect(item.message for item in items)
        return Batch([item.message for item in items], _Token(items))

    def ack(self, batch: Batch) -> None:
        token = batch.token
        if not isinstance(token, _Token):
            return
        client = self._open_client()
        self._settle(token)
        if self._options.delayed_ack:
            return  # paho acknowledged on receipt
        generation = client.generation
        qos1 = [r.mid for r in token.items if r.qos == 1 and r.generation == generation]
        client.ack_many(qos1, generation)
        for item in token.items:
            if item.qos == 2 and item.generation == generation:
                client.client.ack(item.mid, 2)

    def nack(self, batch: Batch) -> None:
        """Hand the batch out again first (it stays unacknowledged at the broker)."""
        token = batch.token
        if not isinstance(token, _Token) or self._closed:
            return
        self._settle(token)
        client = self._client_or_none()
        current = client.generation if client is not None else 0
        keep = [r for r in token.items if r.generation == current or self._options.clean_session]
        with self._ready:
            self._buffer.extendleft(reversed(keep))
            self._ready.notify_all()

    def _settle(self, token: _Token) -> None:
        self._handed_out -= len(token.items)
        if self._forwarders is not None:
            self._forwarders.forget(item.message for item in token.items)

    def status(self) -> EndpointStatus:
        client = self._client_or_none()
        healthy = client is not None and client.connected
        details = {
            "client_id": self._client_id,
            "connected": healthy,
            "buffered": len(self._buffer),
            "unacknowledged": self._handed_out,
            "clean_session": self._options.clean_session,
        }
        error = None if healthy else ("closed" if self._closed else "not connected")
        return EndpointStatus(
            healthy=healthy,
            target=self.describe(),
            capacity=self._limit,
            error=error,
            details=details,
        )

    def describe(self) -> str:
        return self._options.describe()

    def interrupt(self) -> None:
        self._wakeup.interrupt()

    def close(self) -> None:
        """Disconnect without acknowledging: a persistent session keeps what is unacked."""
        with self._ready:
            self._closed = True
            self._ready.notify_all()
        lease, self._lease, self._client = self._lease, None, None
        if self._forwarders is not None:
            self._forwarders.close()  # unanswered requests: their waiters leave the registry
        if lease is not None:
            lease.release()
        self._buffer.clear()
        self._handed_out = 0

    def _client_or_none(self) -> MqttClient | None:
        return self._client

    def _open_client(self) -> MqttClient:
        client = self._client
        if client is None:
            raise ClosedError(f"{self.describe()} is closed" if self._closed else "not connected")
        return client


def _default_client_id(options: MqttOptions, context: BuildContext) -> str:
    """A persistent session needs a stable id (the route's); a clean one, a unique id."""
    if options.clean_session:
        return new_client_id("mqb")
    return f"mqb-{context.route_name}"
