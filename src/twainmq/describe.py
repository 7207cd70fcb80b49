"""Read-only views of a topic for operators and the CLI: partitions, segments, offsets, bytes.

Nothing here takes a lock or repairs anything, so describing a topic is safe while producers
and consumers run. Figures are a snapshot.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from .config import TopicConfig
from .encoding import HEAD, HEAD_MAGIC
from .segments import list_segments, segment_path


@dataclass(frozen=True)
class SegmentInfo:
    """One segment file: its first offset, its size and its path."""

    base_offset: int
    bytes: int
    path: Path


@dataclass(frozen=True)
class PartitionInfo:
    """One partition: oldest kept offset, end offset (next to be written), bytes, segments."""

    partition: int
    start_offset: int
    end_offset: int
    bytes: int
    segments: list[SegmentInfo]

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
    end = read_end_offset(directory)
    start = segments[0].base_offset if segments else end
    return PartitionInfo(partition, start, end, sum(s.bytes for s in segments), segments)


def read_end_offset(directory: Path) -> int:
    """The end offset recorded in a partition's head (0 if it has none yet)."""
    try:
        data = (directory / "head").read_bytes()[: HEAD.size]
    except FileNotFoundError:
        return 0
    if len(data) < HEAD.size or data[: len(HEAD_MAGIC)] != HEAD_MAGIC:
        return 0
    return int(HEAD.unpack(data)[3])
