"""The group consumer: an engine consumer whose partitions the group decides.

It composes two parts: a ``GroupMember`` (membership, ownership, commits)
and the engine's consumer (reading), whose assignment it replaces whenever
ownership changes. ``poll()`` costs one clock read more than the engine's
own poll; real group work happens at most every few milliseconds.
"""

from __future__ import annotations

import time
import warnings
import weakref
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime
from functools import partial
from typing import Any, Protocol

from twainmq.consumer import Consumer, check_count, check_timeout
from twainmq.errors import ClosedError, InvalidOptionError
from twainmq.groups.commit_log import FSYNC_MODES
from twainmq.groups.commits import write_commits
from twainmq.groups.errors import CommitFencedError, PartitionNotOwnedError
from twainmq.groups.lag import PartitionLag, partition_lags
from twainmq.groups.layout import GroupPaths
from twainmq.groups.member import GroupMember, GroupSettings
from twainmq.topic import OpenTopic

PartitionsCallback = Callable[[list[int]], None]
START_FROM = ("start", "now")
_WAIT_SLICE = 0.01  # a waiting poll still notices the group at least this often
_monotonic = time.monotonic


class EngineConsumer(Protocol):
    """What the group consumer needs from the engine's consumer."""

    def assign(self, positions: Mapping[int, int]) -> None: ...
    def position(self, partition: int) -> int: ...
    def positions(self) -> dict[int, int]: ...
    def position_mark(self) -> tuple[int, int]: ...
    def positions_since(self, mark: tuple[int, int]) -> dict[int, int] | None: ...
    def seek(self, partition: int, offset: int) -> None: ...
    def end_offsets(self) -> dict[int, int]: ...
    def beginning_offsets(self) -> dict[int, int]: ...
    def seek_to_timestamp(self, when: datetime | float) -> dict[int, int]: ...
    def poll(self, timeout: float | None = None) -> Any: ...
    def poll_many(self, n: int = 10, timeout: float | None = None) -> list[Any]: ...
    def close(self) -> None: ...


