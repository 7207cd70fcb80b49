"""Segment and index files of one partition directory.

    <root>/<topic>/<partition>/
        head                          partition head (see encoding.py), also the lock file
        00000000000000000000.log      segment: records, named by the offset of its first record
        00000000000000000000.idx      sparse index of that segment (rebuilt when missing)
        00000000000000081920.log      next segment after a roll
        ...

Functions here read and scan files; they take no locks (the caller holds what it needs).
"""

from __future__ import annotations

import os
from bisect import bisect_right
from pathlib import Path

from .atomic_files import write_file_atomically
from .encoding import (
    HEADER_SIZE,
    MAX_LENGTH,
    IndexEntry,
    decode_index,
    index_bytes,
    record_boundaries,
    records_end,
)

SEGMENT_SUFFIX = ".log"
INDEX_SUFFIX = ".idx"
SCAN_CHUNK = 4 * 1024 * 1024


def segment_path(directory: Path, base: int) -> Path:
    """Return the path of the segment whose first offset is ``base``."""
    return directory / f"{base:020d}{SEGMENT_SUFFIX}"


def index_path(directory: Path, base: int) -> Path:
    """Return the path of the sparse index of segment ``base``."""
    return directory / f"{base:020d}{INDEX_SUFFIX}"


def list_segments(directory: Path) -> list[int]:
    """Return the base offsets of the segments in ``directory``, oldest first."""
    return _list_bases(directory, SEGMENT_SUFFIX)


def list_indexes(directory: Path) -> list[int]:
    """Return the base offsets of the index files in ``directory``, oldest first."""
    return _list_bases(directory, INDEX_SUFFIX)


def _list_bases(directory: Path, wanted: str) -> list[int]:
    bases = []
    for name in os.listdir(directory):
        stem, suffix = name[:-4], name[-4:]
        if suffix == wanted and len(stem) == 20 and stem.isdigit():
            bases.append(int(stem))
    return sorted(bases)


def read_index(path: Path, base: int) -> list[IndexEntry]:
    """Return the entries of segment ``base``'s index that pass their checks ([] if the file
    is missing). Damaged entries are left out: a seek then counts records from an earlier
    entry, so it is slower, never wrong."""
    return inspect_index(path, base)[0]


def inspect_index(path: Path, base: int) -> tuple[list[IndexEntry], str | None]:
    """Return the trustworthy entries of an index file and what is wrong with it (None if
    nothing; "missing" if there is no file; "legacy" for the format before checksums)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return [], "missing"
    return decode_index(data, base)


def scan_valid(fd: int, start: int, limit: int | None = None) -> list[tuple[int, int]]:
    """Return ``(position, timestamp_us)`` of the valid records from ``start`` on.

    Reads from ``fd`` in large chunks and stops at end of file, at ``limit`` or at the first
    record that is incomplete or fails its checks.
    """
    found: list[tuple[int, int]] = []
    pos = start
    want = SCAN_CHUNK
    while limit is None or pos < limit:
        size = want if limit is None else min(want, limit - pos)
        data = os.pread(fd, size, pos)
        if len(data) < HEADER_SIZE:
            break
        batch = record_boundaries(data, 0, len(data))
        if not batch:
            needed = _record_length(data)
            if needed is None or needed <= len(data) or len(data) < size:
                break
            want = needed
            continue
        found.extend((pos + p, ts) for p, ts in batch)
        pos += records_end(data, 0, batch)
        want = SCAN_CHUNK
    return found


def _record_length(data: bytes) -> int | None:
    length = int.from_bytes(data[:4], "little")
    return None if length > MAX_LENGTH else length + 4


def end_of(fd: int, found: list[tuple[int, int]], start: int) -> int:
    """Return the position after the last record in ``found`` (``start`` if none)."""
    if not found:
        return start
    last = found[-1][0]
    length = int.from_bytes(os.pread(fd, 4, last), "little")
    return last + 4 + length


def build_index(found: list[tuple[int, int]], first: int, interval: int) -> list[IndexEntry]:
    """Return sparse index entries for records ``found`` (the first has relative offset
    ``first``): one at the first record, then one per ``interval`` bytes."""
    entries: list[IndexEntry] = []
    due = 0
    for number, (position, timestamp_us) in enumerate(found, start=first):
        if position >= due:
            entries.append((number, position, timestamp_us))
            due = position + interval
    return entries


def write_index(path: Path, base: int, entries: list[IndexEntry]) -> int:
    """Replace segment ``base``'s index file with ``entries`` (atomically; not synced: a lost
    index is rebuilt); return its size in bytes."""
    data = index_bytes(base, entries)
    write_file_atomically(path, data, fsync=False)
    return len(data)


def nearest_entry(entries: list[IndexEntry], relative_offset: int) -> IndexEntry | None:
    """Return the last entry at or before ``relative_offset`` (None if there is none)."""
    i = bisect_right([e[0] for e in entries], relative_offset)
    return entries[i - 1] if i else None
