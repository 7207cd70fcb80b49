"""The AMQP 0-9-1 frames of a publish, built as bytes: pure functions, no I/O.

pika's ``basic_publish`` builds three frame objects per message and marshals each (about
10 µs); a publish is mostly constant, so `Publish` keeps the method frame as bytes and
writes only what changes per message (sizes, properties)::

    method frame   01 | channel | size | Basic.Publish(exchange, routing key, mandatory) | CE
    header frame   02 | channel | size | class 60, weight 0, body size, property flags,
                                         properties (headers, delivery mode,
                                         correlation id, reply-to, message id) | CE
    body frame(s)  03 | channel | size | payload (split at frame_max - 8) | CE

The properties are written in the spec's order, the header table with ``S`` (long string)
values, as pika writes them (a test compares the bytes with pika's). A name or value that
does not fit its field (a short string over 255 bytes) raises `ValueError`.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping

from mq_bridge.endpoints.amqp.codec import split_metadata
from mq_bridge.message import Message

__all__ = ["Publish", "method_frame"]

_FRAME = struct.Struct(">BHI")  # type, channel, payload size
_CONTENT_HEADER = struct.Struct(">BHIHHQH")  # frame head + class, weight, body size, flags
_FRAME_END = b"\xce"
_BASIC = 60
_PUBLISH = (60, 40)
# Property flags (bit 15 is the first property, content-type).
_HEADERS, _DELIVERY_MODE, _CORRELATION_ID, _REPLY_TO, _MESSAGE_ID = (
    1 << 13, 1 << 12, 1 << 10, 1 << 9, 1 << 7,
)  # fmt: skip
_U32 = struct.Struct(">I")


def method_frame(channel: int, class_id: int, method_id: int, arguments: bytes) -> bytes:
    """A method frame of `channel` with already encoded `arguments`."""
    payload = struct.pack(">HH", class_id, method_id) + arguments
    return _FRAME.pack(1, channel, len(payload)) + payload + _FRAME_END


#: RabbitMQ's direct reply-to pseudo-queue: a mandatory publish to it is always returned as
#: unroutable, even though it is delivered (RabbitMQ's direct reply-to guide), so a reply to
#: it is published without `mandatory`.
DIRECT_REPLY_TO_PREFIX = "amq.rabbitmq.reply-to"


def is_direct_reply_to(routing_key: str) -> bool:
    return routing_key.startswith(DIRECT_REPLY_TO_PREFIX)


def short_string(text: str) -> bytes:
    data = text.encode()
    if len(data) > 255:
        raise ValueError(f"{text[:40]!r}...: over 255 bytes, too long for an AMQP short string")
    return bytes((len(data),)) + data


class Publish:
    """The frames of publishes to one (exchange, routing key) on one channel."""

    __slots__ = ("_body_max", "_channel", "_delivery_mode", "_exchange", "_mandatory", "_methods")

    def __init__(
        self, channel: int, frame_max: int, exchange: str, mandatory: bool, delivery_mode: int
    ) -> None:
        self._channel = channel
        self._body_max = frame_max - 8  # frame head (7) and end (1)
        self._exchange = exchange
        self._delivery_mode = bytes((delivery_mode,))
        self._methods: dict[str, bytes] = {}
        self._mandatory = mandatory

    def method(self, routing_key: str) -> bytes:
        """The Basic.Publish frame to `routing_key` (kept: usually there is one)."""
        frame = self._methods.get(routing_key)
        if frame is None:
            mandatory = self._mandatory and not is_direct_reply_to(routing_key)
            arguments = (
                b"\x00\x00"  # ticket
                + short_string(self._exchange)
                + short_string(routing_key)
                + (b"\x01" if mandatory else b"\x00")  # mandatory, not immediate
            )
            frame = self._methods[routing_key] = method_frame(self._channel, *_PUBLISH, arguments)
        return frame

    def message(
        self, message: Message, routing_key: str, reply_to: str | None, out: list[bytes]
    ) -> None:
        """Append the frames that publish `message` to `out`."""
        headers, correlation_id, reply_to = split_metadata(message.metadata_view, reply_to)
        flags = _DELIVERY_MODE | _MESSAGE_ID
        properties = []
        if headers:
            flags |= _HEADERS
            properties.append(_table(headers))
        properties.append(self._delivery_mode)
        if correlation_id is not None:
            flags |= _CORRELATION_ID
            properties.append(short_string(correlation_id))
        if reply_to is not None:
            flags |= _REPLY_TO
            properties.append(short_string(reply_to))
        properties.append(short_string(message.assigned_id()))
        encoded = b"".join(properties)
        payload = message.payload
        size = len(payload)
        channel = self._channel
        out.append(self.method(routing_key or reply_to or ""))
        out.append(_CONTENT_HEADER.pack(2, channel, 14 + len(encoded), _BASIC, 0, size, flags))
        out.append(encoded)
        out.append(_FRAME_END)
        step = self._body_max
        for start in range(0, size, step):
            chunk = payload[start : start + step]
            out.append(_FRAME.pack(3, channel, len(chunk)))
            out.append(chunk)
            out.append(_FRAME_END)


def _table(headers: Mapping[str, str]) -> bytes:
    """An AMQP field table of text values (``S``: long strings)."""
    parts = []
    for key, value in headers.items():
        data = value.encode()
        parts.append(short_string(key) + b"S" + _U32.pack(len(data)) + data)
    body = b"".join(parts)
    return _U32.pack(len(body)) + body
