"""Partition ownership: a member owns partition p while it holds the lock ``p.<epoch>.lock``.

The lock file also names its holder, written right after the lock is taken,
so the coordinator can tell whose lock an expelled (hung) member still holds
and move that partition to a new epoch (see ``coordinator``). A name the disk refuses (full,
failing) is not left half written: the lock is let go at once and taken at a later try.
"""

from __future__ import annotations

import os

from twainmq.groups.layout import GroupPaths
from twainmq.groups.locking import try_lock


class PartitionLocks:
    """The partition locks one member holds, by partition, with their epochs."""

    def __init__(self, paths: GroupPaths, member_id: str) -> None:
        self._paths = paths
        self.member_id = member_id
        self._held: dict[int, tuple[int, int]] = {}
        self._epochs: dict[int, int] = {}

    def held(self) -> dict[int, int]:
        """Partitions held, each with the epoch of its lock. The dict itself (no copy: this
        is on every commit's path): read it, do not change it; taking or releasing a
        partition changes it."""
        return self._epochs

    def try_acquire(self, partition: int, epoch: int) -> bool:
        """Take ``partition`` in ``epoch`` if nobody holds it; True on success.

        False too when the disk refuses the holder's name (full, failing): a lock naming a
        cut-short id would look held by a stranger, never fenced. It is let go, empty, and
        the caller tries again at its next check, as for a lock held elsewhere."""
        if partition in self._held:
            return self._held[partition][0] == epoch
        fd = try_lock(self._paths.partition_lock(partition, epoch))
        if fd is None:
            return False
        name = self.member_id.encode()
        try:
            os.ftruncate(fd, 0)
            written = os.pwrite(fd, name, 0)
        except OSError:
            written = -1
        if written != len(name):
            _let_go_empty(fd)
            return False
        self._held[partition] = (epoch, fd)
        self._epochs[partition] = epoch
        return True

    def release(self, partition: int) -> None:
        """Let go of ``partition`` (no-op if not held)."""
        entry = self._held.pop(partition, None)
        self._epochs.pop(partition, None)
        if entry is not None:
            os.close(entry[1])

    def release_all(self) -> None:
        """Let go of every partition."""
        for partition in list(self._held):
            self.release(partition)


def _let_go_empty(fd: int) -> None:
    try:
        os.ftruncate(fd, 0)  # shrinking needs no space
    except OSError:
        pass  # a part of the name stays: it is free once closed, and the next holder's
    os.close(fd)  # truncates it first


def lock_holder(paths: GroupPaths, partition: int, epoch: int) -> str | None:
    """The member id written in a held partition lock; None if the lock is free.

    An empty string means held by a member that has not yet written its id.
    """
    path = paths.partition_lock(partition, epoch)
    try:
        fd = try_lock(path, create=False)
    except FileNotFoundError:
        return None
    if fd is not None:
        os.close(fd)
        return None
    try:
        with open(path, "rb") as file:
            return file.read().decode(errors="replace")
    except FileNotFoundError:
        return None
