"""Pure encoding for the `twain` endpoint: the message envelope and the record key (no I/O).

Envelope (format version 1): what the output stores as a twainmq ``bytes`` payload, so a
bridge message's id and metadata survive the round trip. All integers big-endian::

    0        4                  12                 20          24            24+M
    +--------+------------------+------------------+-----------+-------------+-----------+
    | "MQB1" | id, high 64 bits | id, low 64 bits  | M (u32)   | metadata    | payload   |
    +--------+------------------+------------------+-----------+-------------+-----------+
      magic    the message id as its 128-bit UUID value            JSON object  the rest of
                                                                   str -> str   the record
                                                                   (absent: 0)

A plain twainmq consumer reads the record as ``bytes``. A record that is not an envelope
(written by a plain twainmq producer) is still read: ``str`` as its UTF-8 bytes, ``bytes`` as
they are, a dataclass as its JSON fields (with ``twain.message_type`` in the metadata). Such a
record gets a stable id derived from its topic, partition and offset, so a redelivery has the
same id. Bytes that begin with the magic but do not parse as an envelope are taken as plain.

Keys (output): the key text is the value of the `key_from` metadata field or, when that is not
set or the message lacks it, the message id. It becomes a key of the topic's key type:

- ``u8`` .. ``u64``: a decimal integer in range is used as is (so numeric keys keep their
  value); any other text is hashed: ``blake2b(utf8(text), 8 bytes) mod 2**bits``. The message
  id (no `key_from`) is its 128-bit value mod ``2**bits``: its low bits are random in the ids
  we make, so no hashing is needed.
- ``charN``: the text itself when its UTF-8 form fits in N bytes, else the first N hex
  digits of ``blake2b(utf8(text))``.

Equal key texts always give equal keys, so they land on the same partition.
"""

from __future__ import annotations

import hashlib
import re
import struct
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import orjson

from mq_bridge.message import Message, fields_of

__all__ = [
    "MAGIC",
    "KeyFunction",
    "decode_batch",
    "decode_record",
    "encode_envelope",
    "key_function",
    "parse_key_type",
]

MAGIC = b"MQB1"
_HEADER = struct.Struct(">4sQQI")
_HEADER_SIZE = _HEADER.size  # 24
_LOW64 = (1 << 64) - 1
_ID_NAMESPACE = uuid.UUID("0b5e6b4c-9f33-4b0f-8d7e-3c1a2f6d7e21")
_INT_KEY_BITS = {"u8": 8, "u16": 16, "u32": 32, "u64": 64}
_CHAR_KEY = re.compile(r"char([0-9]{1,3})")
_trusted = Message.trusted
_pack_header = _HEADER.pack
_unpack_header = _HEADER.unpack_from
_dumps = orjson.dumps
_loads = orjson.loads

KeyFunction = Callable[[Message], "int | str"]


def encode_envelope(message: Message) -> bytes:
    """The stored record of `message`: the header, its metadata as JSON, then its payload."""
    metadata, payload, value = fields_of(message)  # one C-level read of the three
    if value is None:  # a new message: it gets its id as it travels
        value = message.id_int
    meta = _dumps(metadata) if metadata else b""
    header = _pack_header(MAGIC, value >> 64, value & _LOW64, len(meta))
    return header + meta + payload


def decode_batch(
    records: Sequence[Any], topic: str
) -> tuple[list[Message], dict[int, int], dict[int, int]]:
    """Messages of twainmq `records`, with each partition's first offset and next offset.

    The hot path of reading: envelopes are decoded inline, and equal metadata JSON within
    the batch is parsed once (messages are immutable, so they may share the dict).
    """
    messages: list[Message] = []
    append = messages.append
    first: dict[int, int] = {}
    after: dict[int, int] = {}
    parsed: dict[bytes, dict[str, str] | None] = {b"": {}}
    for offset, partition, _key, _stamp, value in records:
        if partition not in first:
            first[partition] = offset
        after[partition] = offset + 1
        if type(value) is bytes and value[:4] == MAGIC and len(value) >= _HEADER_SIZE:
            _, high, low, meta_size = _unpack_header(value)
            end = _HEADER_SIZE + meta_size
            meta = value[_HEADER_SIZE:end]
            metadata = parsed.get(meta, False)
            if metadata is False:
                metadata = parsed[meta] = _parse_metadata(meta, meta_size)
            if metadata is not None:
                append(_trusted(value[end:], metadata, (high << 64) | low))  # type: ignore[arg-type]
                continue
        append(_decode_plain(value, _plain_id(topic, partition, offset)))
    return messages, first, after


