"""Consumer groups: members of a group share a topic's partitions, coordinated through files.

No server: the group lives in ``<root>/.groups/<topic>/<group>/`` and every
member coordinates through locks and atomically replaced JSON files there; committed
offsets go to one append-only log per group (docs/design.md, "Group commits").
See docs/design.md, "Consumer groups", for the protocol and its failure cases.
"""

from twainmq.groups.admin import (
    GroupDescription,
    MemberDescription,
    describe_group,
    group_lag,
    reset_offsets,
)
from twainmq.groups.assignor import assign_partitions
from twainmq.groups.consumer import GroupConsumer, join_group
from twainmq.groups.errors import (
    CommitFencedError,
    GroupActiveError,
    GroupBusyError,
    GroupError,
    GroupFileCorruptError,
    GroupNotFoundError,
    InvalidGroupNameError,
    PartitionNotOwnedError,
)
from twainmq.groups.lag import PartitionLag
from twainmq.groups.layout import GroupPaths, list_groups
from twainmq.groups.member import GroupMember, GroupSettings
from twainmq.groups.membership import MemberStatus

__all__ = [
    "CommitFencedError",
    "GroupActiveError",
    "GroupBusyError",
    "GroupConsumer",
    "GroupDescription",
    "GroupError",
    "GroupFileCorruptError",
    "GroupMember",
    "GroupNotFoundError",
    "GroupPaths",
    "GroupSettings",
    "InvalidGroupNameError",
    "MemberDescription",
    "MemberStatus",
    "PartitionLag",
    "PartitionNotOwnedError",
    "assign_partitions",
    "describe_group",
    "group_lag",
    "join_group",
    "list_groups",
    "reset_offsets",
]
