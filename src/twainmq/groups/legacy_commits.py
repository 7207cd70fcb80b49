"""Reading the per-partition commit files of groups made before the commit log (migration).

Before issue 15 each partition's commit lived in ``commits/<p>.<epoch>.json`` (the highest
epoch counts), checksummed since issue 10 (``{"offset": N, "crc32": "..."}``) or not before it
(``{"offset": N}``); a version-2 group has one for every partition (``{"offset": null}``: no
commit yet). Nothing writes them any more: the next member to join copies them into the
group's commit log (``commits.migrate_legacy_commits``) and deletes them. Until then, reading
a group (``describe``, ``check``) reads them here.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from twainmq.atomic_files import FileChecksumError, read_checked_json
from twainmq.groups.errors import GroupBusyError, GroupFileCorruptError
from twainmq.groups.layout import GroupPaths

_LEGACY_KEYS = frozenset(("offset",))
_READ_ATTEMPTS = 5


def has_legacy_commits(paths: GroupPaths) -> bool:
    """True if the group still has per-partition commit files."""
    return bool(legacy_files(paths))


def read_legacy_table(
    paths: GroupPaths, expected: Mapping[int, int] | None = None
) -> dict[int, tuple[int, int | None]]:
    """Partition -> (latest epoch, offset or None) from the legacy files.

    ``expected``: partition -> epoch of every partition that must have a file (a version-2
    group's); a missing one raises GroupFileCorruptError naming the file.
    """
    for _ in range(_READ_ATTEMPTS):
        latest = _latest_epochs(paths)
        for partition, epoch in sorted((expected or {}).items()):
            if partition not in latest:
                path = paths.commit(partition, epoch)
                raise GroupFileCorruptError(paths.topic, paths.group, path, "missing")
        try:
            return {p: (e, _read_offset(paths, p, e)) for p, e in latest.items()}
        except FileNotFoundError:
            continue  # replaced between listing and reading: list again
    raise GroupBusyError(paths.group)


def legacy_files(paths: GroupPaths) -> list[tuple[int, int]]:
    """(partition, epoch) of every legacy commit file."""
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


def remove_legacy_commits(paths: GroupPaths) -> None:
    """Delete the legacy files (after the commit log holding them is durable)."""
    for partition, epoch in legacy_files(paths):
        try:
            os.unlink(paths.commit(partition, epoch))
        except FileNotFoundError:
            pass
    try:
        os.rmdir(paths.commits)
    except OSError:
        pass  # stray temporary files of a killed writer, or already gone


def _latest_epochs(paths: GroupPaths) -> dict[int, int]:
    latest: dict[int, int] = {}
    for partition, epoch in legacy_files(paths):
        latest[partition] = max(epoch, latest.get(partition, epoch))
    return latest


def _read_offset(paths: GroupPaths, partition: int, epoch: int) -> int | None:
    path = paths.commit(partition, epoch)
    try:
        document = read_checked_json(path, _LEGACY_KEYS)
    except FileChecksumError as exc:
        raise GroupFileCorruptError(paths.topic, paths.group, path, exc.reason) from None
    if document is None:
        raise FileNotFoundError(path)
    offset = document.get("offset")
    if offset is not None and (type(offset) is not int or offset < 0):
        reason = f"offset {offset!r} is not a number >= 0"
        raise GroupFileCorruptError(paths.topic, paths.group, path, reason)
    return offset
