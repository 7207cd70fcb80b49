"""MQTT control packets the publisher writes and reads (3.1.1 and 5; pure functions, no I/O).

A PUBLISH is built in two parts around its packet id, so a batch is encoded before ids are
given out (`publish_parts`): ``head + id + tail``, where head is the fixed header and the
topic, and tail the v5 properties and the payload (QoS 0 has no id: ``head + tail``).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

from mq_bridge.endpoints.kit.source_metadata import SOURCE_PREFIX
from mq_bridge.endpoints.kit.wire import MESSAGE_ID_HEADER

__all__ = [
    "DISCONNECT",
    "PINGREQ",
    "ConnAck",
    "connect_packet",
    "parse_connack",
    "publish_parts",
    "pubrel",
    "reason_text",
    "refuses_credentials",
    "topic_name",
    "v5_properties",
    "variable_length",
]

PINGREQ = b"\xc0\x00"
DISCONNECT = b"\xe0\x00"
_ID_PROPERTY = b"\x26" + len(MESSAGE_ID_HEADER).to_bytes(2, "big") + MESSAGE_ID_HEADER.encode()
_ID_PROPERTY += b"\x00\x20"  # the id's length: 32 hex digits follow
_PAIRS: dict[tuple[str, str], bytes] = {}  # packed user properties, recently seen
_PAIRS_MAX = 4096

#: Reason codes (v5) and CONNACK return codes (v3), as the specifications name them.
_REASONS = {
    0x10: "No matching subscribers",
    0x80: "Unspecified error",
    0x81: "Malformed Packet",
    0x82: "Protocol Error",
    0x83: "Implementation specific error",
    0x84: "Unsupported Protocol Version",
    0x85: "Client Identifier not valid",
    0x86: "Bad User Name or Password",
    0x87: "Not authorized",
    0x88: "Server unavailable",
    0x89: "Server busy",
    0x8A: "Banned",
    0x8D: "Keep Alive timeout",
    0x8E: "Session taken over",
    0x90: "Topic Name invalid",
    0x92: "Packet Identifier not found",
    0x93: "Receive Maximum exceeded",
    0x95: "Packet too large",
    0x97: "Quota exceeded",
    0x99: "Payload format invalid",
}
_V3_REFUSALS = {
    1: "Unacceptable protocol version",
    2: "Identifier rejected",
    3: "Server unavailable",
    4: "Bad User Name or Password",
    5: "Not authorized",
}


def refuses_credentials(code: int, v5: bool) -> bool:
    """Whether a CONNACK code says the user name or password is wrong (or not allowed)."""
    return code in ((0x86, 0x87) if v5 else (4, 5))


def reason_text(code: int, v5: bool = True) -> str:
    """``Bad User Name or Password (0x86)``; v3 CONNACK codes are 1 to 5."""
    name = _REASONS.get(code) if v5 else _V3_REFUSALS.get(code)
    return f"{name or 'reason'} (0x{code:02X})"


def variable_length(value: int) -> bytes:
    """MQTT's variable byte integer: 7 bits a byte, low first, high bit = more follows."""
    if value < 0x80:
        return bytes((value,))
    if value > 268_435_455:
        raise ValueError(f"an MQTT packet is at most 256 MB, not {value} bytes")
    out = bytearray()
    while True:
        value, digit = divmod(value, 128)
        out.append(digit | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _string(data: bytes) -> bytes:
    if len(data) > 0xFFFF:
        raise ValueError(f"an MQTT string is at most 65535 bytes, not {len(data)}")
    return len(data).to_bytes(2, "big") + data


def v5_properties(metadata: Iterable[tuple[str, str]], id_int: int) -> bytes:
    """The PUBLISH properties of a message: its metadata as user properties, then its id
    (``mq_bridge.message_id``, 32 hex digits), length first; as `codec.pack_properties`
    packs them (the same bytes), with the packed pairs remembered: metadata repeats."""
    pairs = _PAIRS
    parts = []
    for pair in metadata:
        packed = pairs.get(pair)
        if packed is None:
            key, value = pair
            if key.startswith(SOURCE_PREFIX):
                continue
            packed = b"\x26" + _string(key.encode()) + _string(value.encode())
            if len(pairs) >= _PAIRS_MAX:
                pairs.clear()
            pairs[pair] = packed
        parts.append(packed)
    parts.append(_ID_PROPERTY)
    parts.append(b"%032x" % id_int)
    body = b"".join(parts)
    return variable_length(len(body)) + body


def publish_parts(topic: bytes, qos: int, properties: bytes, payload: bytes) -> tuple[bytes, bytes]:
    """(head, tail) of a PUBLISH: the packet is ``head + packet id + tail`` (QoS 0: no id).

    `topic` is the length-prefixed topic name; `properties` the packed v5 properties (b""
    for v3).
    """
    remaining = len(topic) + len(properties) + len(payload) + (2 if qos else 0)
    head = bytes((0x30 | qos << 1,)) + variable_length(remaining) + topic
    return head, properties + payload


def topic_name(topic: str) -> bytes:
    """The length-prefixed topic of a PUBLISH."""
    return _string(topic.encode("utf-8"))


def pubrel(packet_id: bytes) -> bytes:
    """The PUBREL answering a PUBREC (reason Success, which both versions may omit)."""
    return b"\x62\x02" + packet_id


def connect_packet(
    client_id: str,
    *,
    v5: bool,
    keep_alive: int,
    username: str | None,
    password: str | None,
) -> bytes:
    """A CONNECT with a clean start (a publisher keeps no session)."""
    flags = 0x02
    payload = _string(client_id.encode())
    if password is not None and username is None:
        username = ""  # 3.1.1 allows a password only with a user name
    if username is not None:
        flags |= 0x80
        payload += _string(username.encode())
    if password is not None:
        flags |= 0x40
        payload += _string(password.encode())
    header = b"\x00\x04MQTT" + bytes((5 if v5 else 4, flags)) + keep_alive.to_bytes(2, "big")
    if v5:
        header += b"\x00"  # no properties: session expiry 0, the broker's receive maximum
    body = header + payload
    return b"\x10" + variable_length(len(body)) + body


class ConnAck(NamedTuple):
    """A CONNACK: its code (0 = accepted), and the v5 limits and reason string."""

    code: int
    receive_maximum: int
    reason: str | None


def parse_connack(body: bytes, v5: bool) -> ConnAck:
    """The CONNACK's variable header (`body`, after the fixed header)."""
    if len(body) < 2:
        raise ValueError("a CONNACK too short")
    code, receive_maximum, reason = body[1], 65535, None
    if v5 and len(body) > 2:
        length, position = _read_variable(body, 2)
        end = position + length
        while position < end:
            identifier = body[position]
            position += 1
            if identifier == 0x21:  # Receive Maximum
                receive_maximum = int.from_bytes(body[position : position + 2], "big")
            if identifier == 0x1F:  # Reason String
                size = int.from_bytes(body[position : position + 2], "big")
                reason = body[position + 2 : position + 2 + size].decode("utf-8", "replace")
            position += _property_size(identifier, body, position)
    return ConnAck(code, receive_maximum, reason)


def _read_variable(data: bytes, position: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = data[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, position
        shift += 7


_SIZES = {0x11: 4, 0x27: 4, 0x13: 2, 0x21: 2, 0x22: 2}
_SIZES |= dict.fromkeys((0x17, 0x19, 0x24, 0x25, 0x28, 0x29, 0x2A), 1)
_STRINGS = frozenset({0x12, 0x15, 0x16, 0x1A, 0x1C, 0x1F})  # length-prefixed


def _property_size(identifier: int, body: bytes, position: int) -> int:
    """The size of a CONNACK property's value starting at `position`."""
    if identifier in _SIZES:
        return _SIZES[identifier]
    if identifier in _STRINGS:
        return 2 + int.from_bytes(body[position : position + 2], "big")
    if identifier == 0x26:  # User Property: two strings
        first = 2 + int.from_bytes(body[position : position + 2], "big")
        return first + 2 + int.from_bytes(body[position + first : position + first + 2], "big")
    if identifier == 0x0B:  # Subscription Identifier: a variable byte integer
        return _read_variable(body, position)[1] - position
    raise ValueError(f"a CONNACK with an unknown property 0x{identifier:02X}")
