"""Consumer groups: members of a group share a topic's partitions, coordinated through files.

No server: the group lives in ``<root>/.groups/<topic>/<group>/`` and every
member coordinates through locks and atomically replaced JSON files there.
See docs/design.md, "Consumer groups", for the protocol and its failure cases.
"""

from twainmq.groups.assignor import assign_partitions
from twainmq.groups.errors import (
    CommitFencedError,
    GroupActiveError,
    GroupError,
    GroupNotFoundError,
    InvalidGroupNameError,
)
from twainmq.groups.layout import GroupPaths, list_groups
from twainmq.groups.member import GroupMember, GroupTiming

__all__ = [
    "CommitFencedError",
    "GroupActiveError",
    "GroupError",
    "GroupMember",
    "GroupNotFoundError",
    "GroupPaths",
    "GroupTiming",
    "InvalidGroupNameError",
    "assign_partitions",
    "list_groups",
]
