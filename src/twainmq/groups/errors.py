"""Errors raised by consumer groups.

::

    TwainMQError
     └── GroupError
          ├── InvalidGroupNameError    a group name outside the safe character set
          ├── CommitFencedError        commit of a partition this member does not own
          ├── PartitionNotOwnedError   seek/position of a partition this member does not own
          ├── GroupActiveError         admin change refused while members are alive
          ├── GroupBusyError           the group lock stayed held (a member frozen mid-change)
          ├── GroupNotFoundError       no such group on that topic
          └── GroupFileCorruptError    state.json or commits.log damaged or missing
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from twainmq.errors import TwainMQError


class GroupError(TwainMQError):
    """Root of the consumer-group errors."""

    retriable = False


class InvalidGroupNameError(GroupError, ValueError):
    """A group (or topic) name that is empty, too long, or has unsafe characters."""

    def __init__(self, name: object) -> None:
        super().__init__(
            f"invalid group name {name!r}: use 1-200 characters from A-Z a-z 0-9 _ . -"
            " not starting with '.' or '-'"
        )
        self.name = name


class CommitFencedError(GroupError):
    """A member tried to commit partitions it does not own (any more)."""

    retriable = False

    def __init__(self, group: str, partitions: Iterable[int]) -> None:
        self.group = group
        self.partitions = sorted(partitions)
        super().__init__(
            f"group {group!r}: cannot commit partitions {self.partitions}: this member does"
            " not own them (they were reassigned or never assigned to it)"
        )


class PartitionNotOwnedError(GroupError, ValueError):
    """A group consumer was asked to seek or report a partition it does not own."""

    def __init__(self, group: str, partition: int) -> None:
        self.group = group
        self.partition = partition
        super().__init__(f"group {group!r}: partition {partition} is not owned by this consumer")


class GroupActiveError(GroupError):
    """An administrative change needs a group with no live members."""

    def __init__(self, group: str, members: Iterable[str]) -> None:
        self.group = group
        self.members = sorted(members)
        super().__init__(
            f"group {group!r} has live members {self.members}; stop them before resetting"
        )


class GroupBusyError(GroupError):
    """The group lock stayed held: a member is frozen in the middle of a membership change."""

    retriable = True

    def __init__(self, group: str) -> None:
        self.group = group
        super().__init__(
            f"group {group!r} is busy: its lock stayed held (a member stopped mid-change?);"
            " try again"
        )


class GroupNotFoundError(GroupError, LookupError):
    """No group of that name exists on that topic."""

    def __init__(self, topic: str, group: str) -> None:
        self.topic = topic
        self.group = group
        super().__init__(f"no consumer group {group!r} on topic {topic!r}")


class GroupFileCorruptError(GroupError):
    """A group's ``state.json`` or commit log (``commits.log``, or a commit file of a group
    not migrated yet) fails its checks, or one the group must have is missing. ``twainmq
    groups reset`` (with no member alive; every partition for a damaged log) rewrites them."""

    def __init__(self, topic: str, group: str, path: Path, reason: str) -> None:
        self.topic = topic
        self.group = group
        self.path = path
        self.reason = reason
        super().__init__(
            f"group {group!r} of topic {topic!r}: {path} is damaged ({reason}); where the group "
            f"resumes is unknown. Stop its members and repair it with `twainmq groups reset "
            f"{topic} {group} --to-offset N` (or --to-start, --to-end, --to-time)"
        )
