"""MQTT v5 request/reply: ``ResponseTopic`` + ``CorrelationData``, as mq-bridge does it.

A requester (`MqttOutput.request`) publishes with ``ResponseTopic`` = its private reply
topic and ``CorrelationData`` = the request's ``correlation_id``, and waits for a message
on the reply topic with the same ``CorrelationData`` (`ReplyWaiters`).

A route whose input receives such a request answers it through its `response` output: the
input registers a forwarder for the request's ``correlation_id`` in the process's
`ReplyRegistry`, so the handler's result, delivered there by `response`, is published to
the request's ``reply_to`` topic with the same ``CorrelationData``.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from mq_bridge.endpoints.kit import replies
from mq_bridge.endpoints.mqtt.codec import (
    PackedProperties,
    pack_properties,
    user_properties,
)
from mq_bridge.message import Message

if TYPE_CHECKING:
    from mq_bridge.endpoints.mqtt.client import MqttClient

__all__ = ["ReplyForwarders", "ReplyWaiters", "request_properties"]


def request_properties(
    reply_to: str | None, correlation: str | None, message: Message
) -> PackedProperties:
    """v5 PUBLISH properties: the message's user properties, and the request ones if given."""
    data = None if correlation is None else correlation.encode("utf-8")
    return PackedProperties(pack_properties(user_properties(message), reply_to, data))


class ReplyForwarders(replies.ReplyForwarders):
    """Publishes each reply to its request's ``reply_to`` topic (QoS 1, awaited)."""

    def __init__(self, registry: replies.ReplyRegistry, client: MqttClient) -> None:
        super().__init__(registry)
        self._client = client

    def forward(self, reply: Message, reply_to: str, correlation_id: str) -> None:
        client = self._client
        generation = client.ensure_connected(10.0)
        properties = request_properties(None, correlation_id, reply)
        info = client.publish(reply_to, reply.payload, 1, properties)
        client.wait_published([info], generation)


class ReplyWaiters:
    """Requests of one output waiting for replies on its reply topic."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._waiting: dict[bytes, tuple[threading.Event, list[Message]]] = {}

    def expect(self, correlation: bytes) -> tuple[threading.Event, list[Message]]:
        slot: tuple[threading.Event, list[Message]] = (threading.Event(), [])
        with self._lock:
            self._waiting[correlation] = slot
        return slot

    def forget(self, correlation: bytes) -> None:
        with self._lock:
            self._waiting.pop(correlation, None)

    def deliver(self, correlation: bytes | None, message: Message) -> None:
        """A reply arrived (network thread): wake its requester, drop it if none waits."""
        with self._lock:
            slot = self._waiting.pop(correlation, None) if correlation is not None else None
        if slot is not None:
            slot[1].append(message)
            slot[0].set()
