"""One member of a consumer group: joins, watches the group cheaply, owns partitions.

The member knows nothing about messages; ``GroupConsumer`` puts it together
with an engine consumer. Everything here is driven by the owner calling
``refresh()`` often (every ``poll()``); it does real work at most every
``check_interval`` seconds:

- one ``os.stat`` of ``state.json`` tells whether a new generation exists;
- every ``heartbeat_interval``, touch our member file;
- every ``liveness_interval``, look at the other members' locks, and
  rebalance if one is dead or hung.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from twainmq.groups.commit_log import FSYNC_MODES, CommitLog
from twainmq.groups.commits import adoption, fenced_commit, read_commits, read_table
from twainmq.groups.coordinator import MembershipChange, find_departed, rebalance
from twainmq.groups.errors import CommitFencedError
from twainmq.groups.layout import GroupPaths
from twainmq.groups.locking import exclusive_lock
from twainmq.groups.membership import MemberFile, new_member_id
from twainmq.groups.ownership import PartitionLocks
from twainmq.groups.state import GroupState, load_state


@dataclass(frozen=True)
class GroupSettings:
    """How a member behaves: how fast it notices things (seconds), how it commits.

    ``commit_fsync`` takes the producers' choices: ``"never"`` (default: a returned commit
    is in the kernel and survives a crash of the process, not a power cut), ``"always"``
    (on disk when ``commit()`` returns; concurrent commits of the process share one
    fdatasync) or ``"batch"`` (a background sync within 10 ms).
    """

    session_timeout: float = 10.0
    check_interval: float = 0.005
    liveness_interval: float = 0.1
    commit_fsync: str = "never"

    def __post_init__(self) -> None:
        if self.commit_fsync not in FSYNC_MODES:
            modes = ", ".join(FSYNC_MODES)
            raise ValueError(f"commit_fsync {self.commit_fsync!r} must be one of {modes}")

    @property
    def heartbeat_interval(self) -> float:
        """Heartbeats come often enough that one late poll never looks like a hang."""
        return min(self.session_timeout / 4, 0.5)


class GroupMember:
    """This process's (or thread's) membership in one group of one topic."""

    def __init__(
        self,
        paths: GroupPaths,
        partitions: int,
        settings: GroupSettings | None = None,
        on_create: Callable[[], None] | None = None,
    ) -> None:
        self.paths = paths
        self.partitions = partitions
        self.settings = settings or GroupSettings()
        self._on_create = on_create
        self.next_check = self._next_heartbeat = self._next_liveness = 0.0
        self._log = CommitLog(paths, self.settings.commit_fsync)
        self._join()

    next_check: float
    """Monotonic time before which ``refresh()`` does nothing (callers may skip it)."""

    def _join(self) -> None:
        self.member_id = new_member_id()
        self.paths.create()
        self._file = MemberFile(self.paths, self.member_id)
        self._locks = PartitionLocks(self.paths, self.member_id)
        change = MembershipChange({self.member_id: self._file.info}, on_create=self._on_create)
        timeout = self.settings.session_timeout
        self._stamp: tuple[int, int, int] | None = None
        try:
            while True:
                # Whoever holds the group lock admits every member waiting for it
                # (coordinator.waiting_joiners): once admitted, do not queue for the lock.
                if self._admitted():
                    return
                result = rebalance(self.paths, self.partitions, timeout, change, _JOIN_SLICE)
                if result is not None:
                    self._adopt(result)
                    return
        except BaseException:  # e.g. a damaged state.json: do not stay a member
            self._file.release()
            raise

    def _admitted(self) -> bool:
        """True (and the state adopted) if the current state already counts this member."""
        try:
            before = _stamp_of(os.stat(self.paths.state))
        except FileNotFoundError:
            return False
        if before == self._stamp:
            return False  # looked at already
        state = load_state(self.paths)
        self._stamp = before
        if state is None or self.member_id not in state.members:
            return False
        try:
            if _stamp_of(os.stat(self.paths.state)) != before:
                return False  # replaced while we read it: look again
        except FileNotFoundError:
            return False
        self.state = state
        return True

    def _adopt(self, result: tuple[GroupState, os.stat_result] | None) -> None:
        if result is not None:
            self.state, self._stamp = result[0], _stamp_of(result[1])

    @property
    def generation(self) -> int:
        """The generation of the group state this member last saw."""
        return self.state.generation

    @property
    def expelled(self) -> bool:
        """True once the group removed this member (it stopped heart-beating too long)."""
        return self.member_id not in self.state.members

    def target(self) -> list[int]:
        """The partitions the current generation gives this member."""
        return [] if self.expelled else self.state.assignment.get(self.member_id, [])

    def owned(self) -> dict[int, int]:
        """The partitions this member holds the lock of, with their epochs."""
        return self._locks.held()

    def refresh(self) -> bool:
        """Notice group changes (cheap; rate limited). True if ownership should be updated."""
        now = time.monotonic()
        if now < self.next_check:
            return False
        self.next_check = now + self.settings.check_interval
        if now >= self._next_heartbeat:
            self._file.heartbeat()
            self._next_heartbeat = now + self.settings.heartbeat_interval
        changed = self._reload_if_changed()
        if now >= self._next_liveness:
            self._next_liveness = now + self.settings.liveness_interval
            changed = self._prune_departed() or changed
        return changed or self.expelled or bool(self.revocations() or self.pending())

    def revocations(self) -> list[int]:
        """Held partitions this member must let go: reassigned, or fenced by a new epoch."""
        target = set(self.target())
        owned = self.owned().items()
        return sorted(p for p, epoch in owned if p not in target or epoch != self.state.epoch(p))

    def pending(self) -> list[int]:
        """Partitions assigned to this member that it does not hold yet."""
        owned = self.owned()
        return [p for p in self.target() if p not in owned]

    def release(self, partitions: list[int]) -> None:
        """Let go of ``partitions`` (after the application was told they are revoked)."""
        for partition in partitions:
            self._locks.release(partition)

    def acquire_pending(self) -> list[int]:
        """Take every assigned partition whose previous owner has let go; return those taken."""
        if self.expelled and not self.owned():
            self._rejoin()
        taken = [p for p in self.pending() if self._locks.try_acquire(p, self.state.epoch(p))]
        if taken and not _no_rebalance_in_progress(self.paths):
            # A rebalance may have read these locks before they named us (just locked, still
            # empty or naming their previous holder) and be fencing them as a departed
            # member's: its new epochs are not saved yet, so the reload below could not see
            # them. Let go and retry at the next check (never wait: poll() must not stall).
            self.release(taken)
            return []
        if taken and self._reload_if_changed():
            # The group moved on while we were locking: keep only what is still ours.
            stale = set(self.revocations()) & set(taken)
            self.release(sorted(stale))
            taken = [p for p in taken if p not in stale]
        if taken:  # one record for every partition taken
            required = self.state.required_commits() is not None
            epochs = {p: self.state.epoch(p) for p in taken}
            table = read_table(self.paths, self.state)
            self._log.append(adoption(self.paths, table, epochs, required))
        return taken

    def committed(self) -> dict[int, int]:
        """The group's committed offsets (all partitions)."""
        return read_commits(self.paths, self.state)

    def commit(self, offsets: Mapping[int, int]) -> None:
        """Commit ``offsets``; raises CommitFencedError for partitions this member does not own."""
        self._reload_if_changed()
        held = self.owned()
        self._log.append(fenced_commit(self.paths, offsets, held, self.state.epochs))
        # A rebalance that fenced us saves its new epochs before anyone can take the
        # partitions and adopt their commits, so one look at the state after the write tells
        # whether this commit may have landed after an adoption (then it counts for nothing).
        if self._reload_if_changed():
            overtaken = [p for p in offsets if self.state.epoch(p) != held[p]]
            if overtaken:
                raise CommitFencedError(self.paths.group, overtaken)

    def leave(self) -> None:
        """Leave the group at once: free the partitions, then tell the others."""
        self._locks.release_all()
        self._file.release()
        self._log.close()
        change = MembershipChange(leaving=[self.member_id])
        # If a frozen member holds the group lock, give up: the others see our
        # member lock free and remove us themselves.
        timeout = self.settings.session_timeout
        rebalance(self.paths, self.partitions, timeout, change, wait=_LEAVE_WAIT)

    def abandon(self) -> None:
        """Let go of every lock and the member file without telling the group (a collected
        consumer): the others find this member dead at their next liveness check."""
        self._locks.release_all()
        self._file.release()
        self._log.close()

    def _rejoin(self) -> None:
        self._file.release()
        self._join()

    def reload(self) -> bool:
        """Reload the group state if it changed since last seen (one ``os.stat``); True if so."""
        return self._reload_if_changed()

    def _reload_if_changed(self) -> bool:
        try:
            stamp = _stamp_of(os.stat(self.paths.state))
        except FileNotFoundError:
            return False
        if stamp == self._stamp:
            return False
        state = load_state(self.paths)
        if state is None:
            return False
        self.state, self._stamp = state, stamp
        return True

    def _prune_departed(self) -> bool:
        timeout = self.settings.session_timeout
        if not find_departed(self.paths, self.state, timeout, self.member_id):
            return False
        if self.expelled:
            return True
        # Never wait here: poll() must not stall behind a frozen lock holder.
        result = rebalance(self.paths, self.partitions, timeout, MembershipChange(), wait=0)
        self._adopt(result)
        return result is not None


_LEAVE_WAIT = 1.0
_JOIN_SLICE = 0.005  # a joiner waiting for the group lock looks whether it was admitted


def _no_rebalance_in_progress(paths: GroupPaths) -> bool:
    """True if the group lock is free right now (one try, no wait).

    Called after labelling newly taken partition locks: every rebalance that read those
    locks before they were labelled held the group lock from that read until its new state
    was saved, so once the lock is free the next reload sees whatever it decided, and every
    later rebalance reads our name.
    """
    with exclusive_lock(paths.lock, 0) as free:
        return free


def _stamp_of(stat: os.stat_result) -> tuple[int, int, int]:
    return (stat.st_ino, stat.st_mtime_ns, stat.st_size)
