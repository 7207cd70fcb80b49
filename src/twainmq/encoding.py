"""The on-disk binary formats: records, index entries and the partition head. Pure: no I/O.

Record (one message), little-endian, ``HEADER_SIZE`` = 18 bytes before the key::

    0        4        8                16   17   18          18+K
    +--------+--------+----------------+----+----+-----------+------------------+
    | length |  crc   |  timestamp_us  |tag |  K |    key    |     payload      |
    |  u32   |  u32   |      i64       | u8 | u8 |  K bytes  |  length-14-K B   |
    +--------+--------+----------------+----+----+-----------+------------------+
             |<---------------------- length bytes --------------------------->|
                      |<---------------- covered by crc (zlib crc32) --------->|

``length`` counts the bytes after the length field (crc .. end of payload), so a record takes
``4 + length`` bytes. ``tag`` is the payload type (TAG_BYTES, TAG_TEXT, TAG_DATACLASS).
``frame``, ``frame_text`` and ``frame_with_prefix`` build records; ``decode_messages`` and
``record_boundaries`` read them.
Offsets are not stored: a record's offset is its segment's base offset (the file name) plus
its index in the segment. Records follow each other with no padding.

Index file (sparse; one entry per ``index_interval_bytes`` of segment): an 8-byte magic
``"TWINDX02"``, then 20-byte entries::

    | relative offset u32 | position u32 | timestamp_us i64 | crc u32 |
                                                            crc32 of the 16 bytes before it,
                                                            seeded with the segment base (i64)

The seed ties an entry to its segment: an entry copied from another segment's index fails too.
An entry that fails its CRC, or does not follow the previous one, is not used (readers count
records from an earlier entry instead), so a damaged index can slow a seek, never misplace it.
Legacy indexes (written before checksums: 16-byte entries without CRC or magic) are rebuilt
from their segments when their partition is first opened (``recovery.py``).

Partition head (the ``head`` file: one page, memory-mapped, updated under the partition lock)::

    0                  8                  16                 24                32
    | magic "TWHEAD02" | segment_base i64 | end_position i64 | next_offset i64 |
    | index_bytes i64  | next_index_position i64 | crc u32 | sealed u32 | zero | wanted u8 |
    32                 40                        48        52           56     64          65

``crc`` is the CRC-32 of bytes 8..48 (the five fields) and is only kept up to date while no
writer holds the lock: a writer sets ``sealed`` to 0 when it takes the lock and, before it lets
go, stores the CRC and then ``sealed`` = ``HEAD_SEALED`` (so a write costs nothing more).
A head that says sealed but fails its CRC is damaged and recovery recomputes it from the
segments; one left unsealed (a writer killed while holding the lock) is checked for
plausibility only, as before checksums. ``"TWHEAD01"`` heads (no CRC) are read once and
upgraded. ``wanted`` is set by a writer waiting for the partition lock and cleared by the one
that takes it (lazy release, ``partition.py``); the rest of the page is zero.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import Any

from .message import Message

TAG_BYTES = 0
TAG_TEXT = 1
TAG_DATACLASS = 2

LENGTH_AND_CRC = struct.Struct("<II")
TIMESTAMP = struct.Struct("<q")
TIMESTAMP_TAG = struct.Struct("<qB")
TIMESTAMP_TAG_KEYLEN = struct.Struct("<qBB")
HEADER = struct.Struct("<IIqBB")
#: Bytes of a record that are not key or payload.
HEADER_SIZE = HEADER.size
#: Bytes counted by ``length`` besides key and payload (crc, timestamp, tag, key length).
LENGTH_OVERHEAD = HEADER_SIZE - 4
#: Upper bound on ``length`` used to tell a garbage length from a real one.
MAX_LENGTH = 1 << 30

#: HEADER followed by an integer key of each width (for decoding integer-keyed topics).
KEYED_HEADERS = {
    w: struct.Struct(f"<IIqBB{c}") for w, c in ((1, "B"), (2, "H"), (4, "I"), (8, "Q"))
}

INDEX_MAGIC = b"TWINDX02"
INDEX_FIELDS = struct.Struct("<IIq")
INDEX_ENTRY = struct.Struct("<IIqI")
#: Entries of indexes written before checksums (no magic, no CRC).
LEGACY_INDEX_ENTRY = INDEX_FIELDS
HEAD = struct.Struct("<8sqqqqq")
HEAD_MAGIC = b"TWHEAD02"
LEGACY_HEAD_MAGIC = b"TWHEAD01"
#: Byte range of the head's five fields, which its CRC covers.
HEAD_FIELDS_SPAN = (8, 48)
HEAD_CHECK = struct.Struct("<II")  # crc, sealed (at HEAD_CHECK_AT)
HEAD_CHECK_AT = 48
HEAD_SEALED = 0x5EA1ED02

# Bound once: the producer frames every record through these.
_pack_length_crc, _pack_timestamp_tag_key_length = LENGTH_AND_CRC.pack, TIMESTAMP_TAG_KEYLEN.pack
_pack_timestamp, _crc32 = TIMESTAMP.pack, zlib.crc32

RecordPrefix = tuple[bytes, int]
"""(data, crc): a record's bytes between its CRC and its payload (timestamp, tag, key length,
key) and their CRC, shared by many records: one key's records in a ``write_messages`` batch.

