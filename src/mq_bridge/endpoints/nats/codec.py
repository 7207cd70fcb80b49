"""Pure wire encoding for the `nats` endpoint: `Message` <-> NATS protocol bytes (no I/O).

A message travels as an ``HPUB`` (publish with headers); the headers are its metadata plus
its id (`kit.wire`), the id written as mq-bridge writes it (32 hex digits, which mq-bridge
1.2.0 parses; our reader also takes the canonical UUID form)::

    HPUB <subject> [<reply>] <header bytes> <total bytes>\\r\\n
    NATS/1.0\\r\\n
    kind: order.created\\r\\n
    mq_bridge.message_id: 0190f3c2a1b24c7d8e9f00112233aabb\\r\\n
    \\r\\n
    <payload>\\r\\n

A JetStream delivery's reply subject is its ack subject, which holds its position::

    $JS.ACK.<stream>.<consumer>.<delivered>.<stream seq>.<consumer seq>.<time>.<pending>
    $JS.ACK.<domain>.<account hash>.<stream>.<consumer>.<delivered>.<stream seq>....  (v2)

A server status (pull request ended, no responders...) is a header block whose first
line carries a code, ``NATS/1.0 404 No Messages``, and no payload.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from mq_bridge.endpoints.kit.source_metadata import SOURCE_PREFIX, with_source
from mq_bridge.endpoints.kit.wire import MESSAGE_ID_HEADER, headers_for, message_from_wire
from mq_bridge.endpoints.kit.wire import position_id as _position_id
from mq_bridge.message import NO_METADATA, Message

__all__ = [
    "ACK",
    "NAK",
    "RawMessage",
    "ack_commands",
    "ack_position",
    "decode_delivery",
    "decode_headers",
    "encode_headers",
    "header_block",
    "publish_command",
    "status_of",
]

#: (subject, reply, payload, header block or None) as the protocol parser hands them over.
RawMessage = tuple[bytes, bytes, bytes, "bytes | None"]

ACK = b"+ACK"
NAK = b"-NAK"
_STATUS_PREFIX = b"NATS/1.0 "
_HEAD = b"NATS/1.0\r\n"
_CRLF = b"\r\n"
_ID_LINE = MESSAGE_ID_HEADER.encode() + b": %032x\r\n"
_DEDUP_LINE = b"Nats-Msg-Id: %032x\r\n"
_ID_PREFIX = b"\r\n" + MESSAGE_ID_HEADER.encode() + b": "
_HEADER_NAME = re.compile(r"[!-9;-~]+")  # printable ASCII except ':' and space
_NEWLINES = str.maketrans({"\r": " ", "\n": " "})
_checked_names: set[str] = set()


def encode_headers(headers: Mapping[str, str]) -> bytes:
    """The header block for `headers`; `ValueError` for a name NATS cannot carry."""
    return _HEAD + _header_lines(headers) + _CRLF


def _header_lines(headers: Mapping[str, str]) -> bytes:
    lines = []
    for name, value in headers.items():
        if name not in _checked_names:
            if not _HEADER_NAME.fullmatch(name):
                raise ValueError(f"metadata key {name!r} cannot be a NATS header name")
            if len(_checked_names) < 10_000:  # metadata keys repeat: check each once
                _checked_names.add(name)
        if "\r" in value or "\n" in value:
            value = value.translate(_NEWLINES)  # a value ends at the line end
        lines.append(f"{name}: {value}\r\n")
    return "".join(lines).encode()


def header_block(message: Message, deduplicate: bool = False) -> bytes:
    """The header block that carries `message`: its metadata without ``mqb.src.*``, then
    its id in mq-bridge's form (and as ``Nats-Msg-Id`` with `deduplicate`, unless the
    metadata has one). Built as bytes; a message without metadata costs one format."""
    metadata = message.metadata_view
    id_line = _ID_LINE % message.id_int
    if not metadata:
        if deduplicate:
            return _HEAD + id_line + _DEDUP_LINE % message.id_int + _CRLF
        return _HEAD + id_line + _CRLF
    if MESSAGE_ID_HEADER in metadata or any(key.startswith(SOURCE_PREFIX) for key in metadata):
        headers = message_headers(message, deduplicate)  # the rare cases, the general way
        return encode_headers(headers)
    lines = _header_lines(metadata)
    if deduplicate and "Nats-Msg-Id" not in metadata:
        return _HEAD + lines + id_line + _DEDUP_LINE % message.id_int + _CRLF
    return _HEAD + lines + id_line + _CRLF


def message_headers(message: Message, deduplicate: bool = False) -> dict[str, str]:
    """The headers that carry `message` (`kit.wire`), with the id in mq-bridge's form."""
    headers = headers_for(message)
    hex_id = f"{message.id_int:032x}"
    headers[MESSAGE_ID_HEADER] = hex_id
    if deduplicate and "Nats-Msg-Id" not in headers:
        headers["Nats-Msg-Id"] = hex_id
    return headers


