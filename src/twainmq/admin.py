"""Looking at a store from outside, and the few writes an operator makes: twainmq's admin door.

The second public module of twainmq, beside the package root (docs/reference/twainmq.md).
Tools that watch or manage a store without producing to it or consuming from it — an
operator console, a metrics collector, a bridge endpoint that keeps its own commit
bookkeeping — use these names; the modules behind them stay private and may change.

Topics
    `describe_topic_files`: a topic's partitions and segments from its files, without the
    check of its config against its data files that ``Twain.describe_topic`` makes.
Groups
    `list_groups`, `GroupPaths` (one group of one topic), `describe_group` (members,
    commits, lag), `GroupDescription`, `MemberStatus`, `read_commits` (the committed
    offsets alone), `reset_offsets` (an inactive group's only), `InvalidGroupNameError`.
    `GroupConsumer` is what ``Twain.consumer(group=...)`` returns; its ``commit()`` raises
    `CommitFencedError` once the group moved on without it.
Messages
    `UndecodedMessage`: what a consumer returns for a dataclass message it could not rebuild.

Nothing here takes a group's lock or joins a group, but `reset_offsets`.
"""

from __future__ import annotations

from pathlib import Path

from twainmq.config import read_config
from twainmq.describe import TopicDescription, describe_topic
from twainmq.groups import (
    CommitFencedError,
    GroupConsumer,
    GroupDescription,
    GroupPaths,
    InvalidGroupNameError,
    MemberStatus,
    describe_group,
    list_groups,
    reset_offsets,
)
from twainmq.groups.commits import read_commits
from twainmq.message import UndecodedMessage

__all__ = [
    "CommitFencedError",
    "GroupConsumer",
    "GroupDescription",
    "GroupPaths",
    "InvalidGroupNameError",
    "MemberStatus",
    "UndecodedMessage",
    "describe_group",
    "describe_topic_files",
    "list_groups",
    "read_commits",
    "reset_offsets",
]


def describe_topic_files(root: str | Path, topic: str) -> TopicDescription:
    """`topic` of the store at `root`, described from its files (partition heads and file
    names, as ``Twain.describe_topic``), its config read without the check against the
    topic's data files: about half the time of ``Twain.describe_topic`` with 16 partitions,
    which an overview of many topics feels. Raises what reading the config raises
    (``UnknownTopicError``, ``TopicConfigError``...)."""
    store = Path(root)
    return describe_topic(store, read_config(store, topic, check_data=False))
