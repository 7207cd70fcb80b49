"""The `mqtt` output: publishes each message and returns once the broker acknowledged it.

At QoS 1 a `send` returns after every PUBACK, at QoS 2 after every PUBCOMP, at QoS 0 once
the bytes are written to the socket. The sending thread drives the connection itself
(`publisher.DirectPublisher`: it writes the PUBLISHes and reads the acks); a batch is
pipelined within the window (`max_inflight`, or the broker's Receive Maximum if smaller).
A lost connection fails the unacknowledged messages with `EndpointUnavailableError` (the
route retries: at least once); the next send connects again. WebSocket URLs (ws://,
wss://) publish through paho (`client.MqttClient`), as does `request` (its reply topic is a
subscription, which paho's network thread serves).
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from mq_bridge.endpoints.base import BuildContext, EndpointStatus, JsonSender, OutputEndpoint
from mq_bridge.endpoints.kit.connections import connection_key
from mq_bridge.endpoints.mqtt.client import MqttClient, check_topic_for_publish, new_client_id
from mq_bridge.endpoints.mqtt.codec import CORRELATION_KEY, decode_v5, encode_v3
from mq_bridge.endpoints.mqtt.options import MqttOptions
from mq_bridge.endpoints.mqtt.publisher import DirectPublisher
from mq_bridge.endpoints.mqtt.replies import ReplyWaiters, request_properties
from mq_bridge.endpoints.mqtt.wire import publish_parts, topic_name, v5_properties
from mq_bridge.errors import ClosedError, EndpointError, RequestTimeoutError
from mq_bridge.message import (
    Message,
    json_send_parts,
)

__all__ = ["MqttOutput"]

_CONNECT_TIMEOUT = 10.0
_RECONNECT_WAIT = 5.0  # the longest a send waits to connect (again), or for paho to reconnect
_PUBLISH_WINDOW = 1000  # unacknowledged publishes on the wire when max_inflight is unset


class MqttOutput(OutputEndpoint):
    """Publishes to `topic` on a connection shared by the process's mqtt outputs."""

    def __init__(self, options: MqttOptions, context: BuildContext) -> None:
        self._options = options
        self._topic = check_topic_for_publish(options.topic, options.describe())
        self._topic_name = topic_name(self._topic)
        self._context = context
        self._qos = options.quality
        self._v5 = options.protocol_version == "v5"
        self._lease: Any = None
        self._publisher: DirectPublisher | None = None
        self._client: MqttClient | None = None  # paho: WebSockets, or requests
        self._requests_lease: Any = None
        self._closed = False
        self._reply_topic: str | None = None
        self._replies = ReplyWaiters()
        self._reply_lock = threading.Lock()
        self._subscribe_lock = threading.Lock()

    def _key(self, use: str) -> Any:
        options = self._options
        return connection_key(
            f"mqtt-{use}",
            url=options.url,
            username=options.username,
            password=options.password,
            tls=options.tls,
            protocol=options.protocol_version,
            keep_alive=options.keep_alive,
            window=options.window,
            client_id=options.client_id,
        )

    def connect(self) -> None:
        if self._lease is not None:
            return
        connections = self._context.connections
        if self._options.address.websockets:
            paho = connections.acquire(self._key("publish"), self._open_paho, MqttClient.close)
            self._lease, self._client = paho, paho.connection
        else:
            direct = connections.acquire(
                self._key("publish"), self._open_direct, DirectPublisher.close
            )
            self._lease, self._publisher = direct, direct.connection
        self._closed = False

    def _client_id(self) -> str:
        prefix = f"{self._options.client_id}-pub" if self._options.client_id else "mqb-pub"
        return new_client_id(prefix)

    def _open_direct(self) -> DirectPublisher:
        # A batch of 500 should cost about one round trip: a wide window unless one is set.
        window = self._options.max_inflight or _PUBLISH_WINDOW
        publisher = DirectPublisher(self._options, self._client_id(), window)
        publisher.open(_CONNECT_TIMEOUT)
        return publisher

    def _open_paho(self) -> MqttClient:
        window = self._options.max_inflight or _PUBLISH_WINDOW
        client = MqttClient(self._options, self._client_id(), publish_window=window)
        client.open(_CONNECT_TIMEOUT)
        return client

    # -- sending --------------------------------------------------------------------------

    def _parts(self, message: Message) -> tuple[bytes, bytes]:
        """The PUBLISH of `message` around its packet id (`wire.publish_parts`)."""
        if self._v5:
            properties = v5_properties(message.metadata_view.items(), message.id_int)
            return publish_parts(self._topic_name, self._qos, properties, message.payload)
        return publish_parts(self._topic_name, self._qos, b"", encode_v3(message))

    def send(self, messages: Sequence[Message]) -> None:
        publisher = self._publisher
        if publisher is None:
            self._paho_send(messages)
            return
        parts = self._parts
        publisher.publish([parts(m) for m in messages], self._qos, _RECONNECT_WAIT)

    def send_one(self, message: Message) -> None:
        publisher = self._publisher
        if publisher is None:
            self._paho_send([message])
            return
        publisher.publish([self._parts(message)], self._qos, _RECONNECT_WAIT)

    def json_sender(self) -> JsonSender | None:
        """`send_json` without building a `Message` (v5): the same checks, the same bytes."""
        publisher = self._publisher
        if publisher is None or not self._v5:
            return None
        topic, qos, publish = self._topic_name, self._qos, publisher.publish

        def send_json(data: Any, metadata: Mapping[str, str] | None, id: str | int | None) -> None:
            payload, meta, id_value = json_send_parts(data, metadata, id)
            properties = v5_properties(meta.items(), id_value)
            publish([publish_parts(topic, qos, properties, payload)], qos, _RECONNECT_WAIT)

        return send_json

    def _paho_send(self, messages: Sequence[Message]) -> None:
        client = self._paho()
        generation = client.ensure_connected(_RECONNECT_WAIT)
        infos = client.publish_many(self._topic, [self._encode(m) for m in messages], self._qos)
        client.wait_published(infos, generation)

    def _encode(self, message: Message) -> tuple[bytes, Any]:
        if self._v5:
            return message.payload, request_properties(None, None, message)
        return encode_v3(message), None

    def request(self, message: Message, timeout: float | None) -> Message:
        """Publish with ``ResponseTopic``/``CorrelationData`` and wait for the reply (v5)."""
        if not self._v5:
            raise EndpointError(f"{self.describe()}: request/reply needs protocol v5")
        client = self._paho()
        reply_topic = self._subscribe_replies(client)
        correlation_id = message.get(CORRELATION_KEY) or message.assigned_id()
        correlation = correlation_id.encode("utf-8")
        event, box = self._replies.expect(correlation)
        started = time.monotonic()
        try:
            generation = client.ensure_connected(_RECONNECT_WAIT)
            properties = request_properties(reply_topic, correlation_id, message)
            info = client.publish(self._topic, message.payload, max(self._qos, 1), properties)
            client.wait_published([info], generation)
            remaining = None if timeout is None else max(0.0, timeout - time.monotonic() + started)
            if not event.wait(remaining):
                raise RequestTimeoutError(
                    f"no reply on {reply_topic!r} within {timeout}s (correlation_id "
                    f"{correlation_id}); does a route answer requests on {self._topic!r}?"
                )
        finally:
            self._replies.forget(correlation)
        return box[0]

    def _paho(self) -> MqttClient:
        """The paho client: the connection itself (WebSockets), else one for requests, made
        at the first request (its reply subscription and the request share it, so the
        broker has the subscription before the request)."""
        if self._lease is None:
            raise ClosedError(
                f"{self.describe()} output is closed" if self._closed else "not connected"
            )
        with self._reply_lock:
            if self._client is None:
                key = self._key("requests")
                lease = self._context.connections.acquire(key, self._open_paho, MqttClient.close)
                self._requests_lease, self._client = lease, lease.connection
            return self._client

    def _subscribe_replies(self, client: MqttClient) -> str:
        with self._subscribe_lock:
            if self._reply_topic is None:
                topic = f"mqb/reply/{uuid.uuid4().hex}"
                client.subscribe_extra(topic, self._on_reply, _CONNECT_TIMEOUT)
                self._reply_topic = topic
            return self._reply_topic

    def _on_reply(self, raw: Any) -> None:
        props = getattr(raw, "properties", None)
        correlation = getattr(props, "CorrelationData", None)
        message = decode_v5(raw.payload, getattr(props, "UserProperty", None), None, correlation)
        self._replies.deliver(correlation, message)

    def status(self) -> EndpointStatus:
        connection = self._publisher or self._client
        healthy = connection is not None and connection.connected
        error = None if healthy else ("closed" if self._closed else "not connected")
        client_id = connection.client_id if connection is not None else None
        details = {"qos": self._qos, "client_id": client_id}
        return EndpointStatus(healthy=healthy, target=self.describe(), error=error, details=details)

    def describe(self) -> str:
        return self._options.describe()

    def close(self) -> None:
        self._closed = True
        leases = (self._lease, self._requests_lease)
        client, reply_topic = self._client, self._reply_topic
        self._lease = self._requests_lease = self._publisher = self._client = None
        self._reply_topic = None
        if client is not None and reply_topic is not None:
            client.unsubscribe_extra(reply_topic)
        for lease in leases:
            if lease is not None:
                lease.release()
