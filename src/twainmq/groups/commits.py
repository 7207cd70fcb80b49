"""Committed offsets: per partition, the next offset the group should read (Kafka's meaning).

Each partition's commit lives in ``commits/<p>.<epoch>.json``, replaced
atomically, and only the file with the highest epoch counts. Only the owner
of a partition writes it, so commits need no group-wide lock: a member that
is frozen mid-commit never blocks the others. Fencing comes from the epochs:
a member that takes a partition in a newer epoch first copies the latest
commit into its own epoch's file (``adopt_commit``), so whatever an expelled
member writes later lands in an older file that nobody reads.

::

    commits/2.0.json   {"offset": 120, "crc32": "..."}   written by the owner in epoch 0
    commits/2.1.json   {"offset": 120, "crc32": "..."}   adopted in epoch 1: now it counts

Each file carries a checksum (``atomic_files.write_checked_json_atomically``); files written
before checksums (``{"offset": N}``) are still read. A damaged file raises
GroupFileCorruptError naming the group and the file, never a moved position. A group whose
state is version 2 has a commit file for every partition (``{"offset": null}`` until the first
commit: ``ensure_commit_files``), so a missing one is reported too.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from twainmq.atomic_files import (
    FileChecksumError,
    read_checked_json,
    write_checked_json_atomically,
)
from twainmq.groups.errors import CommitFencedError, GroupBusyError, GroupFileCorruptError
from twainmq.groups.layout import GroupPaths

_LEGACY_KEYS = frozenset(("offset",))
_READ_ATTEMPTS = 5


def read_commits(paths: GroupPaths, expected: Mapping[int, int] | None = None) -> dict[int, int]:
    """Every committed offset of the group (partition -> next offset to read).

    ``expected``: partition -> epoch of every partition that must have a commit file (a
    version-2 group's); a missing one raises GroupFileCorruptError naming the file.
    """
    for _ in range(_READ_ATTEMPTS):
        latest = _latest_epochs(paths)
        for partition, epoch in sorted((expected or {}).items()):
            if partition not in latest:
                path = paths.commit(partition, epoch)
                raise GroupFileCorruptError(paths.topic, paths.group, path, "missing")
        try:
            return {
                partition: offset
                for partition, epoch in latest.items()
                if (offset := _read_offset(paths, partition, epoch, vanished=True)) is not None
            }
        except FileNotFoundError:
            continue  # a newer epoch replaced a file between listing and reading: list again
    raise GroupBusyError(paths.group)


def ensure_commit_files(paths: GroupPaths, epochs: Mapping[int, int], durable: bool = True) -> None:
    """Give every partition in ``epochs`` (partition -> epoch) without any commit file one
    saying "no commit yet". Created exclusively: a commit written meanwhile wins."""
    latest = _latest_epochs(paths)
    for partition, epoch in epochs.items():
        if partition not in latest:
            try:
                _write_document(paths, partition, epoch, {"offset": None}, durable, True)
            except FileExistsError:
                pass


def commit_epochs(paths: GroupPaths) -> dict[int, int]:
    """Partition -> the highest epoch of its commit files (for rebuilding a lost state)."""
    return _latest_epochs(paths)


def write_commits(
    paths: GroupPaths, offsets: Mapping[int, int], durable: bool = True, missing_only: bool = False
) -> None:
    """Store ``offsets`` in each partition's latest epoch file (group creation, admin reset);
    with ``missing_only``, only for partitions that have no commit file yet."""
    latest = _latest_epochs(paths)
    for partition, offset in offsets.items():
        if missing_only and partition in latest:
            continue
        _write_offset(paths, partition, latest.get(partition, 0), offset, durable)


def commit_fenced(
    paths: GroupPaths,
    offsets: Mapping[int, int],
    held_epochs: Mapping[int, int],
    current_epochs: Mapping[int, int],
    durable: bool = True,
) -> None:
    """Commit ``offsets`` of partitions the caller owns; refuse the others.

    ``held_epochs``: the partitions whose locks the caller holds, with the
    lock's epoch; ``current_epochs``: the epochs of the group state the caller
    last saw. Raises CommitFencedError naming the partitions it does not own,
    including any that turned out to have moved to a newer epoch meanwhile.
    """
    refused = [
        p for p in offsets if p not in held_epochs or held_epochs[p] != current_epochs.get(p, 0)
    ]
    if refused:
        raise CommitFencedError(paths.group, refused)
    for partition, offset in offsets.items():
        _write_offset(paths, partition, held_epochs[partition], offset, durable)
    latest = _latest_epochs(paths)
    overtaken = [p for p in offsets if latest.get(p, 0) > held_epochs[p]]
    if overtaken:
        raise CommitFencedError(paths.group, overtaken)


def adopt_commit(
    paths: GroupPaths, partition: int, epoch: int, durable: bool = True, required: bool = False
) -> None:
    """Make ``epoch`` the partition's commit epoch, carrying over the latest commit.

    Called by a member that just took ``partition`` in ``epoch``; a no-op when
    the latest commit already is from that epoch (the usual, voluntary handover).
    ``required``: the partition must have a commit file (a version-2 group's): a missing
    one raises GroupFileCorruptError instead of being started afresh.
    """
    latest = _latest_epochs(paths).get(partition)
    if latest is None and required:
        path = paths.commit(partition, epoch)
        raise GroupFileCorruptError(paths.topic, paths.group, path, "missing")
    if latest is not None and latest >= epoch:
        return
    offset = None if latest is None else _read_offset(paths, partition, latest)
    _write_document(paths, partition, epoch, {"offset": offset}, durable)
    for older in _epochs_of(paths, partition):
        if older < epoch:
            _unlink_quietly(paths.commit(partition, older))


def _latest_epochs(paths: GroupPaths) -> dict[int, int]:
    latest: dict[int, int] = {}
    for partition, epoch in _commit_files(paths):
        latest[partition] = max(epoch, latest.get(partition, epoch))
    return latest


def _epochs_of(paths: GroupPaths, partition: int) -> list[int]:
    return [e for p, e in _commit_files(paths) if p == partition]


def _commit_files(paths: GroupPaths) -> list[tuple[int, int]]:
    try:
        names = os.listdir(paths.commits)
    except FileNotFoundError:
        return []
    found = []
    for name in names:
        parts = name.split(".")
        if len(parts) == 3 and parts[2] == "json" and parts[0].isdigit() and parts[1].isdigit():
            found.append((int(parts[0]), int(parts[1])))
    return found


def _read_offset(
    paths: GroupPaths, partition: int, epoch: int, vanished: bool = False
) -> int | None:
    """The offset in one commit file (None: no commit yet, or no file). ``vanished``: raise
    FileNotFoundError for a missing file (it was listed a moment ago)."""
    path = paths.commit(partition, epoch)
    try:
        document = read_checked_json(path, _LEGACY_KEYS)
    except FileChecksumError as exc:
        raise GroupFileCorruptError(paths.topic, paths.group, path, exc.reason) from None
    if document is None:
        if vanished:
            raise FileNotFoundError(path)
        return None
    offset = document.get("offset")
    if offset is not None and (type(offset) is not int or offset < 0):
        reason = f"offset {offset!r} is not a number >= 0"
        raise GroupFileCorruptError(paths.topic, paths.group, path, reason)
    return offset


def _write_offset(
    paths: GroupPaths, partition: int, epoch: int, offset: int, durable: bool
) -> None:
    _write_document(paths, partition, epoch, {"offset": offset}, durable)


def _write_document(
    paths: GroupPaths,
    partition: int,
    epoch: int,
    document: dict[str, int | None],
    durable: bool,
    exclusive: bool = False,
) -> None:
    paths.commits.mkdir(parents=True, exist_ok=True)
    path = paths.commit(partition, epoch)
    write_checked_json_atomically(path, dict(document), fsync=durable, exclusive=exclusive)


def _unlink_quietly(path: os.PathLike[str]) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
