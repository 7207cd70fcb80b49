"""Where a consumer group keeps its files inside the store's directory.

::

    <root>/.groups/<topic>/<group>/
        group.lock                 flock: serializes every change of state.json
        state.json                 generation, members, assignment, partition epochs
        commits.log                committed offsets: one checksummed record per commit call
        commits/<p>.<epoch>.json   before the commit log: one file per partition (migrated)
        members/<member>.member    flock held by the live member; its mtime is the heartbeat
        partitions/<p>.<epoch>.lock  flock held by the member that owns partition p

A group belongs to one topic, like a consumer of that topic. The directory name
starts with a dot so it can never clash with a topic directory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

from twainmq.config import check_topic_name
from twainmq.groups.errors import InvalidGroupNameError

GROUPS_DIR = ".groups"
_SAFE_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]{0,199}")


def validate_group_name(name: object) -> str:
    """Return ``name`` if it is a safe group name, else raise naming the value."""
    if not isinstance(name, str) or not _SAFE_NAME.fullmatch(name):
        raise InvalidGroupNameError(name)
    return name


@dataclass(frozen=True)
class GroupPaths:
    """The files of one consumer group of one topic."""

    root: Path
    topic: str
    group: str

    @classmethod
    def of(cls, root: str | Path, topic: str, group: str) -> GroupPaths:
        """Paths of ``group`` on ``topic`` under the store ``root`` (names validated)."""
        return cls(Path(root), check_topic_name(topic), validate_group_name(group))

    @cached_property
    def directory(self) -> Path:
        """The group's own directory."""
        return self.root / GROUPS_DIR / self.topic / self.group

    @cached_property
    def lock(self) -> Path:
        """The lock that serializes every change of ``state.json`` and offset resets.

        Ordinary commits do not take it: only a partition's owner writes its commit file.
        """
        return self.directory / "group.lock"

    @cached_property
    def state(self) -> Path:
        """The group state file (generation, members, assignment, epochs)."""
        return self.directory / "state.json"

    @cached_property
    def commit_log(self) -> Path:
        """The group's commit log (``commit_log_format``)."""
        return self.directory / "commits.log"

    @cached_property
    def commits(self) -> Path:
        """The directory of per-partition commit files of groups made before the commit log."""
        return self.directory / "commits"

    def commit(self, partition: int, epoch: int) -> Path:
        """The legacy commit file of ``partition`` written in ``epoch``."""
        return self.commits / f"{partition}.{epoch}.json"

    @cached_property
    def members(self) -> Path:
        """The directory of member files."""
        return self.directory / "members"

    def member(self, member_id: str) -> Path:
        """The file a live member holds locked."""
        return self.members / f"{member_id}.member"

    def partition_lock(self, partition: int, epoch: int) -> Path:
        """The lock file whose holder owns ``partition`` in ``epoch``."""
        return self.directory / "partitions" / f"{partition}.{epoch}.lock"

    def create(self) -> None:
        """Create the group's directories (idempotent)."""
        self.members.mkdir(parents=True, exist_ok=True)
        (self.directory / "partitions").mkdir(exist_ok=True)


def list_groups(root: str | Path) -> list[GroupPaths]:
    """Every group that has a directory under the store ``root``, sorted by topic and name."""
    base = Path(root) / GROUPS_DIR
    if not base.is_dir():
        return []
    found = [
        GroupPaths(Path(root), topic_dir.name, group_dir.name)
        for topic_dir in base.iterdir()
        if topic_dir.is_dir()
        for group_dir in topic_dir.iterdir()
        if group_dir.is_dir()
    ]
    return sorted(found, key=lambda paths: (paths.topic, paths.group))
