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
    list_segments,
    read_index,
    scan_valid,
    segment_path,
    write_index,
)

HeadFields = tuple[int, int, int, int, int]


def recover_partition(directory: Path, config: TopicConfig, head: HeadFields | None) -> HeadFields:
    """Repair the partition's tail and return the head fields that describe it."""
    bases = list_segments(directory)
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
