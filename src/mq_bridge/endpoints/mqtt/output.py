"""The `mqtt` output: publishes each message and returns once the broker acknowledged it.

At QoS 1 a `send` returns after every PUBACK, at QoS 2 after every PUBCOMP, at QoS 0 once
paho wrote the bytes to the socket. A batch is pipelined: all of it is handed to paho
(which keeps `max_inflight` unacknowledged on the wire and the rest queued), then every
ack is awaited. A lost connection fails the send with `EndpointUnavailableError` (the
route retries: at least once), and the next send waits up to 5 s for paho's reconnect.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from typing import Any

from mq_bridge.endpoints.base import BuildContext, EndpointStatus, OutputEndpoint
from mq_bridge.endpoints.kit.connections import connection_key
from mq_bridge.endpoints.mqtt.client import MqttClient, check_topic_for_publish, new_client_id
from mq_bridge.endpoints.mqtt.codec import CORRELATION_KEY, decode_v5, encode_v3
from mq_bridge.endpoints.mqtt.options import MqttOptions
from mq_bridge.endpoints.mqtt.replies import ReplyWaiters, request_properties
from mq_bridge.errors import ClosedError, EndpointError, RequestTimeoutError
from mq_bridge.message import Message

__all__ = ["MqttOutput"]

_CONNECT_TIMEOUT = 10.0
_RECONNECT_WAIT = 5.0  # a send waits this long for a reconnect in progress
_PUBLISH_WINDOW = 1000  # unacknowledged publishes on the wire when max_inflight is unset


class MqttOutput(OutputEndpoint):
    """Publishes to `topic` on a connection shared by the process's mqtt outputs."""

    def __init__(self, options: MqttOptions, context: BuildContext) -> None:
        self._options = options
        self._topic = check_topic_for_publish(options.topic, options.describe())
        self._context = context
        self._qos = options.quality
        self._v5 = options.protocol_version == "v5"
        self._lease: Any = None
        self._client: MqttClient | None = None
        self._closed = False
        self._reply_topic: str | None = None
        self._replies = ReplyWaiters()
        self._reply_lock = threading.Lock()

    def connect(self) -> None:
        if self._client is not None:
            return
        options = self._options
        key = connection_key(
            "mqtt",
            url=options.url,
            username=options.username,
            password=options.password,
            tls=options.tls,
            protocol=options.protocol_version,
            keep_alive=options.keep_alive,
            window=options.window,
            client_id=options.client_id,
        )
        lease = self._context.connections.acquire(key, self._open, MqttClient.close)
        self._lease, self._client = lease, lease.connection
        self._closed = False

    def _open(self) -> MqttClient:
        prefix = f"{self._options.client_id}-pub" if self._options.client_id else "mqb-pub"
        # A batch of 500 should cost one round trip: a wide window unless one is set.
        window = self._options.max_inflight or _PUBLISH_WINDOW
        client = MqttClient(self._options, new_client_id(prefix), publish_window=window)
        client.open(_CONNECT_TIMEOUT)
        return client

    def _encode(self, message: Message) -> tuple[bytes, Any]:
        if self._v5:
            return message.payload, request_properties(None, None, message)
        return encode_v3(message), None

    def send(self, messages: Sequence[Message]) -> None:
        client = self._open_client()
        generation = client.ensure_connected(_RECONNECT_WAIT)
        encode = self._encode
        infos = client.publish_many(self._topic, [encode(m) for m in messages], self._qos)
        client.wait_published(infos, generation)

    def send_one(self, message: Message) -> None:
        client = self._open_client()
        generation = client.ensure_connected(_RECONNECT_WAIT)
        payload, properties = self._encode(message)
        client.wait_published(
            [client.publish(self._topic, payload, self._qos, properties)], generation
        )

    def request(self, message: Message, timeout: float | None) -> Message:
        """Publish with ``ResponseTopic``/``CorrelationData`` and wait for the reply (v5)."""
        if not self._v5:
            raise EndpointError(f"{self.describe()}: request/reply needs protocol v5")
        client = self._open_client()
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

    def _subscribe_replies(self, client: MqttClient) -> str:
        with self._reply_lock:
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
        client = self._client
        healthy = client is not None and client.connected
        error = None if healthy else ("closed" if self._closed else "not connected")
        details = {"qos": self._qos, "client_id": client.client_id if client else None}
        return EndpointStatus(healthy=healthy, target=self.describe(), error=error, details=details)

    def describe(self) -> str:
        return self._options.describe()

    def close(self) -> None:
        self._closed = True
        lease, client = self._lease, self._client
        self._lease = self._client = None
        if client is not None and self._reply_topic is not None:
            client.unsubscribe_extra(self._reply_topic)
        if lease is not None:
            lease.release()

    def _open_client(self) -> MqttClient:
        client = self._client
        if client is None:
            raise ClosedError(
                f"{self.describe()} output is closed" if self._closed else "not connected"
            )
        return client