Each record's CRC continues from the prefix's over the payload alone, so the prefix is packed
and checksummed once per batch, not once per record (measured: batches framed one record at a
time with `frame_text` write ~15% fewer records a second). A plain tuple, not a
class: a batch makes one per key, and plain tuples come from a free list that does not count
towards the cyclic GC's thresholds (class instances do; measured on ``write_messages``: 39
young and 1 full collection per 200k messages instead of 3 young ones, ~9% fewer messages a
second).
"""

RawRecord = tuple[int, int, bytes, bytes]
"""(timestamp_us, tag, key, payload) as read from a buffer."""


class CorruptRecord(Exception):
    """A complete record in a buffer fails its checks; ``position`` is its first byte."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"byte {position}: {reason}")
        self.position = position
        self.reason = reason


def text_head(key: bytes) -> bytes:
    """What follows the timestamp in every text record of `key` (tag, key length, key):
    computed once per key (the producer keeps it in the key's route)."""
    return bytes((TAG_TEXT, len(key))) + key


_INTEGER_CODES = {1: "B", 2: "H", 4: "I", 8: "Q"}


def text_head_struct(width: int) -> struct.Struct:
    """The Struct whose ``pack(TAG_TEXT, width, key)`` is `text_head` of an integer key of
    ``width`` bytes (1, 2, 4 or 8; little-endian), made in one call."""
    return struct.Struct(f"<BB{_INTEGER_CODES[width]}")


def frame(key: bytes, timestamp_us: int, tag: int, payload: bytes) -> bytes:
    """Return the bytes of one record (the layout drawn above)."""
    covered = _pack_timestamp_tag_key_length(timestamp_us, tag, len(key)) + key + payload
    return _pack_length_crc(len(covered) + 4, _crc32(covered)) + covered


def frame_text(head: bytes, timestamp_us: int, payload: bytes) -> bytes:
    """Return the bytes of one text record, `head` being its key's `text_head` (the common
    case: the same bytes as ``frame(key, timestamp_us, TAG_TEXT, payload)``)."""
    covered = _pack_timestamp(timestamp_us) + head + payload
    return _pack_length_crc(len(covered) + 4, _crc32(covered)) + covered


def record_prefix(key: bytes, timestamp_us: int, tag: int) -> RecordPrefix:
    """Return the prefix shared by records of `key` with this timestamp and tag (a batch)."""
    data = _pack_timestamp_tag_key_length(timestamp_us, tag, len(key)) + key
    return data, _crc32(data)


def frame_with_prefix(prefix: RecordPrefix, payload: bytes) -> bytes:
    """Return the bytes of the record made of ``prefix`` (`record_prefix`) and
    ``payload``: its CRC continues from the prefix's over the payload alone."""
    data, crc = prefix
    return _pack_length_crc(len(data) + len(payload) + 4, _crc32(payload, crc)) + data + payload


def encode_record(timestamp_us: int, tag: int, key: bytes, payload: bytes) -> bytes:
    """Return the bytes of one record (an alias of `frame` in the order records are read)."""
    return frame(key, timestamp_us, tag, payload)


def record_size(key_length: int, payload_length: int) -> int:
    """Return the bytes a record with this key and payload takes on disk."""
    return HEADER_SIZE + key_length + payload_length