class GroupConsumer:
    """A consumer that shares a topic's partitions with the other members of its group.

    Joining happens in the constructor; ``close()`` (or leaving the ``with``
    block) leaves at once so the others take over without waiting. Each
    ``poll()`` reads only partitions this member owns. ``on_revoke`` is
    called before partitions are given up (commit there to hand over exact
    progress) and ``on_assign`` after new ones are taken.
    """

    def __init__(
        self,
        engine: EngineConsumer,
        paths: GroupPaths,
        partitions: int,
        start_from: str = "start",
        on_assign: PartitionsCallback | None = None,
        on_revoke: PartitionsCallback | None = None,
        settings: GroupSettings | None = None,
    ) -> None:
        if start_from not in START_FROM:
            raise InvalidOptionError(f'start_from must be "start" or "now", not {start_from!r}')
        self._engine = engine
        self._engine_poll = engine.poll
        self._start_from = start_from
        self._on_assign = on_assign
        self._on_revoke = on_revoke
        self._committed_by_me: dict[int, int] = {}
        self._mark: Any = None  # the engine's position_mark() at the last full commit()
        self._closed = self._closing = False
        self._paths = paths
        self._assign_engine({})
        on_create = partial(_initialize_commits, paths, engine, start_from)
        self._member = GroupMember(paths, partitions, settings, on_create)
        # Collected without close(): free the membership and partition locks (the others
        # then see this member dead and take over) and the engine's files, with a warning.
        # The finalizer holds the member and the engine, never this object.
        self._finalizer = weakref.finalize(self, _abandon, self._member, engine)
        self._finalizer.atexit = False
        try:
            self._update_ownership()
        except BaseException:  # e.g. a damaged commit file: do not stay a member
            self._finalizer.detach()
            self._member.abandon()
            raise

    @property
    def group(self) -> str:
        """The group's name."""
        return self._member.paths.group

    @property
    def member_id(self) -> str:
        """This member's id in the group (changes if it is expelled and rejoins)."""
        return self._member.member_id

    @property
    def generation(self) -> int:
        """The group generation this consumer last saw."""
        return self._member.generation

    def assignment(self) -> list[int]:
        """The partitions this consumer owns and reads, sorted."""
        return sorted(self._member.owned())

    def poll(self, timeout: float | None = None) -> Any:
        """The next message from an owned partition, or None (waits up to ``timeout`` s)."""
        if not timeout and _monotonic() < self._member.next_check:
            return self._engine_poll()  # the hot path: no group work due yet
        if timeout is not None:
            check_timeout(timeout)
        self._notice_group()
        message = self._engine_poll()
        if message is not None or not timeout:
            return message
        deadline = _monotonic() + timeout
        while (remaining := deadline - _monotonic()) > 0:
            self._notice_group()
            message = self._engine_poll(min(remaining, _WAIT_SLICE))
            if message is not None:
                return message
        return None

    def poll_many(self, n: int = 10, timeout: float | None = None) -> list[Any]:
        """Up to ``n`` messages from owned partitions; waits up to ``timeout`` s for the first."""
        check_count(n)
        first = self.poll(timeout)
        if first is None:
            return []
        return [first, *self._engine.poll_many(n - 1)] if n > 1 else [first]

    def __iter__(self) -> Iterator[Any]:
        """Yield messages from owned partitions until none is waiting."""
        while (message := self.poll()) is not None:
            yield message

    def commit(self, offsets: Mapping[int, int] | None = None) -> None:
        """Record progress: by default the position of every owned partition.

        ``offsets`` maps partition -> next offset to read. Raises
        CommitFencedError if any of them is not owned by this member.
        """
        if self._closed:
            raise ClosedError(f"group consumer of group {self.group!r} is closed")
        owned = self._member.owned()
        mark = None
        if offsets is None:
            offsets, mark = self._owned_positions(owned)
        else:
            self._mark = None  # some partitions may now differ from what was committed
        mine = self._committed_by_me
        changed = {p: o for p, o in offsets.items() if mine.get(p) != o}
        if changed:
            stale = [p for p in changed if p not in owned]
            if stale:
                raise CommitFencedError(self.group, stale)
            self._member.commit(changed)
            mine.update(changed)
        if mark is not None:
            self._mark = mark

    def _owned_positions(self, owned: Mapping[int, int]) -> tuple[dict[int, int], Any]:
        """Positions of the owned partitions that may differ from the last commit(), and a
        mark for the next call: after a commit() of every owned partition, only partitions
        read since can have moved (cheap to find: committing per message stays cheap with
        hundreds of partitions)."""
        mark = self._engine.position_mark()
        moved = None if self._mark is None else self._engine.positions_since(self._mark)
        if moved is None:
            moved = self._engine.positions()
        return {p: o for p, o in moved.items() if p in owned}, mark

    def committed(self) -> dict[int, int]:
        """The group's committed offsets for every partition that has one."""
        return self._member.committed()

    def position(self, partition: int) -> int:
        """The next offset this consumer reads from an owned ``partition``."""
        self._require_owned(partition)
        return self._engine.position(partition)

    def seek(self, partition: int, offset: int) -> None:
        """Read an owned ``partition`` from ``offset`` next."""
        self._require_owned(partition)
        self._engine.seek(partition, offset)

    def seek_to_timestamp(self, when: datetime | float) -> dict[int, int]:
        """Seek every owned partition to its first message at or after ``when``."""
        return self._engine.seek_to_timestamp(when)

    def end_offsets(self) -> dict[int, int]:
        """The end offset (offset of the next message written) of every partition."""
        return self._engine.end_offsets()

    def beginning_offsets(self) -> dict[int, int]:
        """The oldest offset still kept, of every partition."""
        return self._engine.beginning_offsets()

    def lag(self) -> dict[int, PartitionLag]:
        """End offset, committed offset, position and lag of each owned partition."""
        owned = self._member.owned()
        ends = {p: e for p, e in self.end_offsets().items() if p in owned}
        positions = {p: self._engine.position(p) for p in owned}
        return partition_lags(ends, self.committed(), positions)

    def close(self) -> None:
        """Give up every partition (``on_revoke`` first) and leave the group at once."""
        if self._closed or self._closing:
            return
        self._closing = True  # on_revoke may still commit while we close
        try:
            self._revoke(sorted(self._member.owned()))
        finally:
            self._closed = True
            self._finalizer.detach()
            self._member.leave()
            self._engine.close()

    def __enter__(self) -> GroupConsumer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<GroupConsumer group={self.group!r} member={self.member_id!r}"
            f" generation={self.generation} partitions={self.assignment()}>"
        )

    def _notice_group(self) -> None:
        if self._closed:
            raise ClosedError(f"group consumer of group {self.group!r} is closed")
        if self._member.refresh():
            self._update_ownership()
            while self._member.reload():  # the group moved on meanwhile (callbacks can be slow)
                self._update_ownership()

    def _update_ownership(self) -> None:
        self._revoke(self._member.revocations())
        taken = self._member.acquire_pending()
        if taken:
            self._assign_engine({**self._current_positions(), **self._start_positions(taken)})
            if self._on_assign is not None:
                self._on_assign(sorted(taken))

    def _revoke(self, partitions: list[int]) -> None:
        if not partitions:
            return
        try:
            if self._on_revoke is not None:
                self._on_revoke(partitions)
        finally:
            kept = {p: o for p, o in self._current_positions().items() if p not in partitions}
            self._member.release(partitions)
            for p in partitions:
                self._committed_by_me.pop(p, None)
            self._assign_engine(kept)

    def _assign_engine(self, positions: Mapping[int, int]) -> None:
        self._engine.assign(positions)
        self._reading = set(positions)

    def _current_positions(self) -> dict[int, int]:
        """Positions of the partitions the engine reads now."""
        return {p: self._engine.position(p) for p in self._reading}

    def _start_positions(self, partitions: list[int]) -> dict[int, int]:
        """Where to read newly taken partitions: the committed offset, else ``start_from``."""
        committed = self._member.committed()
        ends = self._engine.end_offsets() if self._start_from == "now" else {}
        return {p: committed.get(p, ends.get(p, 0)) for p in partitions}

    def _require_owned(self, partition: int) -> None:
        if partition not in self._member.owned():
            raise PartitionNotOwnedError(self.group, partition)


