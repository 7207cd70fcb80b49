"""Read-only views of a topic for operators and the CLI: partitions, segments, offsets, bytes.

Nothing here takes a lock or repairs anything, so describing a topic is safe while producers
and consumers run. Figures are a snapshot. Offsets come from the heads and the durable log
start, as a consumer's do; ``problems`` lists what a look at the files' names and heads shows
(segments missing below the oldest or at the active end, a damaged head or log-start file),
and a damaged or missing head's end offset is recomputed from the records, as opening the
partition would. Only ``twainmq check`` (``verify.py``) reads every record.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from .config import TopicConfig
from .encoding import HEAD_CHECK, HEAD_CHECK_AT
from .errors import TopicCorruptError
from .log_start import read_log_start
from .partition import check_head
from .segments import list_segments, segment_path


@dataclass(frozen=True)
class SegmentInfo:
    """One segment file: its first offset, its size and its path."""

    base_offset: int
    bytes: int
    path: Path


@dataclass(frozen=True)
class PartitionInfo:
    """One partition: oldest kept offset, end offset (next to be written), bytes, segments,
    and the damage seen without reading the records (``problems``: one line each, naming
    the file)."""

    partition: int
    start_offset: int
    end_offset: int
    bytes: int
    segments: list[SegmentInfo]
    problems: list[str] = field(default_factory=list)

    @property
    def messages(self) -> int:
        """Messages currently kept."""
        return self.end_offset - self.start_offset


@dataclass(frozen=True)
class TopicDescription:
    """A topic's config and the state of each of its partitions."""

    config: TopicConfig
    partitions: list[PartitionInfo]

    @property
    def bytes(self) -> int:
        """Bytes of all segments."""
        return sum(p.bytes for p in self.partitions)

    @property
    def messages(self) -> int:
        """Messages currently kept in all partitions."""
        return sum(p.messages for p in self.partitions)


def describe_topic(root: Path, config: TopicConfig) -> TopicDescription:
    """Describe every partition of a topic from its files."""
    directory = root / config.name
    return TopicDescription(
        config, [describe_partition(directory / str(p), p) for p in range(config.partitions)]
    )


def describe_partition(directory: Path, partition: int) -> PartitionInfo:
    """Describe one partition directory (a partition never written to is empty)."""
    if not directory.is_dir():
        return PartitionInfo(partition, 0, 0, 0, [])
    segments = []
    for base in list_segments(directory):
        path = segment_path(directory, base)
        try:
            segments.append(SegmentInfo(base, os.stat(path).st_size, path))
        except FileNotFoundError:  # deleted by retention while we looked
            continue
    problems: list[str] = []
    end = read_end_offset(directory)
    if end is None:
        from .verify import check_partition  # the head is damaged: count the records

        end = check_partition(directory, partition).end_offset
    try:
        start = read_log_start(directory)
    except TopicCorruptError as exc:
        problems.append(str(exc))
        start = 0
    bases = [s.base_offset for s in segments]
    if bases and bases[0] > start and not _legacy_head(directory):
        problems.append(
            f"{segment_path(directory, start)}: missing: offsets {start}..{bases[0] - 1} "
            "(not deleted by retention)"
        )
    elif bases:
        start = max(start, bases[0])
    if bases and end > bases[-1] and not _head_base_present(directory, bases):
        problems.append(f"{directory / 'head'}: names an active segment that is missing")
    size = sum(s.bytes for s in segments)
    return PartitionInfo(partition, start if bases else end, end, size, segments, problems)


def _legacy_head(directory: Path) -> bool:
    """A head written before durable log starts existed (upgraded when next opened)."""
    try:
        page = (directory / "head").read_bytes()[: HEAD_CHECK_AT + HEAD_CHECK.size]
    except FileNotFoundError:
        return False
    return check_head(page)[1]


def _head_base_present(directory: Path, bases: list[int]) -> bool:
    try:
        page = (directory / "head").read_bytes()[: HEAD_CHECK_AT + HEAD_CHECK.size]
    except FileNotFoundError:
        return True
    fields = check_head(page)[0]
    return fields is None or fields[0] <= bases[-1]


def read_end_offset(directory: Path) -> int | None:
    """The end offset recorded in a partition's head (0 if it has none yet, None if the
    head is damaged: its checksum fails)."""
    path = directory / "head"
    for _ in range(3):  # a writer may be sealing it right now: look again
        try:
            page = path.read_bytes()[: HEAD_CHECK_AT + HEAD_CHECK.size]
        except FileNotFoundError:
            return 0 if not list_segments(directory) else None
        if not any(page):
            return 0
        fields = check_head(page)[0]
        if fields is not None:
            return int(fields[2])
    return None
