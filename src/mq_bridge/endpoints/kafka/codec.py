"""Messages to and from Kafka records (pure: no I/O), in mq-bridge's layout.

A record, as mq-bridge 1.2.0 writes it (observed on the broker) and as we write it::

    key      the message id as 16 big-endian bytes (or the `partition_key` metadata value)
    value    the payload (None: a tombstone, see below)
    headers  one per metadata entry (UTF-8), then
             mq_bridge.message_id = the id as 32 hex digits

Reading: the id comes from ``mq_bridge.message_id`` (kit.wire's rules: a UUID or a 128-bit
integer); a record without it (another producer's) gets a stable id from its position
(``position_id("kafka", topic, partition, offset)``), so a redelivered record keeps its id.
``mqb.src.*`` headers are dropped (a peer could forge them).

Tombstones (a null value, which compacted topics read as "delete this key"): read as an
empty payload with metadata ``mqb.kafka.tombstone: "true"`` (mq-bridge's key); a message
with that metadata and an empty payload is written as a tombstone (null value, same key).
"""

from __future__ import annotations

from binascii import unhexlify
from collections.abc import Mapping
from typing import Any, NamedTuple

from mq_bridge.endpoints.kit.source_metadata import SOURCE_PREFIX, with_source
from mq_bridge.endpoints.kit.wire import MESSAGE_ID_HEADER, message_from_wire, position_id
from mq_bridge.message import NO_METADATA, Message

#: Record headers as confluent-kafka takes them.
Headers = list[tuple[str, str | bytes | None]]

__all__ = [
    "CORRELATION_KEY",
    "REPLY_TO_KEY",
    "TOMBSTONE_KEY",
    "DecodedBatch",
    "HeaderCache",
    "Headers",
    "Ranges",
    "decode_batch",
    "decode_records",
    "record_key",
    "record_value",
]

TOMBSTONE_KEY = "mqb.kafka.tombstone"
#: The metadata that makes a message a request (see `replies`): where the reply goes, and
#: the id that pairs it with its request.
REPLY_TO_KEY = "reply_to"
CORRELATION_KEY = "correlation_id"
_ID_HEADER = MESSAGE_ID_HEADER
_TOMBSTONE_METADATA = {TOMBSTONE_KEY: "true"}


def record_key(metadata: Mapping[str, str], id_value: int, partition_key: str | None) -> bytes:
    """The record key: the `partition_key` metadata value when set and present, else the id."""
    if partition_key is not None:
        value = metadata.get(partition_key)
        if value is not None:
            return value.encode()
    return id_value.to_bytes(16, "big")


def record_value(payload: bytes, metadata: Mapping[str, str]) -> bytes | None:
    """The record value: None (a tombstone) for an empty payload marked as one."""
    if not payload and metadata.get(TOMBSTONE_KEY) == "true":
        return None
    return payload


class HeaderCache:
    """Headers for a metadata dict, computed once while messages share that dict.

    Messages from one source usually share one metadata dict (`Message.trusted`), so the
    header list (minus the id) is built once per dict, not per message. The dict and its
    headers are kept as one tuple, swapped atomically (concurrent senders share a cache).
    """

    __slots__ = ("_last",)

    def __init__(self) -> None:
        self._last: tuple[Mapping[str, str] | None, Headers] = (None, [])

    def headers(self, metadata: Mapping[str, str], id_value: int) -> Headers:
        last_metadata, headers = self._last
        if metadata is not last_metadata:
            headers = [
                (key, value)
                for key, value in metadata.items()
                if key != TOMBSTONE_KEY and key != _ID_HEADER and not key.startswith(SOURCE_PREFIX)
            ]
            self._last = (metadata, headers)
        return [*headers, (_ID_HEADER, f"{id_value:032x}")]


#: Per partition, the first and last offsets of a batch.
Ranges = dict[tuple[str, int], list[int]]


class DecodedBatch(NamedTuple):
    """What `decode_batch` makes of one `consume` call's records."""

    messages: list[Message]
    #: Per partition, the first and last offsets of the good records.
    ranges: Ranges
    #: The records that carried an error instead of a message.
    errors: list[Any]
    #: Whether some message carries ``reply_to`` (a request: `ReplyForwarders.expect`
    #: needs to see the batch); False lets the input skip that pass over every message.
    requests: bool


def decode_records(records: list[Any], source_metadata: bool) -> list[Message]:
    """confluent_kafka `Message`s (without errors) as bridge messages."""
    return decode_batch(records, source_metadata).messages


