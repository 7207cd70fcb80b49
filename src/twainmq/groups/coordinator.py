"""Membership changes: every one is a short critical section under the group lock.

Whoever notices a change does the work: a joining member adds itself, a
leaving member removes itself, and any member that sees another one dead
(its member lock is free) or hung (heartbeat older than the session timeout)
removes it. The critical section reads ``state.json``, prunes departed
members, runs the pure assignor against the previous assignment, and writes
the next generation. Members then converge on their own: each releases what
it lost and takes what it gained, and the partition locks guarantee that a
partition is taken only after its previous owner let go.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from twainmq.groups.assignor import assign_partitions
from twainmq.groups.commits import commit_epochs, ensure_commit_entries, migrate_legacy_commits
from twainmq.groups.layout import GroupPaths
from twainmq.groups.locking import exclusive_lock
from twainmq.groups.membership import (
    MemberStatus,
    joiner_info,
    member_status,
    remove_member_file,
)
from twainmq.groups.ownership import lock_holder
from twainmq.groups.state import STATE_VERSION, GroupState, load_state, save_state


@dataclass(frozen=True)
class MembershipChange:
    """What a rebalance should do besides pruning departed members."""

    joining: Mapping[str, dict[str, Any]] | None = None
    leaving: Iterable[str] = ()
    on_create: Callable[[], None] | None = None


def rebalance(
    paths: GroupPaths,
    partitions: int,
    session_timeout: float,
    change: MembershipChange,
    wait: float | None = None,
) -> tuple[GroupState, os.stat_result] | None:
    """Apply ``change`` and prune departed members; return the new state and its file's stat.

    ``on_create`` runs (with the lock held) only when the group has no state
    yet. The returned stat identifies the state file this call wrote or read,
    so the caller can tell any later change by a cheaper ``os.stat``. Waits
    ``wait`` seconds at most for the group lock (None: as long as it takes)
    and returns None if it could not get it.
    """
    paths.create()
    with exclusive_lock(paths.lock, wait) as locked:
        if not locked:
            return None
        state = load_state(paths)
        if state is None or state.version < STATE_VERSION:
            migrate_legacy_commits(paths, state)  # before anything writes the commit log
        if state is None:
            # New, or its state.json was lost: epochs never go back (fencing and commits
            # count on that), so they restart from the files that carry them.
            state = GroupState(0, partitions, epochs=epochs_on_disk(paths), version=0)
            if change.on_create is not None:
                change.on_create()
        joining = dict(change.joining or {})
        members = {m: info for m, info in state.members.items() if m not in set(change.leaving)}
        departed = _departed(paths, members, joining, session_timeout)
        for member in departed:
            del members[member]
            remove_member_file(paths, member)
        members.update(joining)
        members.update(waiting_joiners(paths, members, change.leaving))
        epochs = _fence_departed(paths, state, departed)
        changed = members.keys() != state.members.keys() or state.partitions != partitions
        upgrade = state.version < STATE_VERSION
        if changed or upgrade:
            assignment = assign_partitions(range(partitions), members, state.assignment)
            state = GroupState(state.generation + 1, partitions, members, assignment, epochs)
            if upgrade:  # a version-3 group has a log entry for every partition from now on
                ensure_commit_entries(paths, {p: state.epoch(p) for p in range(partitions)})
            save_state(paths, state)
        return state, os.stat(paths.state) if paths.state.exists() else _missing()


def waiting_joiners(
    paths: GroupPaths, members: Mapping[str, Any], leaving: Iterable[str] = ()
) -> dict[str, dict[str, Any]]:
    """Members that hold their member file but are not in ``members`` yet: joiners queued
    for the group lock. Admitting them all in one generation turns N joins into one
    rebalance (each later joiner finds itself admitted and changes nothing): 32 members
    starting at once settle in one or two generations instead of 32."""
    try:
        names = os.listdir(paths.members)
    except FileNotFoundError:
        return {}
    found = {}
    for name in names:
        member = name[: -len(".member")] if name.endswith(".member") else None
        if member is None or member in members or member in set(leaving):
            continue
        info = joiner_info(paths, member)
        if info is not None:
            found[member] = info
    return found


def find_departed(
    paths: GroupPaths, state: GroupState, session_timeout: float, me: str
) -> list[str]:
    """Members other than ``me`` that are dead or hung (a lock-free look, for polling)."""
    others = {m: info for m, info in state.members.items() if m != me}
    return _departed(paths, others, {}, session_timeout)


def _departed(
    paths: GroupPaths,
    members: Mapping[str, Any],
    joining: Mapping[str, Any],
    session_timeout: float,
) -> list[str]:
    return [
        member
        for member in members
        if member not in joining
        and member_status(paths, member, session_timeout) is not MemberStatus.ALIVE
    ]


def _fence_departed(paths: GroupPaths, state: GroupState, departed: list[str]) -> dict[int, int]:
    """Move to a new epoch every partition whose lock a departed member may still hold.

    A killed member's locks are already free and need nothing. A hung member
    still holds its locks and may wake up: bumping the epoch makes its lock
    worthless (nobody checks it any more) and its commits refused. A lock
    held but not yet labelled (empty holder) is fenced too, to be safe.
    """
    epochs = dict(state.epochs)
    if not departed:
        return epochs
    for partition in range(state.partitions):
        epoch = state.epoch(partition)
        holder = lock_holder(paths, partition, epoch)
        if holder is not None and (holder == "" or holder in departed):
            epochs[partition] = epoch + 1
            _unlink_quietly(paths.partition_lock(partition, epoch))
    return epochs


def _unlink_quietly(path: os.PathLike[str]) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass


def _missing() -> os.stat_result:
    return os.stat_result((0,) * 10)


def epochs_on_disk(paths: GroupPaths) -> dict[int, int]:
    """Partition -> the highest epoch any of its commit or partition lock files carries."""
    epochs = commit_epochs(paths)
    try:
        names = os.listdir(paths.directory / "partitions")
    except FileNotFoundError:
        names = []
    for name in names:
        parts = name.split(".")
        if len(parts) == 3 and parts[2] == "lock" and parts[0].isdigit() and parts[1].isdigit():
            partition, epoch = int(parts[0]), int(parts[1])
            epochs[partition] = max(epoch, epochs.get(partition, epoch))
    return epochs
