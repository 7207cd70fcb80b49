"""Committed offsets: per partition, the next offset the group should read (Kafka's meaning).

Each partition's commit lives in ``commits/<p>.<epoch>.json``, replaced
atomically, and only the file with the highest epoch counts. Only the owner
of a partition writes it, so commits need no group-wide lock: a member that
is frozen mid-commit never blocks the others. Fencing comes from the epochs:
a member that takes a partition in a newer epoch first copies the latest
commit into its own epoch's file (``adopt_commit``), so whatever an expelled
member writes later lands in an older file that nobody reads.

::

    commits/2.0.json   {"offset": 120}     written by the owner in epoch 0
    commits/2.1.json   {"offset": 120}     adopted by the owner in epoch 1: now it counts
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from twainmq.atomic_files import read_json, write_json_atomically
from twainmq.groups.errors import CommitFencedError
from twainmq.groups.layout import GroupPaths


def read_commits(paths: GroupPaths) -> dict[int, int]:
    """Every committed offset of the group (partition -> next offset to read)."""
    commits = {}
    for partition, epoch in _latest_epochs(paths).items():
        offset = _read_offset(paths, partition, epoch)
        if offset is not None:
            commits[partition] = offset
    return commits


def write_commits(paths: GroupPaths, offsets: Mapping[int, int], durable: bool = True) -> None:
    """Store ``offsets`` in each partition's latest epoch file (group creation, admin reset)."""
    latest = _latest_epochs(paths)
    for partition, offset in offsets.items():
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


def adopt_commit(paths: GroupPaths, partition: int, epoch: int, durable: bool = True) -> None:
    """Make ``epoch`` the partition's commit epoch, carrying over the latest commit.

    Called by a member that just took ``partition`` in ``epoch``; a no-op when
    the latest commit already is from that epoch (the usual, voluntary handover).
    """
    latest = _latest_epochs(paths).get(partition)
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


def _read_offset(paths: GroupPaths, partition: int, epoch: int) -> int | None:
    document = read_json(paths.commit(partition, epoch))
    if document is None or document.get("offset") is None:
        return None
    return int(document["offset"])


def _write_offset(
    paths: GroupPaths, partition: int, epoch: int, offset: int, durable: bool
) -> None:
    _write_document(paths, partition, epoch, {"offset": offset}, durable)


def _write_document(
    paths: GroupPaths, partition: int, epoch: int, document: dict[str, int | None], durable: bool
) -> None:
    paths.commits.mkdir(parents=True, exist_ok=True)
    write_json_atomically(paths.commit(partition, epoch), document, fsync=durable)


def _unlink_quietly(path: os.PathLike[str]) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
