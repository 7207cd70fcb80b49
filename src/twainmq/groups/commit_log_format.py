"""The group commit log's format: pure encoding and replay, no I/O.

One file per group, ``commits.log``: a header rewritten in place, then one record per commit
call, appended. Little-endian::

    header (32 bytes, at 0)
      magic "TWCLOG01" 8 | end u64 | synced u64 | crc32 u32 (of bytes 0..24) | zero u32

    record (one per commit call, from byte 32 on)
      magic "TWC1" 4 | length u32 | head crc32 u32 (of magic, length) | crc32 u32 (of entries)
      entries: length / 16 x (partition u32 | epoch u32 | offset i64)   offset -1: no commit yet

Writers append with ``O_APPEND`` and no lock between them (``commit_log``), so the file order
is the order of the appends, and one partition's entries are in the order its owners wrote
them (an owner hands a partition over only after its last commit returned).

``end`` and ``synced`` are lower bounds, raised after appends and syncs: every byte before
``end`` was written (a file shorter than ``end`` was cut: damage), every byte before
``synced`` is on disk (a writer with ``fsync="always"`` skips its sync when another process's
covered its record).

A writer killed in the middle of a write (only a write that spans a page boundary can be cut
short) leaves a **torn record**, possibly followed by other writers' records. Replay tells it
from damage by where the next valid record starts: a torn record is shorter than it says (the
next valid record, or the end of the file, comes before its declared end, or inside its
16-byte head); a damaged one is not (a flipped bit leaves it its full length, and its head
checksum guards the length). Torn records are skipped; damage raises LogFormatError. Past
``end``, bytes that no valid record follows are a torn tail and ignored.

Replay: per partition, an entry counts when its epoch is at least the latest epoch seen for
that partition so far; an entry of an older epoch is a fenced (expelled) member's late commit
and is ignored. A compacted log is one record with every partition's latest entry.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterable, Mapping

MAGIC = b"TWCLOG01"
HEADER_BYTES = 32
_HEADER = struct.Struct("<8sQQ")
_CRC = struct.Struct("<I")
_RECORD_MAGIC = b"TWC1"
_RECORD_HEAD = struct.Struct("<4sIII")  # magic, length, head crc, entries crc
RECORD_HEAD_BYTES = _RECORD_HEAD.size
_ENTRY = struct.Struct("<IIq")
NO_COMMIT = -1
MAX_ENTRIES = 1 << 22

Entry = tuple[int, int, int]  # partition, epoch, offset (NO_COMMIT: none yet)
Table = dict[int, tuple[int, int]]  # partition -> (epoch, offset)


class LogFormatError(ValueError):
    """Bytes that are not what a writer wrote: ``position`` and ``reason`` say where and why."""

    def __init__(self, position: int, reason: str) -> None:
        super().__init__(f"at byte {position}: {reason}")
        self.position = position
        self.reason = reason


def encode_header(end: int, synced: int) -> bytes:
    """The 32-byte header."""
    fields = _HEADER.pack(MAGIC, end, synced)
    return fields + _CRC.pack(zlib.crc32(fields)) + b"\0\0\0\0"


def decode_header(data: bytes) -> tuple[int, int]:
    """``(end, synced)`` of a header; raises LogFormatError if it is not one."""
    if len(data) < HEADER_BYTES:
        raise LogFormatError(0, f"cut inside its header ({len(data)} bytes)")
    magic, end, synced = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise LogFormatError(0, f"not a commit log (magic {magic!r})")
    (crc,) = _CRC.unpack_from(data, _HEADER.size)
    if crc != zlib.crc32(data[: _HEADER.size]) or end < HEADER_BYTES:
        raise LogFormatError(0, "header fails its checksum")
    return end, synced


def encode_record(entries: Iterable[Entry]) -> bytes:
    """One record holding ``entries`` (one commit call)."""
    body = b"".join(_ENTRY.pack(p, e, o) for p, e, o in entries)
    head = _RECORD_MAGIC + _CRC.pack(len(body))
    return head + _CRC.pack(zlib.crc32(head)) + _CRC.pack(zlib.crc32(body)) + body


def _record_head(data: bytes | memoryview, position: int) -> int | None:
    """The declared length of the record whose head is at ``position``, if the head is valid."""
    if len(data) - position < RECORD_HEAD_BYTES:
        return None
    magic, length, head_crc, _ = _RECORD_HEAD.unpack_from(data, position)
    if magic != _RECORD_MAGIC or head_crc != zlib.crc32(data[position : position + 8]):
        return None
    if length % _ENTRY.size or length > MAX_ENTRIES * _ENTRY.size:
        return None
    return length


def decode_record(data: bytes | memoryview, position: int) -> tuple[list[Entry], int] | None:
    """The entries of the record at ``position`` and the position after it; None if the bytes
    there are not a whole valid record (invalid, or cut short)."""
    length = _record_head(data, position)
    if length is None:
        return None
    start = position + RECORD_HEAD_BYTES
    after = start + length
    if (
        after > len(data)
        or zlib.crc32(data[start:after]) != _RECORD_HEAD.unpack_from(data, position)[3]
    ):
        return None
    return list(_ENTRY.iter_unpack(data[start:after])), after


def apply(table: Table, entries: Iterable[Entry]) -> None:
    """Replay ``entries`` onto ``table`` (an older epoch's entry is ignored)."""
    for partition, epoch, offset in entries:
        current = table.get(partition)
        if current is None or epoch >= current[0]:
            table[partition] = (epoch, offset)


def replay(data: bytes | memoryview, start: int, end: int, table: Table) -> int:
    """Replay the records of ``data`` from ``start`` onto ``table``, skipping torn records
    (module docstring). ``end``: the header's; a shorter file, or damage, raises
    LogFormatError. Returns the position after the last valid record."""
    if len(data) < end:
        raise LogFormatError(len(data), f"cut: {len(data)} bytes, the header says {end}")
    position = last = start
    while position < len(data):
        decoded = decode_record(data, position)
        if decoded is not None:
            entries, position = decoded
            apply(table, entries)
            last = position
            continue
        following = _next_valid(data, position + 1)
        length = _record_head(data, position)
        declared = position + RECORD_HEAD_BYTES + (length or 0)
        if following is None:
            if position >= end or len(data) < declared:
                break  # a torn tail (or bytes past the end no record follows)
            raise LogFormatError(position, "record fails its checksum")
        if following >= declared:
            raise LogFormatError(position, "record fails its checksum")
        position = following  # a torn record: its writer was killed mid-write
    return last


def _next_valid(data: bytes | memoryview, position: int) -> int | None:
    """Where the next valid record starts at or after ``position``, if anywhere."""
    raw = bytes(data) if isinstance(data, memoryview) else data
    while (position := raw.find(_RECORD_MAGIC, position)) >= 0:
        if decode_record(raw, position) is not None:
            return position
        position += 1
    return None


def snapshot_entries(table: Mapping[int, tuple[int, int]]) -> list[Entry]:
    """Every partition's latest entry: the single record of a compacted log."""
    return [(p, epoch, offset) for p, (epoch, offset) in sorted(table.items())]


def offsets_of(table: Mapping[int, tuple[int, int]]) -> dict[int, int]:
    """Partition -> committed offset, for partitions that have a commit."""
    return {p: offset for p, (_, offset) in table.items() if offset != NO_COMMIT}