def _initialize_commits(paths: GroupPaths, engine: EngineConsumer, start_from: str) -> None:
    # A group created with start_from="now" pins "now" to its creation: a
    # partition that changes hands before its first commit resumes there,
    # so messages written in between are not skipped. Partitions that have
    # commits already (a group whose state.json was lost) keep them.
    if start_from == "now":
        write_commits(paths, engine.end_offsets(), missing_only=True)


def _abandon(member: GroupMember, engine: EngineConsumer) -> None:
    member.abandon()
    engine.close()
    warnings.warn(
        f"unclosed group consumer of group {member.paths.group!r}: its locks and files were "
        "released by the garbage collector; call close() or use it as a context manager",
        ResourceWarning,
        stacklevel=2,
    )


def join_group(
    topic: OpenTopic,
    group: str,
    start_from: str = "start",
    *,
    on_assign: PartitionsCallback | None = None,
    on_revoke: PartitionsCallback | None = None,
    session_timeout: float = 10.0,
    commit_fsync: str | None = None,
    durable_commits: bool | None = None,
    **engine_options: Any,
) -> GroupConsumer:
    """Join ``group`` on an opened topic: what ``Twain.consumer(topic, group=...)`` returns.

    ``session_timeout``: seconds without a poll after which a member counts as
    hung and is expelled. ``commit_fsync``: ``"never"`` (default: a returned commit
    survives a crash of the process, not a power cut), ``"always"`` (on disk when
    ``commit()`` returns) or ``"batch"`` (synced within 10 ms), as producers' ``fsync``.
    ``durable_commits`` (before ``commit_fsync``): True is ``"always"``, False ``"never"``.
    ``engine_options`` go to the engine's Consumer.
    """
    root = topic.directory.parent
    paths = GroupPaths.of(root, topic.name, group)
    if start_from not in START_FROM:
        raise InvalidOptionError(f'start_from must be "start" or "now", not {start_from!r}')
    engine = Consumer(topic, None, **engine_options)  # the group decides what it reads
    settings = GroupSettings(
        session_timeout=_positive("session_timeout", session_timeout),
        commit_fsync=_commit_fsync(commit_fsync, durable_commits),
    )
    try:
        return GroupConsumer(
            engine, paths, topic.partitions, start_from, on_assign, on_revoke, settings
        )
    except BaseException:
        engine.close()
        raise


def _commit_fsync(commit_fsync: object, durable_commits: object) -> str:
    if commit_fsync is not None and durable_commits is not None:
        raise InvalidOptionError("give commit_fsync or durable_commits, not both")
    if durable_commits is not None:
        return "always" if durable_commits else "never"
    if commit_fsync is None:
        return "never"
    if commit_fsync not in FSYNC_MODES:
        modes = ", ".join(FSYNC_MODES)
        raise InvalidOptionError(f"commit_fsync {commit_fsync!r} must be one of {modes}")
    return str(commit_fsync)


def _positive(name: str, value: object) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise InvalidOptionError(f"{name} {value!r} must be a number of seconds > 0")
    return float(value)
