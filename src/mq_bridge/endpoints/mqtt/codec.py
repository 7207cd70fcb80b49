"""Message <-> MQTT wire format, as mq-bridge 1.2.0 writes it (pure functions, no I/O).

MQTT v5: the payload as is; metadata and id travel as user properties::

    PUBLISH  payload = message.payload
             UserProperty = [(key, value) for each metadata entry (no mqb.src.*),
                             ("mq_bridge.message_id", "<UUID as 32 hex digits>")]
             [ResponseTopic, CorrelationData]   requests and replies only

MQTT 3.1.1 has no properties, so a message with metadata travels in an envelope (a message
without metadata travels as its bare payload, and its id is lost, as with mq-bridge)::

    {"message_id": "<UUID>", "payload": "<UTF-8 text>", "metadata": {"k": "v"}}
    {"message_id": "<UUID>", "payload_base64": "<base64>", "metadata": {...}}  (binary)

On the way in, v5's ResponseTopic and CorrelationData become the ``reply_to`` and
``correlation_id`` metadata (mq-bridge's names), and a v3 payload is unwrapped only when it
is exactly such an envelope.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterable
from typing import Any

from mq_bridge.endpoints.kit.source_metadata import SOURCE_PREFIX
from mq_bridge.endpoints.kit.wire import MESSAGE_ID_HEADER, headers_for, message_from_wire
from mq_bridge.endpoints.mqtt.wire import variable_length
from mq_bridge.message import Message, dump_json, normalize_message_id

__all__ = [
    "CORRELATION_KEY",
    "REPLY_TO_KEY",
    "PackedProperties",
    "decode_v3",
    "decode_v5",
    "encode_v3",
    "pack_properties",
    "user_properties",
]

REPLY_TO_KEY = "reply_to"
CORRELATION_KEY = "correlation_id"
_ENVELOPE_KEYS = frozenset({"message_id", "payload", "payload_base64", "metadata"})


def user_properties(message: Message) -> list[tuple[str, str]]:
    """The v5 user properties carrying `message`'s metadata and id.

    The id is written as mq-bridge writes it, 32 hex digits without dashes: mq-bridge 1.2.0
    does not recognise the dashed form and would keep it as metadata (we read both).
    """
    properties = [
        (key, value)
        for key, value in message.metadata_view.items()
        if not key.startswith(SOURCE_PREFIX)
    ]
    properties.append((MESSAGE_ID_HEADER, f"{message.id_int:032x}"))
    return properties


def pack_properties(
    properties: list[tuple[str, str]],
    response_topic: str | None = None,
    correlation: bytes | None = None,
) -> bytes:
    """The v5 PUBLISH properties section: length, then UserProperty (0x26) pairs and the
    optional ResponseTopic (0x08) and CorrelationData (0x09), as paho would pack them.

    >>> pack_properties([("k", "v")])
    b'\\x07&\\x00\\x01k\\x00\\x01v'
    """
    parts = []
    if response_topic is not None:
        parts.append(b"\x08" + _string(response_topic.encode("utf-8")))
    if correlation is not None:
        parts.append(b"\x09" + _string(correlation))
    for key, value in properties:
        parts.append(b"\x26" + _string(key.encode("utf-8")) + _string(value.encode("utf-8")))
    body = b"".join(parts)
    return variable_length(len(body)) + body


class PackedProperties:
    """Packed PUBLISH properties in place of paho's `Properties`, whose construction and
    packing cost more than the rest of a publish: paho only calls `pack()` on them (and
    formats them when its debug logging is on)."""

    __slots__ = ("packed",)
    packetType = 3  # PUBLISH, as paho's PacketTypes numbers it

    def __init__(self, packed: bytes) -> None:
        self.packed = packed

    def pack(self) -> bytes:
        return self.packed

    def __repr__(self) -> str:
        return f"PackedProperties(<{len(self.packed)} bytes>)"


def _string(data: bytes) -> bytes:
    if len(data) > 0xFFFF:
        raise ValueError(f"an MQTT property value is at most 65535 bytes, not {len(data)}")
    return len(data).to_bytes(2, "big") + data


def decode_v5(
    payload: bytes,
    properties: Iterable[tuple[str, str]] | None,
    response_topic: str | None = None,
    correlation: bytes | None = None,
) -> Message:
    """The message in a v5 PUBLISH: payload, user properties, request properties."""
    headers: dict[str, str | bytes] = dict(properties or ())
    if response_topic is not None:
        headers.setdefault(REPLY_TO_KEY, response_topic)
    if correlation is not None:
        headers.setdefault(CORRELATION_KEY, correlation_text(correlation))
    return message_from_wire(payload, headers)


def correlation_text(correlation: bytes) -> str:
    """CorrelationData as metadata text: UTF-8 when it is, else hex."""
    try:
        return correlation.decode("utf-8")
    except UnicodeDecodeError:
        return correlation.hex()


def encode_v3(message: Message) -> bytes:
    """A v3 payload: the bare payload without metadata, else the JSON envelope."""
    metadata = message.metadata_view
    if not metadata:
        return message.payload
    envelope: dict[str, Any] = {"message_id": message.assigned_id()}
    try:
        envelope["payload"] = message.payload.decode("utf-8")
    except UnicodeDecodeError:
        envelope["payload_base64"] = base64.b64encode(message.payload).decode("ascii")
    headers = headers_for(message)
    del headers[MESSAGE_ID_HEADER]
    envelope["metadata"] = headers
    return dump_json(envelope)


def decode_v3(payload: bytes) -> Message:
    """The message in a v3 payload: an envelope's content, else the bare payload."""
    envelope = _envelope(payload)
    if envelope is None:
        return message_from_wire(payload, None)
    try:
        if "payload_base64" in envelope:
            body = base64.b64decode(envelope["payload_base64"], validate=True)
        else:
            body = str(envelope["payload"]).encode("utf-8")
        headers = {str(k): str(v) for k, v in (envelope.get("metadata") or {}).items()}
        headers[MESSAGE_ID_HEADER] = _id_text(envelope["message_id"])
    except (binascii.Error, AttributeError, KeyError, TypeError, ValueError):
        return message_from_wire(payload, None)
    return message_from_wire(body, headers)


def _envelope(payload: bytes) -> dict[str, Any] | None:
    """`payload` as an envelope dict, or None when it is not one (most payloads: cheaply)."""
    if not payload.startswith(b"{") or b'"message_id"' not in payload:
        return None
    try:
        value = json.loads(payload)
    except ValueError:
        return None
    if not isinstance(value, dict) or "message_id" not in value or not set(value) <= _ENVELOPE_KEYS:
        return None
    if ("payload" in value) == ("payload_base64" in value):
        return None
    return value


def _id_text(value: object) -> str:
    """An envelope's id as text the wire layer parses (a UUID, or a 128-bit integer)."""
    if isinstance(value, int):
        return str(normalize_message_id(value))
    return str(value)
