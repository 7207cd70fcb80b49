"""A `Message` to and from an AMQP 0-9-1 message: pure functions, no I/O.

What travels where (mq-bridge 1.2.0's layout, observed on the broker, so each side reads
the other's messages)::

    Message                  AMQP basic properties / body
    -----------------------  ---------------------------------------------------------
    payload                  body
    id (UUID text)           message_id
    metadata["correlation_id"]  correlation_id      (request/reply)
    metadata["reply_to"]     reply_to               (request/reply)
    other metadata           headers (string values)
    (persistence)            delivery_mode 2, or 1 with `no_persistence`

On the way in the id comes from ``message_id`` when it is a UUID (or a 128-bit integer);
another ``message_id`` gives a stable id hashed from it, and is kept in the metadata as
``amqp_message_id`` as mq-bridge does; without one, a ``mq_bridge.message_id`` header (the
other brokers' convention) is read, else the message gets a new id. Header values that are
not text (numbers, booleans) become their text; ``mqb.src.*`` headers are dropped.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from mq_bridge.endpoints.kit.source_metadata import SOURCE_PREFIX
from mq_bridge.endpoints.kit.wire import MESSAGE_ID_HEADER
from mq_bridge.message import NO_METADATA, Message, new_message_id, normalize_message_id

__all__ = ["PROPERTY_KEYS", "decode", "encode_properties", "split_metadata", "text_of"]

#: Metadata keys carried as AMQP properties, not headers.
PROPERTY_KEYS = frozenset({"correlation_id", "reply_to"})
_UUID = uuid.UUID
_trusted = Message.trusted


def encode_properties(
    properties_class: Any, message: Message, delivery_mode: int, reply_to: str | None = None
) -> Any:
    """The ``BasicProperties`` (pika's `properties_class`) that carry `message`."""
    headers, correlation_id, reply_to = split_metadata(message.metadata_view, reply_to)
    return properties_class(
        delivery_mode=delivery_mode,
        message_id=message.assigned_id(),
        headers=headers,
        correlation_id=correlation_id,
        reply_to=reply_to,
    )


def split_metadata(
    metadata: Mapping[str, str], reply_to: str | None = None
) -> tuple[dict[str, str] | None, str | None, str | None]:
    """``(headers, correlation_id, reply_to)`` for `metadata` (`reply_to` given wins)."""
    if not metadata:
        return None, None, reply_to
    headers: dict[str, str] = {}
    correlation_id = None
    for key, value in metadata.items():
        if key == "correlation_id":
            correlation_id = value
        elif key == "reply_to":
            reply_to = reply_to or value
        elif not key.startswith(SOURCE_PREFIX):
            headers[key] = value
    return headers or None, correlation_id, reply_to


def decode(body: bytes, properties: Any) -> Message:
    """The `Message` an AMQP body and its ``BasicProperties`` carry."""
    headers = properties.headers
    message_id = properties.message_id
    metadata: dict[str, str] = _metadata_of(headers) if headers else {}
    if properties.correlation_id is not None:
        metadata["correlation_id"] = properties.correlation_id
    if properties.reply_to is not None:
        metadata["reply_to"] = properties.reply_to
    header_id = metadata.pop(MESSAGE_ID_HEADER, None)
    if message_id:
        id_value = _id_of(message_id, metadata)
    elif header_id is not None:
        id_value = _id_of(header_id, metadata)
    else:
        id_value = new_message_id()
    if type(body) is not bytes:
        body = bytes(body)
    return _trusted(body, metadata or NO_METADATA, id_value)


def _id_of(text: str, metadata: dict[str, str]) -> int:
    """The id in `text`: a UUID as it is, else stable (and the raw text kept, as the peer)."""
    try:
        return _UUID(text).int
    except ValueError:
        pass
    metadata["amqp_message_id"] = text
    return normalize_message_id(text)


def _metadata_of(headers: Mapping[str, Any]) -> dict[str, str]:
    metadata: dict[str, str] = {}
    for key, value in headers.items():
        if key.startswith(SOURCE_PREFIX):
            continue
        text = value if type(value) is str else text_of(value)
        if text is not None:
            metadata[key] = text
    return metadata


def text_of(value: Any) -> str | None:
    """A header value as text: bytes as UTF-8 (None when they are not), others by `str`."""
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return None if value is None else str(value)