def read_records(
    buf: bytes, start: int, end: int, limit: int = 1 << 62
) -> tuple[list[RawRecord], int]:
    """Decode up to ``limit`` whole records of ``buf[start:end]``.

    Returns the records and the position after the last one. Stops early (without error) at a
    record that is not wholly inside ``end``: the caller decides whether that is a torn tail or
    a short read. Raises CorruptRecord for a whole record with a bad length, tag or CRC.
    """
    records: list[RawRecord] = []
    append = records.append
    unpack = HEADER.unpack_from
    crc32 = zlib.crc32
    view = memoryview(buf)
    pos = start
    while pos + HEADER_SIZE <= end and len(records) < limit:
        length, crc, timestamp_us, tag, key_length = unpack(buf, pos)
        stop = pos + 4 + length
        if stop > end:
            check_length(length, key_length, pos)
            break
        if crc32(view[pos + 8 : stop]) != crc:
            check_length(length, key_length, pos)
            raise CorruptRecord(pos, "CRC mismatch")
        if tag > TAG_DATACLASS:
            raise CorruptRecord(pos, f"unknown payload tag {tag}")
        key_start = pos + HEADER_SIZE
        append(
            (
                timestamp_us,
                tag,
                buf[key_start : key_start + key_length],
                buf[key_start + key_length : stop],
            )
        )
        pos = stop
    return records, pos


def decode_messages(
    buf: bytes,
    end: int,
    first_offset: int,
    partition: int,
    key_width: int,
    decode_dataclass: Callable[[bytes], object],
) -> tuple[list[Message], int, CorruptRecord | None]:
    """Decode the whole records of ``buf[:end]`` into Messages (the consumer's hot loop).

    ``key_width`` is the byte width of an integer key type, 0 for text keys. The first record
    has offset ``first_offset``. Returns the messages, the position after the last one, and
    the CorruptRecord that stopped decoding (None if none did): messages before a bad record
    are still returned. Stops early, without error, at a record not wholly inside ``end``.
    """
    messages: list[Message] = []
    append = messages.append
    crc32 = zlib.crc32
    new = tuple.__new__
    view = memoryview(buf)
    # Integer keys are read by the header's own unpack: no slice, no int.from_bytes.
    unpack = (KEYED_HEADERS[key_width] if key_width else HEADER).unpack_from
    header_size = HEADER_SIZE + key_width
    pos = 0
    offset = first_offset
    while pos + header_size <= end:
        if key_width:
            length, crc, timestamp_us, tag, key_length, key = unpack(buf, pos)
        else:
            length, crc, timestamp_us, tag, key_length = unpack(buf, pos)
        stop = pos + 4 + length
        key_end = pos + HEADER_SIZE + key_length
        try:
            if stop > end or crc32(view[pos + 8 : stop]) != crc:
                check_length(length, key_length, pos)
                if stop > end:
                    break
                raise CorruptRecord(pos, "CRC mismatch")
            if not key_width:
                key = buf[pos + HEADER_SIZE : key_end].decode()
            elif key_length != key_width:
                raise CorruptRecord(
                    pos, f"key of {key_length} bytes in a {key_width}-byte key topic"
                )
            payload: Any = buf[key_end:stop]
            if tag == TAG_TEXT:
                payload = payload.decode()
            elif tag == TAG_DATACLASS:
                payload = decode_dataclass(payload)
            elif tag != TAG_BYTES:
                raise CorruptRecord(pos, f"unknown payload tag {tag}")
        except CorruptRecord as exc:
            return messages, pos, exc
        except ValueError as exc:  # bad UTF-8 or JSON that passed the CRC: a writer bug
            return messages, pos, CorruptRecord(pos, f"payload cannot be decoded: {exc}")
        append(new(Message, (offset, partition, key, timestamp_us, payload)))
        offset += 1
        pos = stop
    return messages, pos, None


def check_length(length: int, key_length: int, position: int) -> None:
    """Raise CorruptRecord if a record's length field cannot be a real length."""
    if length < LENGTH_OVERHEAD + key_length or length > MAX_LENGTH:
        raise CorruptRecord(position, f"impossible record length {length}")


