"""The group state document: who is in the group and who should read what.

``state.json`` is only ever replaced atomically, under the group lock, and
every replacement that changes membership bumps ``generation``. Members
notice a change by a cheap ``os.stat`` of the file (a replace gives it a new
inode). ``epochs`` number each partition's ownership: when a member is
expelled while its process may still be alive, the epochs of its partitions
move on, so the lock file it still holds no longer counts and its commits are
refused (fencing).

Version 2 (checksums): the document carries a ``"crc32"`` member (``atomic_files``), and a
version-2 group has a commit file for every partition from its creation on (``{"offset":
null}`` until the first commit), so a missing commit file is damage, not "never committed".
Version-1 documents (no checksum, exactly the old keys) are still read, and upgraded by the
next membership change (which first gives every partition its commit file).

Version 3 (issue 15): the commits live in the group's commit log (``commits.log``), with an
entry for every partition from the group's creation on. The membership change that upgrades
a version-1 or -2 group first copies its per-partition commit files into the log.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from twainmq.atomic_files import FileChecksumError, read_checked_json, write_checked_json_atomically
from twainmq.groups.errors import GroupFileCorruptError
from twainmq.groups.layout import GroupPaths

STATE_VERSION = 3
_LEGACY_KEYS = frozenset(
    ("version", "topic", "group", "generation", "partitions", "members", "assignment", "epochs")
)


@dataclass(frozen=True)
class GroupState:
    """One generation of a group: members, target assignment and partition epochs."""

    generation: int
    partitions: int
    members: dict[str, dict[str, Any]] = field(default_factory=dict)
    assignment: dict[str, list[int]] = field(default_factory=dict)
    epochs: dict[int, int] = field(default_factory=dict)
    version: int = STATE_VERSION

    def epoch(self, partition: int) -> int:
        """The current ownership epoch of ``partition``."""
        return self.epochs.get(partition, 0)

    def required_commits(self) -> dict[int, int] | None:
        """Partition -> epoch of every partition that must have a commit (file or log entry;
        None for a version-1 group, which made them only on first commit)."""
        if self.version < 2:
            return None
        return {p: self.epoch(p) for p in range(self.partitions)}

    def to_json(self, paths: GroupPaths) -> dict[str, Any]:
        """The document stored in ``state.json``."""
        return {
            "version": STATE_VERSION,
            "topic": paths.topic,
            "group": paths.group,
            "generation": self.generation,
            "partitions": self.partitions,
            "members": self.members,
            "assignment": self.assignment,
            "epochs": {str(p): e for p, e in sorted(self.epochs.items())},
        }

    @classmethod
    def from_json(cls, document: dict[str, Any]) -> GroupState:
        """Parse a ``state.json`` document."""
        return cls(
            generation=int(document["generation"]),
            partitions=int(document["partitions"]),
            members=dict(document["members"]),
            assignment={m: [int(p) for p in ps] for m, ps in document["assignment"].items()},
            epochs={int(p): int(e) for p, e in document["epochs"].items()},
            version=int(document["version"]),
        )


def load_state(paths: GroupPaths) -> GroupState | None:
    """The group's current state, or None if the group was never joined.

    Raises GroupFileCorruptError naming the file if it is damaged.
    """
    try:
        document = read_checked_json(paths.state, _LEGACY_KEYS)
        if document is None:
            return None
        state = GroupState.from_json(document)
        if document.get("topic") != paths.topic or document.get("group") != paths.group:
            raise ValueError("it names another topic or group")
        return state
    except FileChecksumError as exc:
        raise GroupFileCorruptError(paths.topic, paths.group, paths.state, exc.reason) from None
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        reason = f"unreadable group state: {type(exc).__name__}: {exc}"
        raise GroupFileCorruptError(paths.topic, paths.group, paths.state, reason) from None


def save_state(paths: GroupPaths, state: GroupState) -> None:
    """Replace the group's state atomically (call with the group lock held)."""
    write_checked_json_atomically(paths.state, state.to_json(paths))