def publish_command(subject: bytes, reply: bytes, header_block: bytes, payload: bytes) -> bytes:
    """One ``HPUB`` command (`reply` may be empty)."""
    size = len(header_block)
    line = b"HPUB %s %s %d %d\r\n" if reply else b"HPUB %s%s %d %d\r\n"
    return b"".join(
        (line % (subject, reply, size, size + len(payload)), header_block, payload, _CRLF)
    )


def ack_commands(replies: list[bytes], kind: bytes = ACK) -> bytes:
    """``PUB`` commands acknowledging (or, with `NAK`, releasing) each delivery."""
    tail = b" %d\r\n%s\r\n" % (len(kind), kind)
    return b"PUB " + (tail + b"PUB ").join(replies) + tail if replies else b""


def status_of(header_block: bytes | None, payload: bytes) -> bytes | None:
    """The status code (``b"404"``...) of a server status message, else None."""
    if header_block is None or payload or not header_block.startswith(_STATUS_PREFIX):
        return None
    return header_block[9:12]


def decode_headers(header_block: bytes | None) -> dict[str, str]:
    """The headers of a data message as text (repeated names joined with ",", as mq-bridge
    does; a value that is not UTF-8 is dropped later by `kit.wire`)."""
    if not header_block:
        return {}
    headers: dict[str, str] = {}
    for line in header_block.split(_CRLF)[1:]:
        name, colon, value = line.partition(b":")
        if not colon:
            continue
        key = name.strip().decode("ascii", "replace")
        try:
            text = value.strip().decode("utf-8")
        except UnicodeDecodeError:
            continue
        headers[key] = f"{headers[key]},{text}" if key in headers else text
    return headers


def ack_position(reply: bytes) -> tuple[str, int] | None:
    """(stream, stream sequence) of a JetStream delivery from its ack subject, else None."""
    tokens = reply.split(b".")
    if len(tokens) < 9 or tokens[0] != b"$JS" or tokens[1] != b"ACK":
        return None
    # v1 has 9 tokens; v2 adds domain and account hash after "ACK" (and a random token).
    stream_index = 2 if len(tokens) == 9 else 4
    try:
        return tokens[stream_index].decode(), int(tokens[stream_index + 3])
    except (UnicodeDecodeError, ValueError):
        return None


def decode_delivery(raw: RawMessage, tag_source: bool) -> Message:
    """The `Message` a delivery carries: id from its header, else from its stream position;
    ``mqb.src.nats_subject`` / ``mqb.src.nats_stream_sequence`` when `tag_source`."""
    subject, reply, payload, header_block = raw
    message = _decode_common(payload, header_block) if header_block else None
    if message is None:
        headers = decode_headers(header_block) if header_block else NO_METADATA
        position = ack_position(reply) if reply and MESSAGE_ID_HEADER not in headers else None
        fallback = None if position is None else _position_id("nats", *position)
        message = message_from_wire(payload, headers, fallback)
    if not tag_source:
        return message
    position = ack_position(reply) if reply else None
    fields = {
        "nats_subject": subject.decode("utf-8", "replace"),
        "nats_stream_sequence": None if position is None else position[1],
    }
    metadata = with_source(message.metadata_view, fields, True)
    return Message.trusted(message.payload, metadata, message.id_int)


def _decode_common(payload: bytes, block: bytes) -> Message | None:
    """The common case quickly: the id line last, as we and mq-bridge write it, and metadata
    lines seen before (their dict is shared: a message's metadata never changes). None:
    take the general path."""
    mark = block.rfind(_ID_PREFIX)
    if mark < 0:
        return None
    start = mark + len(_ID_PREFIX)
    digits = block[start : start + 32]
    if block[start + 32 :] != b"\r\n\r\n" or not digits.isalnum():
        return None
    try:
        id_value = int(digits, 16)
    except ValueError:
        return None
    prefix = block[:mark]
    metadata = _metadata_seen.get(prefix)
    if metadata is None:
        headers = decode_headers(prefix + b"\r\n\r\n")
        if MESSAGE_ID_HEADER in headers:
            return None
        metadata = {k: v for k, v in headers.items() if not k.startswith(SOURCE_PREFIX)}
        metadata = metadata or NO_METADATA
        if len(prefix) < 512 and len(_metadata_seen) < 1000:
            _metadata_seen[prefix] = metadata
    return Message.trusted(payload, metadata, id_value)


_metadata_seen: dict[bytes, dict[str, str]] = {b"NATS/1.0": NO_METADATA}