def decode_batch(
    records: list[Any], source_metadata: bool, topic: str | None = None
) -> DecodedBatch:
    """confluent_kafka `Message`s as bridge messages, their offset ranges per partition and
    the records that carried an error instead. `topic`: the one topic every record comes
    from, when the caller knows it (saves asking each record).

    This is the consumer's hot loop (it runs once per record; a profile of
    ``Consumer.poll`` + ``commit`` puts it next to librdkafka's own ``consume``), so the
    common case -- our layout: metadata headers, then the id header last, as 32 hex
    digits -- costs four calls on the record and no per-record dict: consecutive records
    with the same metadata headers share one metadata dict, whose ``reply_to`` is checked
    once; offsets are read only where the partition changes; the id is parsed by
    ``binascii`` (strict hex, about twice as fast as ``int(digits, 16)``). Anything else
    takes the general path (`_decode_general`), which gives the same message.

    `records` is emptied: taken from its end, each record is freed as soon as its message
    is made, so a batch never holds both (twice the GC-tracked objects: that made the
    cyclic GC run a few times per batch and promote every live batch, and full
    collections of the process's heap cost ~0.3-0.5 µs a record).
    """
    messages: list[Message] = []
    errors: list[Any] = []
    ranges: Ranges = {}
    append = messages.append
    trusted = Message.trusted
    from_bytes = int.from_bytes
    last_headers: Any = None
    last_metadata: dict[str, str] = NO_METADATA
    last_topic: str | None = None
    last_partition = -1
    span: list[int] = []
    previous: Any = None  # the last good record: its offset ends the current span
    requests = False
    fast = not source_metadata
    records.reverse()  # taken from the end, so each record is freed once decoded
    pop = records.pop
    while records:
        record = pop()
        if record.error() is not None:
            errors.append(record)
            continue
        partition = record.partition()
        record_topic = topic or record.topic()
        if partition != last_partition or record_topic != last_topic:
            if previous is not None:
                span[1] = previous.offset()
            offset = record.offset()
            span = ranges.setdefault((record_topic, partition), [offset, offset])
            last_topic, last_partition = record_topic, partition
        previous = record
        headers = record.headers()
        value = record.value()
        if fast and headers and value is not None:
            name, digits = headers[-1]
            if name == _ID_HEADER and digits is not None and len(digits) == 32:
                if len(headers) == 1:
                    metadata = NO_METADATA
                else:
                    rest = headers[:-1]
                    if rest != last_headers:
                        last_metadata = _metadata_of(rest)
                        last_headers = rest
                        requests = requests or REPLY_TO_KEY in last_metadata
                    metadata = last_metadata
                try:
                    append(trusted(value, metadata, from_bytes(unhexlify(digits), "big")))
                    continue
                except (ValueError, TypeError):  # binascii.Error is a ValueError
                    pass
        message = _decode_general(record, headers, value, source_metadata)
        requests = requests or REPLY_TO_KEY in message.metadata_view
        append(message)
    if previous is not None:
        span[1] = previous.offset()
    return DecodedBatch(messages, ranges, errors, requests)


def _metadata_of(headers: list[tuple[str, bytes | None]]) -> dict[str, str]:
    if not headers:
        return NO_METADATA
    metadata: dict[str, str] = {}
    for key, value in headers:
        if value is None or key.startswith(SOURCE_PREFIX):
            continue
        try:
            metadata[key] = value.decode()
        except UnicodeDecodeError:
            continue
    return metadata or NO_METADATA


def _decode_general(
    record: Any, headers: Any, value: bytes | None, source_metadata: bool
) -> Message:
    topic, partition, offset = record.topic(), record.partition(), record.offset()
    wire_headers = {key: item for key, item in headers or () if item is not None}
    message = message_from_wire(
        b"" if value is None else value,
        wire_headers,
        fallback_id=position_id("kafka", topic, partition, offset),
    )
    metadata = message.metadata_view
    extra: dict[str, str] = {}
    if value is None:
        extra.update(_TOMBSTONE_METADATA)
    if source_metadata:
        fields = {"kafka_topic": topic, "kafka_partition": partition, "kafka_offset": offset}
        metadata = with_source(dict(metadata), fields, True)
    if extra or metadata is not message.metadata_view:
        return Message.trusted(message.payload, {**metadata, **extra}, message.id_int)
    return message
