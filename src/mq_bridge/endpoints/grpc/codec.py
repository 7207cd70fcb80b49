"""`Message` <-> ``mqbridge.BridgeMessage``, and the answers of ``Publish``: pure functions.

    BridgeMessage { payload = 1: bytes, id = 2: string, metadata = 3: map<string, string> }

The id travels as a UUID string (mq-bridge writes ``format_uuid``); reading also accepts
``0x`` hex and decimal text, as mq-bridge does, and an empty or unreadable id gets a new
one. A publisher adds its `topic` as the ``mq_bridge.topic`` metadata unless the message
has one; the server routes by it. ``mqb.src.*`` metadata is dropped both ways.
"""

from __future__ import annotations

import uuid
from typing import Any

from mq_bridge.endpoints.grpc.options import DEFAULT_TOPIC
from mq_bridge.endpoints.grpc.proto import ACK, NACK, messages
from mq_bridge.endpoints.kit.source_metadata import SOURCE_PREFIX, drop_source_keys
from mq_bridge.message import NO_METADATA, Message, fields_of, new_message_id

__all__ = [
    "TOPIC_KEY",
    "ack_response",
    "from_bridge",
    "id_of",
    "nack_response",
    "reply_response",
    "to_bridge",
    "topic_of",
]

TOPIC_KEY = "mq_bridge.topic"


def to_bridge(message: Message, topic: str | None) -> Any:
    """The ``BridgeMessage`` for `message`, with ``mq_bridge.topic`` = `topic` if unset."""
    metadata, payload, id_value = fields_of(message)
    if id_value is None:
        id_value = message.id_int
    metadata = drop_source_keys(metadata)
    if topic is not None and TOPIC_KEY not in metadata:
        metadata = {**metadata, TOPIC_KEY: topic}
    return messages().BridgeMessage(
        payload=payload, id=str(uuid.UUID(int=id_value)), metadata=metadata
    )


def from_bridge(bridge: Any) -> Message:
    """The `Message` a ``BridgeMessage`` carries."""
    metadata = {
        key: value for key, value in bridge.metadata.items() if not key.startswith(SOURCE_PREFIX)
    }
    return Message.trusted(bridge.payload, metadata or NO_METADATA, id_of(bridge.id))


def id_of(text: str) -> int:
    """A ``BridgeMessage.id`` as a 128-bit id: a UUID, ``0x`` hex or decimal; else new."""
    text = text.strip()
    if not text:
        return new_message_id()
    try:
        return uuid.UUID(text).int
    except ValueError:
        pass
    try:
        number = int(text[2:], 16) if text[:2].lower() == "0x" else int(text, 10)
    except ValueError:
        return new_message_id()
    return number if 0 <= number < 1 << 128 else new_message_id()


def topic_of(bridge: Any) -> str:
    """The topic a published message is for (mq-bridge's rule: blank means "default")."""
    topic = bridge.metadata.get(TOPIC_KEY, "").strip()
    return topic or DEFAULT_TOPIC


def ack_response(message_id: str, status: int = ACK, reason: str = "") -> Any:
    """A ``PublishResponse`` holding an ``Ack`` (ACK, or NACK with its reason)."""
    proto = messages()
    return proto.PublishResponse(ack=proto.Ack(id=message_id, status=status, reason=reason))


def nack_response(message_id: str, reason: str) -> Any:
    return ack_response(message_id, NACK, reason)


def reply_response(message_id: str, reply: Message) -> Any:
    """A ``PublishResponse`` holding the route's reply; its id is the request's (as
    mq-bridge answers), so the requester can match it."""
    bridge = to_bridge(reply, None)
    bridge.id = message_id
    return messages().PublishResponse(reply=bridge)
