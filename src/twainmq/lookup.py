"""Finding records in a partition: by offset and by timestamp. Read-only, lock-free."""

from __future__ import annotations

import os
import zlib
from bisect import bisect_right
from itertools import pairwise
from pathlib import Path

from .encoding import HEADER, HEADER_SIZE, CorruptRecord, check_length
from .errors import TopicCorruptError
from .log_start import log_start_path, read_log_start
from .recovery import rebuild_sealed_index
from .segments import (
    index_path,
    inspect_index,
    list_segments,
    nearest_entry,
    read_index,
    segment_path,
)

Head = tuple[int, int, int]
"""(active segment base, committed end position, next offset)."""
Location = tuple[int, int, int]
"""(segment base, byte position, offset of the record there)."""
SKIP_CHUNK = 64 * 1024


def log_start(directory: Path, head: Head) -> int:
    """Return the oldest offset still kept (retention may have deleted older segments).

    That is the durable log start (``log_start.py``) or, if retention has not yet deleted
    segments below it, the oldest segment. Raises TopicCorruptError if segment files between
    the log start and the oldest segment are missing (deleted by hand, not by retention).
    """
    bases = [b for b in list_segments(directory) if b <= head[0]] or [head[0]]
    start = read_log_start(directory)
    if bases[0] > start:
        raise missing_oldest(directory, start, bases[0])
    return max(start, bases[0])


def missing_oldest(directory: Path, start: int, oldest: int) -> TopicCorruptError:
    """The error for segments missing below the oldest segment file (not retention's)."""
    missing = segment_path(directory, start)
    recorded = log_start_path(directory)
    why = (
        f"{recorded} says retention kept every offset from {start}"
        if recorded.exists()
        else f"retention never deleted a segment here: there is no {recorded}"
    )
    return TopicCorruptError(
        missing,
        -1,
        f"missing: no segment file {missing.name} (the oldest segment is "
        f"{segment_path(directory, oldest).name}, and {why}): segment files were deleted or "
        "lost outside twainmq",
        partition=int(directory.name) if directory.name.isdigit() else None,
        offsets=range(start, oldest),
    )


def locate(directory: Path, offset: int, head: Head, skip_lost: bool = False) -> Location:
    """Return where the record ``offset`` starts (or where it will be written).

    Offsets below the oldest kept offset are moved up to it; ``offset`` must not exceed the
    partition's end offset (as read at any time before). So every record before ``offset``
    is committed, and its position is found by counting records from the nearest index
    entry. Only the head's segment base is used: its committed end and next offset are not
    one moment's pair (``PartitionLog.head``), and taking ``(end, next offset)`` as
    ``(position, offset)`` put a reader at the wrong record, or past the data of a new
    segment for good. Offsets lost below the oldest segment raise TopicCorruptError, or
    with ``skip_lost`` move up to it.
    """
    active_base = head[0]
    # A roll creates the next segment before the head names it: not yet readable.
    bases = [b for b in list_segments(directory) if b <= active_base] or [active_base]
    start = read_log_start(directory)
    if bases[0] > start and offset < bases[0] and not skip_lost:
        raise missing_oldest(directory, start, bases[0])
    offset = max(offset, start)
    if offset <= bases[0]:
        return bases[0], 0, bases[0]
    base = bases[bisect_right(bases, offset) - 1]
    entries = _trusted_index(directory, base, sealed=base < active_base)
    entry = nearest_entry(entries, offset - base)
    relative, position = (entry[0], entry[1]) if entry else (0, 0)
    path = segment_path(directory, base)
    return base, skip_records(path, position, offset - base - relative), offset


def _trusted_index(directory: Path, base: int, sealed: bool) -> list[tuple[int, int, int]]:
    """The index entries of segment ``base`` that pass their checks; a damaged index of a
    sealed segment is rebuilt from the segment first (its content is fixed, so any reader
    may replace it atomically; the active segment's is rebuilt by recovery)."""
    path = index_path(directory, base)
    entries, problem = inspect_index(path, base)
    if problem is not None and sealed:
        try:
            rebuild_sealed_index(directory, base, _interval_of(entries))
        except OSError:  # deleted by retention meanwhile, or read-only: use what we have
            return entries
        if not segment_path(directory, base).exists():  # retention won the race
            _unlink_quietly(path)
            return entries
        return read_index(path, base)
    return entries


def _interval_of(entries: list[tuple[int, int, int]]) -> int:
    # Any interval gives a correct index; the topic's is usually the smallest gap seen.
    gaps = [b[1] - a[1] for a, b in pairwise(entries)]
    return max(64, min(gaps)) if gaps else 16 * 1024


def _unlink_quietly(path: Path) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def skip_records(path: Path, position: int, count: int) -> int:
    """Return the position ``count`` records after ``position`` in segment ``path``.

    The records skipped must be committed; each one's CRC is checked, so a damaged length
    never puts a reader at a wrong position (TopicCorruptError names the file and byte).
    Stops early at end of file. Reads ``SKIP_CHUNK`` bytes at a time, not a header per record.
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
            length, crc, _, _, key_length = HEADER.unpack_from(chunk, at)
            stop = at + 4 + length
            if stop > len(chunk):
                try:
                    check_length(length, key_length, position)
                except CorruptRecord as exc:
                    raise TopicCorruptError(path, position, exc.reason) from None
                chunk, chunk_at = os.pread(fd, max(SKIP_CHUNK, 4 + length), position), position
                at, stop = 0, 4 + length
                if stop > len(chunk):
                    break
            if zlib.crc32(memoryview(chunk)[at + 8 : stop]) != crc:
                raise TopicCorruptError(path, position, "CRC mismatch")
            position += 4 + length
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
        for relative, position, stamp in read_index(index_path(directory, base), base):
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