def decode_record(value: Any, topic: str, partition: int, offset: int) -> Message:
    """The bridge message stored at (`topic`, `partition`, `offset`), whose value is `value`."""
    return decode_batch([(offset, partition, None, 0, value)], topic)[0][0]


def _parse_metadata(data: bytes, size: int) -> dict[str, str] | None:
    """The metadata JSON object, or None when it is cut short or not text -> text."""
    if len(data) != size:
        return None
    if not size:
        return {}
    try:
        metadata = _loads(data)
    except orjson.JSONDecodeError:
        return None
    if type(metadata) is not dict or not all(type(v) is str for v in metadata.values()):
        return None
    return metadata


def _decode_plain(value: Any, message_id: int) -> Message:
    if isinstance(value, bytes):
        return _trusted(value, {}, message_id)
    if isinstance(value, str):
        return _trusted(value.encode(), {}, message_id)
    type_name = getattr(value, "type_name", None)
    fields = getattr(value, "json", None)
    if isinstance(type_name, str) and isinstance(fields, str):  # twainmq's UndecodedMessage
        return _trusted(fields.encode(), {"twain.message_type": type_name}, message_id)
    payload = _dumps(value)  # a dataclass instance (orjson serializes dataclasses)
    return _trusted(payload, {"twain.message_type": type(value).__name__}, message_id)


def _plain_id(topic: str, partition: int, offset: int) -> int:
    return uuid.uuid5(_ID_NAMESPACE, f"{topic}/{partition}/{offset}").int


def parse_key_type(name: str) -> tuple[int, int]:
    """``(bits, 0)`` for an integer key type, ``(0, N)`` for ``charN``; ValueError otherwise."""
    if name in _INT_KEY_BITS:
        return _INT_KEY_BITS[name], 0
    match = _CHAR_KEY.fullmatch(name)
    if match and 1 <= int(match.group(1)) <= 255:
        return 0, int(match.group(1))
    raise ValueError(f"unknown twainmq key type {name!r}")


def key_function(key_type: str, key_from: str | None) -> KeyFunction:
    """The function giving each message its key, as the module docstring describes."""
    bits, width = parse_key_type(key_type)
    text_key = _int_key_of_text(bits) if bits else _char_key_of_text(width)
    if bits:
        mask = (1 << bits) - 1

        def id_key(message: Message) -> int | str:
            return message.id_int & mask

    else:

        def id_key(message: Message) -> int | str:
            return text_key(message.assigned_id())

    if key_from is None:
        return id_key

    def field_key(message: Message) -> int | str:
        text = message.metadata_view.get(key_from)
        return id_key(message) if text is None else text_key(text)

    return field_key


def _int_key_of_text(bits: int) -> Callable[[str], int]:
    limit = 1 << bits

    def key(text: str) -> int:
        if text.isdecimal() and text.isascii():
            number = int(text)
            if number < limit:
                return number
        return _hash64(text) % limit

    return key


def _char_key_of_text(width: int) -> Callable[[str], str]:
    def key(text: str) -> str:
        if len(text) <= width and len(text.encode()) <= width:
            return text
        digest_bytes = min(64, (width + 1) // 2)
        return hashlib.blake2b(text.encode(), digest_size=digest_bytes).hexdigest()[:width]

    return key


def _hash64(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")
