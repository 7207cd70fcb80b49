"""The group state document: who is in the group and who should read what.

``state.json`` is only ever replaced atomically, under the group lock, and
every replacement that changes membership bumps ``generation``. Members
notice a change by a cheap ``os.stat`` of the file (a replace gives it a new
inode). ``epochs`` number each partition's ownership: when a member is
expelled while its process may still be alive, the epochs of its partitions
move on, so the lock file it still holds no longer counts and its commits are
refused (fencing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from twainmq.atomic_files import read_json, write_json_atomically
from twainmq.groups.layout import GroupPaths

STATE_VERSION = 1


@dataclass(frozen=True)
class GroupState:
    """One generation of a group: members, target assignment and partition epochs."""

    generation: int
    partitions: int
    members: dict[str, dict[str, Any]] = field(default_factory=dict)
    assignment: dict[str, list[int]] = field(default_factory=dict)
    epochs: dict[int, int] = field(default_factory=dict)

    def epoch(self, partition: int) -> int:
        """The current ownership epoch of ``partition``."""
        return self.epochs.get(partition, 0)

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
        )


def load_state(paths: GroupPaths) -> GroupState | None:
    """The group's current state, or None if the group was never joined."""
    document = read_json(paths.state)
    return None if document is None else GroupState.from_json(document)


def save_state(paths: GroupPaths, state: GroupState) -> None:
    """Replace the group's state atomically (call with the group lock held)."""
    write_json_atomically(paths.state, state.to_json(paths))
