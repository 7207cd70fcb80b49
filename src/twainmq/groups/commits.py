"""Committed offsets: per partition, the next offset the group should read (Kafka's meaning).

A group's commits live in one append-only log, ``commits.log`` (format:
``commit_log_format``; I/O: ``commit_log``; why: docs/design.md, "Group commits"). A commit
call appends one checksummed record holding every partition it commits, so it is atomic (old
or new offsets, never a mix) and its cost does not grow with the partitions a member owns.
Each entry carries the committing owner's epoch; replay ignores an entry older than the
partition's latest epoch, which is how fencing works: a member that takes a partition in a
newer epoch first appends the latest commit under its own epoch (``adoption``), so whatever
an expelled member appends later counts for nothing (and its ``commit()`` raises
CommitFencedError when it sees the new epoch in the group state, which is saved before
anyone can take the partition).

A version-3 group has an entry for every partition from its creation on ("no commit yet"
until the first commit), so a partition without one is damage, reported naming the log.
Groups made before the log (``legacy_commits``) are migrated by the next member to join.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from twainmq.groups.commit_log import CommitLog, create_log, read_log, salvage_log
from twainmq.groups.commit_log_format import NO_COMMIT, Entry, Table, offsets_of
from twainmq.groups.errors import CommitFencedError, GroupFileCorruptError
from twainmq.groups.layout import GroupPaths
from twainmq.groups.legacy_commits import (
    has_legacy_commits,
    read_legacy_table,
    remove_legacy_commits,
)

if TYPE_CHECKING:
    from twainmq.groups.state import GroupState


def read_table(paths: GroupPaths, state: GroupState | None = None) -> Table:
    """Partition -> (latest epoch, offset or NO_COMMIT) of the group (lock-free).

    ``state``: the group's state, if known; a partition it requires without an entry, or a
    version-3 group without a log, raises GroupFileCorruptError naming the log.
    """
    table = read_log(paths)
    expected = state.required_commits() if state is not None else None
    if table is None:
        if state is not None and state.version >= 3:
            raise GroupFileCorruptError(paths.topic, paths.group, paths.commit_log, "missing")
        legacy = read_legacy_table(paths, expected)
        return {p: (e, NO_COMMIT if o is None else o) for p, (e, o) in legacy.items()}
    missing = sorted(p for p in expected or {} if p not in table)
    if missing:
        reason = f"no entry for partitions {missing}"
        raise GroupFileCorruptError(paths.topic, paths.group, paths.commit_log, reason)
    return table


def read_commits(paths: GroupPaths, state: GroupState | None = None) -> dict[int, int]:
    """Every committed offset of the group (partition -> next offset to read)."""
    return offsets_of(read_table(paths, state))


def commit_epochs(paths: GroupPaths) -> dict[int, int]:
    """Partition -> the latest epoch the commits carry (for rebuilding a lost state); a
    damaged log gives what its valid records say."""
    try:
        table = read_table(paths)
    except GroupFileCorruptError:
        table = salvage_log(paths)
    return {p: epoch for p, (epoch, _) in table.items()}


def migrate_legacy_commits(paths: GroupPaths, state: GroupState | None) -> None:
    """Copy a pre-log group's per-partition commit files into a new commit log, then delete
    them (call with the group lock held). Raises GroupFileCorruptError for a damaged file."""
    if not has_legacy_commits(paths):
        return
    if read_log(paths) is None:
        expected = state.required_commits() if state is not None else None
        legacy = read_legacy_table(paths, expected)
        entries = [(p, e, NO_COMMIT if o is None else o) for p, (e, o) in sorted(legacy.items())]
        try:
            create_log(paths, entries)
        except FileExistsError:
            pass
    remove_legacy_commits(paths)


def ensure_commit_entries(paths: GroupPaths, epochs: Mapping[int, int]) -> None:
    """Give every partition in ``epochs`` (partition -> epoch) without an entry one saying
    "no commit yet" (call with the group lock held)."""
    table = read_table(paths) if paths.commit_log.exists() else {}
    missing = [(p, e, NO_COMMIT) for p, e in sorted(epochs.items()) if p not in table]
    _append_or_create(paths, missing, durable=True)


def write_commits(
    paths: GroupPaths, offsets: Mapping[int, int], durable: bool = True, missing_only: bool = False
) -> None:
    """Store ``offsets`` under each partition's latest epoch (group creation, tests); with
    ``missing_only``, only for partitions that have no entry yet."""
    table = read_table(paths) if paths.commit_log.exists() else {}
    entries = [
        (p, table.get(p, (0, 0))[0], o)
        for p, o in sorted(offsets.items())
        if not (missing_only and p in table)
    ]
    _append_or_create(paths, entries, durable)


def rewrite_commits(
    paths: GroupPaths,
    offsets: Mapping[int, int],
    partitions: int,
    epochs: Mapping[int, int],
    state: GroupState | None = None,
) -> None:
    """Replace the log with the group's commits and ``offsets`` over them (admin reset, no
    member alive, group lock held). A damaged log can only be replaced whole: then
    ``offsets`` must name every partition."""
    try:
        table = read_table(paths, state)
    except GroupFileCorruptError as exc:
        uncovered = sorted(set(range(partitions)) - set(offsets))
        if uncovered:
            reason = f"{exc.reason}; reset every partition (no --partition) to replace it"
            raise GroupFileCorruptError(paths.topic, paths.group, exc.path, reason) from None
        table = salvage_log(paths)
    for partition in range(partitions):
        epoch = max(epochs.get(partition, 0), table.get(partition, (0, 0))[0])
        offset = offsets.get(partition, table.get(partition, (0, NO_COMMIT))[1])
        table[partition] = (epoch, offset)
    create_log(paths, [(p, e, o) for p, (e, o) in sorted(table.items())], replace=True)
    remove_legacy_commits(paths)


def fenced_commit(
    paths: GroupPaths,
    offsets: Mapping[int, int],
    held_epochs: Mapping[int, int],
    current_epochs: Mapping[int, int],
) -> list[Entry]:
    """The entries of one commit call of partitions the caller owns, refusing the others.

    ``held_epochs``: the partitions whose locks the caller holds, with the lock's epoch;
    ``current_epochs``: the epochs of the group state the caller last saw. Raises
    CommitFencedError naming the partitions it does not own.
    """
    refused = [
        p for p in offsets if p not in held_epochs or held_epochs[p] != current_epochs.get(p, 0)
    ]
    if refused:
        raise CommitFencedError(paths.group, refused)
    return [(p, held_epochs[p], o) for p, o in sorted(offsets.items())]


def adoption(
    paths: GroupPaths, table: Table, epochs: Mapping[int, int], required: bool = False
) -> list[Entry]:
    """The entries that make ``epochs`` (partition -> epoch) the partitions' commit epochs,
    carrying over their latest commits (``table``: the log as read after taking them):
    appended by a member that just took them. Partitions whose latest entry is from that
    epoch already (a voluntary handover) need none. ``required``: each must have an entry (a
    version-2+ group's), else GroupFileCorruptError naming the log."""
    missing = sorted(p for p in epochs if p not in table)
    if missing and required:
        reason = f"no entry for partitions {missing}"
        raise GroupFileCorruptError(paths.topic, paths.group, paths.commit_log, reason)
    found = []
    for partition, epoch in sorted(epochs.items()):
        latest = table.get(partition)
        if latest is None or latest[0] < epoch:
            found.append((partition, epoch, NO_COMMIT if latest is None else latest[1]))
    return found


def commit_fenced(
    paths: GroupPaths,
    offsets: Mapping[int, int],
    held_epochs: Mapping[int, int],
    current_epochs: Mapping[int, int],
    durable: bool = True,
) -> None:
    """One-shot ``fenced_commit`` (members keep a CommitLog open instead); also refuses
    partitions whose log entries moved to a newer epoch than the one held."""
    entries = fenced_commit(paths, offsets, held_epochs, current_epochs)
    table = read_table(paths) if paths.commit_log.exists() else {}
    overtaken = [p for p in offsets if table.get(p, (0, 0))[0] > held_epochs[p]]
    if overtaken:
        raise CommitFencedError(paths.group, overtaken)
    _append_or_create(paths, entries, durable)


def adopt_commit(
    paths: GroupPaths, partition: int, epoch: int, durable: bool = True, required: bool = False
) -> None:
    """One-shot ``adoption`` of one partition."""
    table = read_table(paths) if paths.commit_log.exists() else {}
    _append_or_create(paths, adoption(paths, table, {partition: epoch}, required), durable)


def _append_or_create(paths: GroupPaths, entries: list[Entry], durable: bool) -> None:
    if not entries:
        return
    if not paths.commit_log.exists():
        try:
            create_log(paths, entries)
            return
        except FileExistsError:
            pass  # created meanwhile: append to it
    log = CommitLog(paths, "always" if durable else "never")
    try:
        log.append(entries)
    finally:
        log.close()
