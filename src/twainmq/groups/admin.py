"""Looking at groups from outside, and resetting an inactive group's offsets.

Used by ``twainmq groups``. Nothing here joins a group: describing a group
only reads its files and looks at its members' locks.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from twainmq.groups.commits import read_commits, rewrite_commits
from twainmq.groups.coordinator import epochs_on_disk
from twainmq.groups.errors import (
    GroupActiveError,
    GroupBusyError,
    GroupFileCorruptError,
    GroupNotFoundError,
)
from twainmq.groups.lag import PartitionLag, partition_lags
from twainmq.groups.layout import GroupPaths
from twainmq.groups.locking import exclusive_lock
from twainmq.groups.membership import MemberStatus, member_status
from twainmq.groups.state import GroupState, load_state, save_state

# Describing a group must not call a slow member hung; only its members decide that.
_DESCRIBE_SESSION_TIMEOUT = 10.0
_RESET_WAIT = 5.0


@dataclass(frozen=True)
class MemberDescription:
    """One member as seen from outside: its process, condition and partitions."""

    member_id: str
    pid: int | None
    host: str | None
    status: MemberStatus
    partitions: list[int]


@dataclass(frozen=True)
class GroupDescription:
    """A group's generation, members and per-partition progress."""

    topic: str
    group: str
    generation: int
    members: list[MemberDescription]
    partitions: dict[int, PartitionLag]
    owners: dict[int, str]

    @property
    def active(self) -> bool:
        """True while any member's process still holds its membership lock."""
        return any(m.status is not MemberStatus.DEAD for m in self.members)


def describe_group(paths: GroupPaths, end_offsets: Mapping[int, int]) -> GroupDescription:
    """Describe ``paths``' group; ``end_offsets`` are the topic's (partition -> end)."""
    if not paths.directory.is_dir():
        raise GroupNotFoundError(paths.topic, paths.group)
    # No state yet (being created): no commit file is required either.
    state = load_state(paths) or GroupState(0, len(end_offsets), version=0)
    members = [_describe_member(paths, state, m) for m in sorted(state.members)]
    owners = {p: m for m, ps in state.assignment.items() for p in ps}
    lags = partition_lags(end_offsets, read_commits(paths, state))
    return GroupDescription(paths.topic, paths.group, state.generation, members, lags, owners)


def _describe_member(paths: GroupPaths, state: GroupState, member: str) -> MemberDescription:
    info = state.members.get(member, {})
    pid = info.get("pid")
    host = info.get("host")
    return MemberDescription(
        member_id=member,
        pid=int(pid) if pid is not None else None,
        host=str(host) if host is not None else None,
        status=member_status(paths, member, _DESCRIBE_SESSION_TIMEOUT),
        partitions=sorted(state.assignment.get(member, [])),
    )


class TopicEnds(Protocol):
    """What group_lag needs from a store (``Twain`` has both)."""

    @property
    def root_dir(self) -> Path: ...
    def end_offsets(self, topic_name: str) -> dict[int, int]: ...


def group_lag(store: TopicEnds, topic: str, group: str) -> dict[int, PartitionLag]:
    """End offset, committed offset and lag of every partition, for ``group`` on ``topic``."""
    paths = GroupPaths.of(store.root_dir, topic, group)
    return describe_group(paths, store.end_offsets(topic)).partitions


def reset_offsets(
    paths: GroupPaths, offsets: Mapping[int, int], partitions: int | None = None
) -> None:
    """Set the committed offsets of an inactive group (partition -> next offset to read).

    Holds the group lock throughout, so no member can join half-way; raises
    GroupActiveError naming the members whose processes are still alive. Repairs what it
    rewrites: the commit log (rewritten whole, compacted, with ``offsets`` over the other
    partitions' commits; a damaged log needs ``offsets`` for every partition) and, if it is
    damaged, the group state (rebuilt with no members, for ``partitions`` partitions, epochs
    from the files).
    """
    if not paths.directory.is_dir():
        raise GroupNotFoundError(paths.topic, paths.group)
    with exclusive_lock(paths.lock, timeout=_RESET_WAIT) as locked:
        if not locked:
            raise GroupBusyError(paths.group)
        try:
            state = load_state(paths)
            members = list(state.members) if state is not None else []
            damaged = False
        except GroupFileCorruptError:
            state, members, damaged = None, _member_files(paths), True
        live = [
            m
            for m in members
            if member_status(paths, m, _DESCRIBE_SESSION_TIMEOUT) is not MemberStatus.DEAD
        ]
        if live:
            raise GroupActiveError(paths.group, live)
        if partitions is not None:
            count = partitions
        elif state is not None:
            count = state.partitions
        else:
            count = max(offsets, default=-1) + 1
        epochs = epochs_on_disk(paths)
        if state is not None:
            epochs = {p: max(e, state.epoch(p)) for p, e in {**state.epochs, **epochs}.items()}
        rewrite_commits(paths, offsets, count, epochs, state)
        if damaged:
            save_state(paths, GroupState(1, count, epochs=epochs_on_disk(paths)))


def _member_files(paths: GroupPaths) -> list[str]:
    """The ids of every member file (the state naming them is lost)."""
    try:
        names = os.listdir(paths.members)
    except FileNotFoundError:
        return []
    return [n[: -len(".member")] for n in names if n.endswith(".member")]
