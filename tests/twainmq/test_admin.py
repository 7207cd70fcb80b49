"""`twainmq.admin`, the public door for tools that look at a store from outside."""

from __future__ import annotations

from dataclasses import replace

import pytest

import twainmq.admin
from twainmq import Twain, UnknownTopicError
from twainmq.config import config_bytes
from twainmq.errors import TopicConfigMismatchError

ADMIN = {
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
}


def test_all_lists_exactly_the_admin_names_and_each_has_a_docstring() -> None:
    assert set(twainmq.admin.__all__) == ADMIN
    for name in ADMIN:
        assert getattr(twainmq.admin, name).__doc__, name


def test_describe_topic_files_reads_what_describe_topic_reads(tmq: Twain) -> None:
    tmq.create_topic("orders", partitions=2)
    with tmq.producer("orders") as producer:
        for n in range(5):
            producer.write_message(n, f"m{n}", partition=n % 2)
    assert twainmq.admin.describe_topic_files(tmq.root_dir, "orders") == tmq.describe_topic(
        "orders"
    )


def test_describe_topic_files_skips_the_check_of_the_config_against_the_data(
    tmq: Twain,
) -> None:
    config = tmq.create_topic("t", partitions=4)
    with tmq.producer("t") as producer:
        producer.write_message(1, "m", partition=3)
    (tmq.root_dir / "t.twc").write_bytes(config_bytes(replace(config, partitions=2)))
    with pytest.raises(TopicConfigMismatchError):
        tmq.describe_topic("t")
    described = twainmq.admin.describe_topic_files(tmq.root_dir, "t")
    assert [p.partition for p in described.partitions] == [0, 1]


def test_describe_topic_files_names_an_unknown_topic(tmq: Twain) -> None:
    with pytest.raises(UnknownTopicError):
        twainmq.admin.describe_topic_files(tmq.root_dir, "nope")
