"""Verifying a topic's files: every record, index and head (``twainmq check``). Read-only.

Nothing here takes a lock or repairs anything, so a topic can be checked while producers and
consumers run; records written meanwhile may or may not be counted. For each partition the
check finds what a consumer reading from the log start would meet, in order:

- the head: missing, damaged (fails its CRC), legacy (upgraded on next open) or fine;
- the durable log start (``log_start.py``): damaged, or segments missing below the oldest;
- every segment: every record's length and CRC (a sealed segment must end exactly at its
  last record; the active one at or past the committed end), and that each segment starts
  at the offset where the previous one ended (no gap, no overlap);
- every index: missing, legacy, damaged entries, or an entry that does not point at its
  record (every entry is compared with the records just scanned);
- the head's next offset against the records found.

``readable`` is the range of offsets a consumer reads before it meets the first problem that
stops it (a bad record, a gap): what ``twainmq check`` reports next to the head's end offset.
Problems that recovery or a reader repairs on its own (a missing or damaged index, a damaged
head, a legacy file) are reported as ``repairable``: they never make a consumer fail.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .config import TopicConfig
from .encoding import HEAD_CHECK, HEAD_CHECK_AT, HEAD_MAGIC, HEAD_SEALED, LEGACY_HEAD_MAGIC
from .errors import TopicCorruptError
from .log_start import log_start_path, read_log_start
from .partition import check_head
from .segments import end_of, index_path, inspect_index, list_segments, scan_valid, segment_path


@dataclass(frozen=True)
class Problem:
    """Something wrong with one file. ``repairable``: fixed on open or when read, without
    loss; otherwise a consumer stops there (or skips it with ``on_gap="skip"`` for a gap)."""

    path: Path
    what: str
    repairable: bool = False

    def __str__(self) -> str:
        return f"{self.path}: {self.what}"


@dataclass
class PartitionCheck:
    """What a check of one partition found."""

    partition: int
    start_offset: int = 0
    end_offset: int = 0
    readable_end: int = 0
    records: int = 0
    problems: list[Problem] = field(default_factory=list)

    @property
    def damaged(self) -> bool:
        """True if a consumer cannot read every offset from the start to the end."""
        return any(not p.repairable for p in self.problems)


def check_topic(root: Path, config: TopicConfig) -> list[PartitionCheck]:
    """Check every partition of a topic."""
    directory = root / config.name
    return [check_partition(directory / str(p), p) for p in range(config.partitions)]


def check_partition(directory: Path, partition: int) -> PartitionCheck:
    """Check one partition directory (a partition never written to is empty and fine)."""
    result = PartitionCheck(partition)
    if not directory.is_dir():
        return result
    head = _check_head(directory, result)
    bases = list_segments(directory)
    try:
        start = read_log_start(directory)
    except TopicCorruptError as exc:
        result.problems.append(Problem(Path(exc.path), exc.reason))
        start = 0
    if head is not None and head[4] and bases and not log_start_path(directory).exists():
        start = bases[0]  # legacy: the upgrade on open records the oldest segment
    if head is not None and head[0] > (bases[-1] if bases else -1):
        what = f"missing: the active segment (offsets {head[0]}..{head[2] - 1} are lost)"
        result.problems.append(Problem(segment_path(directory, head[0]), what))
    missing_oldest = bool(bases) and bases[0] > start
    result.start_offset = start if missing_oldest or not bases else max(start, bases[0])
    if missing_oldest:
        result.problems.append(
            Problem(
                segment_path(directory, start),
                f"missing: offsets {start}..{bases[0] - 1} (below the oldest segment "
                f"{segment_path(directory, bases[0]).name}; not deleted by retention)",
            )
        )
    readable = not missing_oldest
    result.readable_end = result.start_offset
    expected = max(start, bases[0]) if bases else start
    for number, base in enumerate(bases):
        active = number == len(bases) - 1
        committed = head[1] if head is not None and active and head[0] == base else None
        if number > 0 and base != expected:
            previous = segment_path(directory, bases[number - 1])
            if base > expected:
                what = (
                    f"gap: offsets {expected}..{base - 1} missing (this segment ends at offset "
                    f"{expected}; the next one, {segment_path(directory, base).name}, starts "
                    f"at {base})"
                )
            else:
                what = (
                    f"overlap: holds records up to offset {expected - 1}, past the start of "
                    f"the next segment {segment_path(directory, base).name}"
                )
            result.problems.append(Problem(previous, what))
            readable = False
        count, whole = _check_segment(directory, base, active, committed, result)
        result.records += count
        if readable:
            result.readable_end = base + count
        readable = readable and whole
        expected = base + count
    result.end_offset = head[2] if head is not None else expected
    if head is not None and head[3] and bases and head[0] == bases[-1] and head[2] > expected:
        result.problems.append(
            Problem(
                directory / "head",
                f"the head's next offset is {head[2]} but the records end at offset {expected}",
            )
        )
    return result


def _check_head(directory: Path, result: PartitionCheck) -> tuple[int, int, int, bool, bool] | None:
    """Judge the head; return (base, committed end, next offset, settled, legacy) if it can
    be trusted. ``settled``: no writer holds the partition (the fields do not move)."""
    path = directory / "head"
    try:
        page = path.read_bytes()[: HEAD_CHECK_AT + HEAD_CHECK.size]
    except FileNotFoundError:
        result.problems.append(Problem(path, "missing (recomputed on open)", True))
        return None
    if len(page) < HEAD_CHECK_AT + HEAD_CHECK.size:
        result.problems.append(Problem(path, "too short (recomputed on open)", True))
        return None
    fields, legacy = check_head(page)
    magic = page[:8]
    if fields is None:
        if magic in (HEAD_MAGIC, LEGACY_HEAD_MAGIC) or any(page):
            what = "damaged: fails its checksum (recomputed on open)"
            result.problems.append(Problem(path, what, True))
        return None
    if legacy:
        result.problems.append(Problem(path, "written before checksums (upgraded on open)", True))
    sealed = HEAD_CHECK.unpack_from(page, HEAD_CHECK_AT)[1] == HEAD_SEALED
    # An unsealed head belongs to a writer at work (or killed): its end and next offset move.
    return fields[0], fields[1], fields[2], sealed or legacy, legacy


def _check_segment(
    directory: Path, base: int, active: bool, committed: int | None, result: PartitionCheck
) -> tuple[int, bool]:
    """Scan one segment and its index; return (records, whether every record is valid)."""
    path = segment_path(directory, base)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:  # deleted by retention while we looked
        return 0, True
    try:
        found = scan_valid(fd, 0)
        end = end_of(fd, found, 0)
        size = os.fstat(fd).st_size
    finally:
        os.close(fd)
    whole = True
    if not active and end != size:
        result.problems.append(
            Problem(path, f"record at byte {end} fails its checks ({size - end} bytes from there)")
        )
        whole = False
    elif active and committed is not None and end < committed:
        result.problems.append(
            Problem(
                path,
                f"record at byte {end} fails its checks inside acknowledged data (committed "
                f"end {committed})",
            )
        )
        whole = False
    records = found if committed is None else [f for f in found if f[0] < committed]
    _check_index(directory, base, [position for position, _ in found], result)
    return len(records), whole


def _check_index(directory: Path, base: int, positions: list[int], result: PartitionCheck) -> None:
    path = index_path(directory, base)
    entries, problem = inspect_index(path, base)
    if problem == "legacy":
        result.problems.append(Problem(path, "written before checksums (rebuilt on open)", True))
    elif problem is not None:
        result.problems.append(Problem(path, f"index {problem} (rebuilt on open or read)", True))
    for relative, position, _ in entries:
        if relative < len(positions) and positions[relative] != position:
            what = (
                f"entry for offset {base + relative} points at byte {position}, not its record "
                "(rebuilt on open or read)"
            )
            result.problems.append(Problem(path, what, True))
            break
