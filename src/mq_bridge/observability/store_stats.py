"""What a twainmq store holds, read through twainmq's public admin door (read-only).

Used by the Prometheus store collector and by the console. Nothing here takes a lock,
joins a group or writes a file: ``twainmq.admin.describe_topic_files`` reads the
partitions' heads and file names (end offsets come from there too),
``twainmq.admin.describe_group`` a group's state and commit files.
(``Twain.end_offsets`` is not used: it opens the partitions, which may recover them,
and that is a writer's business.)
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from twainmq import TopicDescription, Twain, TwainMQError
from twainmq.admin import (
    GroupDescription,
    MemberStatus,
    describe_group,
    describe_topic_files,
    list_groups,
)

__all__ = [
    "GroupRow",
    "TopicRow",
    "describe_groups",
    "describe_topic",
    "describe_topics",
    "end_offsets",
    "open_read_only",
]


@dataclass(frozen=True)
class TopicRow:
    """One topic's summary, or the error that kept it from being read."""

    name: str
    description: TopicDescription | None
    error: str | None = None

    @property
    def end_offsets(self) -> dict[int, int]:
        if self.description is None:
            return {}
        return {p.partition: p.end_offset for p in self.description.partitions}


@dataclass(frozen=True)
class GroupRow:
    """One group as seen from outside, or the error that kept it from being read."""

    topic: str
    group: str
    description: GroupDescription | None
    error: str | None = None

    @property
    def live_members(self) -> int:
        if self.description is None:
            return 0
        return sum(1 for m in self.description.members if m.status is not MemberStatus.DEAD)

    @property
    def lag(self) -> int:
        if self.description is None:
            return 0
        return sum(p.lag for p in self.description.partitions.values())


def open_read_only(root: str | Path) -> Twain:
    """A `Twain` over an existing store root (never creates one)."""
    path = Path(root)
    if not path.is_dir():
        raise FileNotFoundError(f"no twainmq store at {path}")
    return Twain(path)


def describe_topics(store: Twain, names: list[str] | None = None) -> list[TopicRow]:
    """Every topic (or those `names`), described; a damaged one carries its error.

    The overview skips the check of each config against its topic's data files (about
    half the time of ``Twain.describe_topic`` with 100 topics x 16 partitions);
    `describe_topic` (one topic's page) makes it.
    """
    rows = []
    for name in store.list_topics() if names is None else names:
        try:
            rows.append(TopicRow(name, describe_topic_files(store.root_dir, name)))
        except (TwainMQError, OSError) as error:
            rows.append(TopicRow(name, None, str(error)))
    return rows


def describe_topic(store: Twain, name: str) -> TopicRow:
    """One topic, described after the full check of its config against its data."""
    try:
        return TopicRow(name, store.describe_topic(name))
    except (TwainMQError, OSError) as error:
        return TopicRow(name, None, str(error))


def end_offsets(store: Twain, topic: str) -> dict[int, int]:
    """partition -> end offset, from the partitions' heads."""
    described = describe_topic_files(store.root_dir, topic)
    return {p.partition: p.end_offset for p in described.partitions}


def describe_groups(
    store: Twain,
    known_ends: Mapping[str, Mapping[int, int]] | None = None,
    topic: str | None = None,
) -> list[GroupRow]:
    """Every consumer group of the store (or of `topic`); `known_ends` (topic -> partition
    -> end) saves reading the topics' heads again when the caller has them."""
    rows = []
    ends: dict[str, Mapping[int, int]] = dict(known_ends or {})
    found = list_groups(store.root_dir)
    for paths in found if topic is None else [g for g in found if g.topic == topic]:
        try:
            if paths.topic not in ends:
                ends[paths.topic] = end_offsets(store, paths.topic)
            described = describe_group(paths, ends[paths.topic])
            rows.append(GroupRow(paths.topic, paths.group, described))
        except (TwainMQError, OSError) as error:
            rows.append(GroupRow(paths.topic, paths.group, None, str(error)))
    return rows
