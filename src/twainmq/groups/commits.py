"""Committed offsets: per partition, the next offset the group should read (Kafka's meaning).

``commits.json`` is replaced atomically under the group lock. A member may
commit a partition only while it holds that partition's lock in the
partition's current epoch; the check and the write happen under the group
lock, so a member that was expelled can never overwrite its successor's
progress.
"""

from __future__ import annotations

from collections.abc import Mapping

from twainmq.groups.durable_json import read_json, write_json_atomic
from twainmq.groups.errors import CommitFencedError
from twainmq.groups.layout import GroupPaths
from twainmq.groups.locking import exclusive_lock
from twainmq.groups.state import load_state


def read_commits(paths: GroupPaths) -> dict[int, int]:
    """Every committed offset of the group (partition -> next offset to read)."""
    document = read_json(paths.commits)
    if document is None:
        return {}
    return {int(p): int(o) for p, o in document["offsets"].items()}


def write_commits(paths: GroupPaths, offsets: Mapping[int, int], durable: bool = True) -> None:
    """Merge ``offsets`` into the committed offsets. Call with the group lock held."""
    merged = read_commits(paths)
    merged.update(offsets)
    document = {"offsets": {str(p): o for p, o in sorted(merged.items())}}
    write_json_atomic(paths.commits, document, durable)


def commit_fenced(
    paths: GroupPaths,
    offsets: Mapping[int, int],
    held_epochs: Mapping[int, int],
    durable: bool = True,
) -> None:
    """Commit ``offsets`` if the caller really owns every partition in them.

    ``held_epochs`` are the partitions whose locks the caller holds, with the
    lock's epoch. Raises CommitFencedError naming the partitions it does not own.
    """
    if not offsets:
        return
    with exclusive_lock(paths.lock):
        state = load_state(paths)
        current = state.epochs if state is not None else {}
        refused = [
            p for p in offsets if p not in held_epochs or held_epochs[p] != current.get(p, 0)
        ]
        if refused:
            raise CommitFencedError(paths.group, refused)
        write_commits(paths, offsets, durable)
