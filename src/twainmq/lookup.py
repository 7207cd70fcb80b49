"""Finding records in a partition: by offset and by timestamp. Read-only, lock-free."""

from __future__ import annotations

import os
import struct
from bisect import bisect_right
from pathlib import Path

from .encoding import HEADER, HEADER_SIZE
from .segments import index_path, list_segments, nearest_entry, read_index, segment_path

Head = tuple[int, int, int]
"""(active segment base, committed end position, next offset)."""
Location = tuple[int, int, int]
"""(segment base, byte position, offset of the record there)."""
SKIP_CHUNK = 64 * 1024
_LENGTH = struct.Struct("<I")


def log_start(directory: Path, head: Head) -> int:
    """Return the oldest offset still kept (retention may have deleted older segments)."""
    bases = list_segments(directory)
    return bases[0] if bases else head[0]


def locate(directory: Path, offset: int, head: Head) -> Location:
    """Return where the record ``offset`` starts (or where it will be written).

    Offsets below the oldest kept offset are moved up to it; ``offset`` must not exceed the
    partition's end offset (as read at any time before). So every record before ``offset``
    is committed, and its position is found by counting records from the nearest index
    entry. Only the head's segment base is used: its committed end and next offset are not
    one moment's pair (``PartitionLog.head``), and taking ``(end, next offset)`` as
    ``(position, offset)`` put a reader at the wrong record, or past the data of a new
    segment for good.
    """
    active_base = head[0]
    # A roll creates the next segment before the head names it: not yet readable.
    bases = [b for b in list_segments(directory) if b <= active_base] or [active_base]
    if offset <= bases[0]:
        return bases[0], 0, bases[0]
    base = bases[bisect_right(bases, offset) - 1]
    entry = nearest_entry(read_index(index_path(directory, base)), offset - base)
    relative, position = (entry[0], entry[1]) if entry else (0, 0)
    path = segment_path(directory, base)
    return base, skip_records(path, position, offset - base - relative), offset


def skip_records(path: Path, position: int, count: int) -> int:
    """Return the position ``count`` records after ``position`` in segment ``path``.

    The records skipped must be committed (their lengths are trusted); stops early at end of
    file. Reads ``SKIP_CHUNK`` bytes at a time, not a header per record.
    """
    with open(path, "rb") as handle:
        fd = handle.fileno()
        chunk, chunk_at = b"", position
        while count > 0:
            at = position - chunk_at
            if at + HEADER_SIZE > len(chunk):
                chunk, chunk_at, at = os.pread(fd, SKIP_CHUNK, position), position, 0
                if len(chunk) < HEADER_SIZE:
                    break
            position += 4 + _LENGTH.unpack_from(chunk, at)[0]
            count -= 1
    return position


def offset_for_timestamp(directory: Path, timestamp_us: int, head: Head) -> int:
    """Return the first offset whose record was written at or after ``timestamp_us``.

    Returns the end offset if there is none. Timestamps grow with offsets up to clock skew
    between writers; the index narrows the search to one index interval, then records are
    read one by one.
    """
    active_base = head[0]
    candidates = []
    for base in list_segments(directory):
        if base > active_base:
            break
        for relative, position, stamp in read_index(index_path(directory, base)):
            candidates.append((stamp, base, relative, position))
    start = candidates[0] if candidates else (0, active_base, 0, 0)
    for candidate in candidates:
        if candidate[0] >= timestamp_us:
            break
        start = candidate
    return _scan_for_timestamp(directory, start[1:], timestamp_us, head)


def _scan_for_timestamp(
    directory: Path, start: tuple[int, int, int], timestamp_us: int, head: Head
) -> int:
    base, relative, position = start
    active_base, committed_end, end_offset = head
    offset = base + relative
    bases = list_segments(directory)
    while offset < end_offset:
        limit = committed_end if base == active_base else None
        found = _first_at_or_after(
            segment_path(directory, base), position, offset, limit, timestamp_us
        )
        if found[0] is not None:
            return found[0]
        offset = found[1]
        later = [b for b in bases if b > base]
        if not later:
            break
        base, position = later[0], 0
    return end_offset


def _first_at_or_after(
    path: Path, position: int, offset: int, limit: int | None, timestamp_us: int
) -> tuple[int | None, int]:
    """Scan one segment: (offset found or None, offset after the segment)."""
    with open(path, "rb") as handle:
        fd = handle.fileno()
        while limit is None or position < limit:
            header = os.pread(fd, HEADER_SIZE, position)
            if len(header) < HEADER_SIZE:
                break
            length, _, stamp, _, _ = HEADER.unpack(header)
            if stamp >= timestamp_us:
                return offset, offset
            position += 4 + length
            offset += 1
    return None, offset
