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
- A missing or damaged index of the active segment is rebuilt from the segment; so is a
  missing index of a sealed segment (a damaged one is rebuilt by the first reader that needs
  it, ``lookup.py``: no open reads every index).
- A damaged head (its CRC fails) is recomputed from the segments, as a missing one is.
- A legacy partition (head "TWHEAD01", written before checksums) is upgraded once: every index
  is rebuilt in the checksummed format and the oldest segment is recorded as the durable log
  start (``log_start.py``), so that segments retention deleted before are not taken for lost.
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
from .encoding import INDEX_ENTRY, INDEX_MAGIC, decode_legacy_index, is_legacy_index
from .errors import TopicCorruptError
from .log_start import log_start_path, write_log_start
from .segments import (
    IndexEntry,
    build_index,
    end_of,
    index_path,
    inspect_index,
    list_indexes,
    list_segments,
    scan_valid,
    segment_path,
    write_index,
)

HeadFields = tuple[int, int, int, int, int]


def recover_partition(
    directory: Path, config: TopicConfig, head: HeadFields | None, legacy: bool = False
) -> HeadFields:
    """Repair the partition's tail and return the head fields that describe it.

    ``head`` is None when the head is missing or damaged; ``legacy`` when it was written
    before checksums (the partition is upgraded).
    """
    if head is not None and not _plausible(head):
        head = None  # damaged: recomputed from the files
    bases = list_segments(directory)
    if legacy:
        _upgrade_legacy(directory, bases, config.index_interval_bytes)
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
            entries = _index_entries_even_legacy(index_path(directory, base), base)
            floors.append(base + (entries[-1][0] + 1 if entries else 0))
    if not floors:
        return None
    if head is not None:
        floors.append(head[2])
    return max(floors)


def _index_entries_even_legacy(path: Path, base: int) -> list[IndexEntry]:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    if data[: len(INDEX_MAGIC)] != INDEX_MAGIC and is_legacy_index(data):
        return decode_legacy_index(data)
    return inspect_index(path, base)[0]


def _upgrade_legacy(directory: Path, bases: list[int], interval: int) -> None:
    """Upgrade a partition written before checksums: its oldest segment becomes the durable
    log start (retention may have deleted older ones), its sealed indexes are rebuilt in the
    checksummed format (the active one is rebuilt by ``recover_active``)."""
    if bases and bases[0] > 0 and not log_start_path(directory).exists():
        write_log_start(directory, bases[0])
    for sealed in bases[:-1]:
        if inspect_index(index_path(directory, sealed), sealed)[1] is not None:
            rebuild_sealed_index(directory, sealed, interval)


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
        old_entries, problem = inspect_index(index_path(directory, base), base)
        if problem is not None:
            old_entries = []  # missing, legacy or damaged: rebuilt from the segment's start
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
    if entries != old_entries or problem is not None:
        write_index(index_path(directory, base), base, entries)
    next_index = entries[-1][1] + interval if entries else 0
    return base, end, base + start[0] + len(found), index_file_size(entries), next_index


def index_file_size(entries: list[IndexEntry]) -> int:
    """The bytes of an index file holding ``entries`` (as ``write_index`` writes it)."""
    # With no entries the next writer starts the file afresh (magic first), whatever it holds.
    return len(INDEX_MAGIC) + INDEX_ENTRY.size * len(entries) if entries else 0


def _start_entry(entries: list[IndexEntry], committed: int) -> IndexEntry:
    """The last index entry inside committed data: scanning starts there."""
    usable = [e for e in entries if e[1] <= committed]
    return usable[-1] if usable else (0, 0, 0)


def rebuild_sealed_index(directory: Path, base: int, interval: int) -> bool:
    """Rebuild the index of a sealed segment from its records; return whether the whole
    segment is valid. If it is not, the index covers the valid records before the first bad
    one (those positions are right), and a reader that gets there raises TopicCorruptError."""
    path = segment_path(directory, base)
    fd = os.open(path, os.O_RDONLY)
    try:
        found = scan_valid(fd, 0)
        whole = end_of(fd, found, 0) == os.fstat(fd).st_size
    finally:
        os.close(fd)
    write_index(index_path(directory, base), base, build_index(found, 0, interval))
    return whole