def record_boundaries(buf: bytes, start: int, end: int) -> list[tuple[int, int]]:
    """Return ``(position, timestamp_us)`` of each whole, valid record in ``buf[start:end]``.

    Stops at the first incomplete or invalid record (recovery and index rebuilding use the
    returned end to find where valid data stops).
    """
    found: list[tuple[int, int]] = []
    unpack = HEADER.unpack_from
    pos = start
    while pos + HEADER_SIZE <= end:
        length, crc, timestamp_us, tag, key_length = unpack(buf, pos)
        stop = pos + 4 + length
        bad_length = length < LENGTH_OVERHEAD + key_length or length > MAX_LENGTH
        if bad_length or stop > end or tag > TAG_DATACLASS:
            break
        if zlib.crc32(memoryview(buf)[pos + 8 : stop]) != crc:
            break
        found.append((pos, timestamp_us))
        pos = stop
    return found


def records_end(buf: bytes, start: int, boundaries: list[tuple[int, int]]) -> int:
    """Return the position after the last record in ``boundaries`` (``start`` if none)."""
    if not boundaries:
        return start
    last = boundaries[-1][0]
    (length,) = struct.unpack_from("<I", buf, last)
    return int(last + 4 + length)


IndexEntry = tuple[int, int, int]
"""(offset relative to the segment base, byte position, timestamp_us)."""


def index_seed(base: int) -> int:
    """The CRC seed of segment ``base``'s index entries."""
    return _crc32(_pack_timestamp(base))


def pack_index_entry(seed: int, relative: int, position: int, timestamp_us: int) -> bytes:
    """Return one index entry (``seed`` from ``index_seed``)."""
    fields = INDEX_FIELDS.pack(relative, position, timestamp_us)
    return fields + _pack_crc(_crc32(fields, seed))


_pack_crc = struct.Struct("<I").pack


def index_bytes(base: int, entries: list[IndexEntry]) -> bytes:
    """Return the bytes of a whole index file holding ``entries``."""
    seed = index_seed(base)
    return INDEX_MAGIC + b"".join(pack_index_entry(seed, *entry) for entry in entries)


def decode_index(data: bytes, base: int) -> tuple[list[IndexEntry], str | None]:
    """Return the trustworthy entries of an index file's bytes and what is wrong (None: all
    well). Entries that fail their CRC, go backwards, or follow an unreadable stretch are
    left out; so is everything of a file without the magic (legacy or damaged)."""
    if not data:
        return [], None
    if data[: len(INDEX_MAGIC)] != INDEX_MAGIC:
        return [], "legacy" if is_legacy_index(data) else "bad magic"
    seed = index_seed(base)
    entries: list[IndexEntry] = []
    problem = None
    crc32, size = _crc32, INDEX_FIELDS.size
    body = memoryview(data)[len(INDEX_MAGIC) :]
    whole = len(body) - len(body) % INDEX_ENTRY.size
    if whole != len(body):
        problem = f"{len(body) - whole} stray bytes at the end"
    last = (-1, -1, 0)
    for at in range(0, whole, INDEX_ENTRY.size):
        relative, position, stamp, crc = INDEX_ENTRY.unpack_from(body, at)
        if crc32(body[at : at + size], seed) != crc:
            problem = problem or f"entry {at // INDEX_ENTRY.size} fails its CRC"
            continue
        if relative <= last[0] or position <= last[1]:
            problem = problem or f"entry {at // INDEX_ENTRY.size} is out of order"
            continue
        last = (relative, position, stamp)
        entries.append(last)
    return entries, problem


def is_legacy_index(data: bytes) -> bool:
    """Whether ``data`` looks like an index written before checksums (16-byte entries, the
    first at relative offset 0, position 0)."""
    size = LEGACY_INDEX_ENTRY.size
    return len(data) % size == 0 and data[:8] == bytes(8)


def decode_legacy_index(data: bytes) -> list[IndexEntry]:
    """Return the entries of a legacy index (unchecked: only used to find a lost active
    segment's next offset while migrating)."""
    usable = len(data) - len(data) % LEGACY_INDEX_ENTRY.size
    return list(LEGACY_INDEX_ENTRY.iter_unpack(data[:usable]))


def head_crc(page: bytes | bytearray | memoryview | Any) -> int:
    """The CRC of a head page's five fields."""
    start, stop = HEAD_FIELDS_SPAN
    return _crc32(page[start:stop])
