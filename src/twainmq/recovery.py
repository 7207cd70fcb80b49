"""Opening a partition after any kind of stop: find where valid data ends.

Runs under the partition lock when a producer or consumer opens a partition, unless a live
writer holds that lock (it recovered the partition when it opened it). It reads at most the
tail of the active segment (from its last index entry), so it is cheap.

- Bytes past the last valid record are cut off (a torn tail, or records a killed writer wrote
  but never committed). Valid records past the head's committed end are kept: their writer
  finished the write and only missed moving the head; its call never returned, so keeping
  them is as correct as dropping them.
- A record that fails its checks *before* the committed end is damage to acknowledged data:
  TopicCorruptError names the file and the byte position, and nothing is cut.
- A missing or damaged index is rebuilt from the segment.
- Offsets are never reused. If the active segment is missing (deleted), its records are lost,
  but the next offset stays where the head says (or, with no usable head, where the newest
  index file says): a new, empty active segment starts there, and readers that reach the
  lost offsets get TopicCorruptError for the gap (``reader.py``) instead of new records
  under old offsets.
"""

from __future__ import annotations

import os
from pathlib import Path

from .config import TopicConfig
from .errors import TopicCorruptError
from .segments import (
    IndexEntry,
    build_index,
    end_of,
    index_path,
    list_indexes,
    list_segments,
    read_index,
    scan_valid,
    segment_path,
    write_index,
)

HeadFields = tuple[int, int, int, int, int]


def recover_partition(directory: Path, config: TopicConfig, head: HeadFields | None) -> HeadFields:
    """Repair the partition's tail and return the head fields that describe it."""
    if head is not None and not _plausible(head):
        head = None  # damaged: recomputed from the files
    bases = list_segments(directory)
    lost_active = _next_offset_of_lost_active(directory, bases, head)
    if lost_active is not None:
        for sealed in bases:
            if not index_path(directory, sealed).exists():
                rebuild_sealed_index(directory, sealed, config.index_interval_bytes)
        _create_empty_segment(directory, lost_active)
        return lost_active, 0, lost_active, 0, 0
    if not bases:
        segment_path(directory, 0).touch()
        index_path(directory, 0).touch()
        return 0, 0, 0, 0, 0
    for sealed in bases[:-1]:
        if not index_path(directory, sealed).exists():
            rebuild_sealed_index(directory, sealed, config.index_interval_bytes)
    base = bases[-1]
    committed = head[1] if head is not None and head[0] == base else 0
    return recover_active(directory, base, committed, config.index_interval_bytes)


def _plausible(head: HeadFields) -> bool:
    base, end, next_offset, index_bytes, next_index = head
    return 0 <= base <= next_offset and end >= 0 and index_bytes >= 0 and next_index >= 0


def _next_offset_of_lost_active(
    directory: Path, bases: list[int], head: HeadFields | None
) -> int | None:
    """If the active segment file is missing, the offset the next record must get (never
    below what the head or an index file says was written); None if it is there.

    The active segment is missing when the head names a segment newer than every segment
    file, or when an index file is newer than every segment file (a roll creates the
    segment file before its index; retention deletes old ones only).
    """
    newest = bases[-1] if bases else -1
    floors = []
    if head is not None and head[0] > newest:
        floors.append(head[2])
    for base in list_indexes(directory):
        if base > newest:
            entries = read_index(index_path(directory, base))
            floors.append(base + (entries[-1][0] + 1 if entries else 0))
    if not floors:
        return None
    if head is not None:
        floors.append(head[2])
    return max(floors)


def _create_empty_segment(directory: Path, base: int) -> None:
    for path in (segment_path(directory, base), index_path(directory, base)):
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            os.ftruncate(fd, 0)
        finally:
            os.close(fd)


def recover_active(directory: Path, base: int, committed: int, interval: int) -> HeadFields:
    """Scan the active segment's tail, truncate what is not valid, fix its index."""
    path = segment_path(directory, base)
    fd = os.open(path, os.O_RDWR)
    try:
        old_entries = read_index(index_path(directory, base))
        start = _start_entry(old_entries, committed)
        found = scan_valid(fd, start[1])
        if start[1] and (not found or found[0][0] != start[1]):
            start, found = (0, 0, 0), scan_valid(fd, 0)
        end = end_of(fd, found, start[1])
        if end < committed:
            raise TopicCorruptError(
                path, end, f"record fails its checks inside acknowledged data (ends at {committed})"
            )
        if os.fstat(fd).st_size > end:
            os.ftruncate(fd, end)
    finally:
        os.close(fd)
    kept = [e for e in old_entries if e[1] < start[1]]
    entries = kept + build_index(found, start[0], interval)
    if entries != old_entries or not index_path(directory, base).exists():
        write_index(index_path(directory, base), entries)
    next_index = entries[-1][1] + interval if entries else 0
    return base, end, base + start[0] + len(found), 16 * len(entries), next_index


def _start_entry(entries: list[IndexEntry], committed: int) -> IndexEntry:
    """The last index entry inside committed data: scanning starts there."""
    usable = [e for e in entries if e[1] <= committed]
    return usable[-1] if usable else (0, 0, 0)


def rebuild_sealed_index(directory: Path, base: int, interval: int) -> None:
    """Rebuild the index of a sealed segment; the whole segment must be valid."""
    path = segment_path(directory, base)
    fd = os.open(path, os.O_RDONLY)
    try:
        found = scan_valid(fd, 0)
        end = end_of(fd, found, 0)
        if end != os.fstat(fd).st_size:
            raise TopicCorruptError(path, end, "record fails its checks in a sealed segment")
    finally:
        os.close(fd)
    write_index(index_path(directory, base), build_index(found, 0, interval))
