"""Topics: create, list, exist, delete, describe; names and the .twc config file."""

from __future__ import annotations

import inspect
import json
from pathlib import Path

import pytest

import twainmq
import twainmq.twain as twain_module
from twainmq import (
    InvalidKeyTypeError,
    InvalidTopicNameError,
    TopicConfigError,
    TopicExistsError,
    Twain,
    UnknownTopicError,
)
from twainmq.config import TopicConfig


def test_public_names_match_all() -> None:
    public = {
        name
        for name, value in vars(twainmq).items()
        if not name.startswith("_") and not inspect.ismodule(value)
    }
    assert set(twainmq.__all__) - {"__version__"} == public
    assert all(hasattr(twainmq, name) for name in twainmq.__all__)


def test_create_list_exists_delete(tmq: Twain) -> None:
    assert tmq.list_topics() == []
    tmq.create_topic("b-topic", partitions=2)
    tmq.create_topic("a.topic_1", key_type="char16")
    assert tmq.list_topics() == ["a.topic_1", "b-topic"]
    assert tmq.topic_exists("b-topic") and not tmq.topic_exists("zzz")
    tmq.delete_topic("b-topic")
    assert tmq.list_topics() == ["a.topic_1"]
    assert not (tmq.root_dir / "b-topic").exists()


def test_twain_creates_its_directory(tmp_path: Path) -> None:
    Twain(tmp_path / "a" / "b")
    assert (tmp_path / "a" / "b").is_dir()


def test_duplicate_and_unknown_topics_are_named(tmq: Twain) -> None:
    tmq.create_topic("events")
    with pytest.raises(TopicExistsError, match="'events' already exists"):
        tmq.create_topic("events")
    with pytest.raises(UnknownTopicError, match="'nope' does not exist"):
        tmq.producer("nope")
    with pytest.raises(UnknownTopicError, match="'nope'"):
        tmq.consumer("nope")
    with pytest.raises(UnknownTopicError, match="'nope'"):
        tmq.delete_topic("nope")


@pytest.mark.parametrize("name", ["", "a/b", "../escape", "..", ".hidden", "a b", "x" * 201, "é"])
def test_unsafe_topic_names_are_refused(tmq: Twain, name: str) -> None:
    with pytest.raises(InvalidTopicNameError, match="is not valid"):
        tmq.create_topic(name)
    with pytest.raises(InvalidTopicNameError):
        tmq.topic_exists(name)
    assert list(tmq.root_dir.iterdir()) == []


def test_bad_settings_are_named(tmq: Twain) -> None:
    with pytest.raises(InvalidKeyTypeError, match="'u12'"):
        tmq.create_topic("t", key_type="u12")
    with pytest.raises(TopicConfigError, match="partitions 0"):
        tmq.create_topic("t", partitions=0)
    with pytest.raises(TopicConfigError, match="segment_bytes 'big'"):
        tmq.create_topic("t", segment_bytes="big")
    with pytest.raises(TopicConfigError, match="unknown topic setting 'colour'"):
        tmq.create_topic("t", colour="red")
    assert tmq.list_topics() == []


def test_config_file_is_readable_and_versioned(tmq: Twain) -> None:
    tmq.create_topic("events", key_type="u32", partitions=3, max_message_bytes=4096)
    data = json.loads((tmq.root_dir / "events.twc").read_text())
    assert data["format_version"] == 1
    assert (data["key_type"], data["partitions"], data["max_message_bytes"]) == ("u32", 3, 4096)
    assert tmq.topic_config("events").partitions == 3


def test_unreadable_config_is_named(tmq: Twain) -> None:
    tmq.create_topic("events")
    path = tmq.root_dir / "events.twc"
    path.write_text("{not json")
    with pytest.raises(TopicConfigError, match=r"events\.twc"):
        tmq.producer("events")
    path.write_text(json.dumps({"format_version": 99, "name": "events"}))
    with pytest.raises(TopicConfigError, match="format_version 99"):
        tmq.producer("events")


def test_recreated_topic_starts_empty(tmq: Twain) -> None:
    tmq.create_topic("t")
    tmq.producer("t").write_message(1, "old")
    tmq.delete_topic("t")
    tmq.create_topic("t")
    assert tmq.consumer("t").poll() is None


def test_a_recreated_topic_does_not_inherit_its_groups_commits(tmq: Twain) -> None:
    tmq.create_topic("t", partitions=2)
    with tmq.producer("t") as producer:
        producer.write_messages([(k, f"old {k}") for k in range(6)])
    with tmq.consumer("t", group="g") as old_member:
        assert len(old_member.poll_many(10, timeout=5)) == 6
        old_member.commit()
    tmq.delete_topic("t")
    tmq.create_topic("t", partitions=2)
    with tmq.producer("t") as producer:
        producer.write_messages([(k, f"new {k}") for k in range(6)])
    with tmq.consumer("t", group="g") as member:
        assert sorted(m.message for m in member.poll_many(10, timeout=5)) == sorted(
            f"new {k}" for k in range(6)
        )


def test_describe_reports_partitions_segments_offsets_bytes(tmq: Twain) -> None:
    tmq.create_topic("t", partitions=2, segment_bytes=1024)
    with tmq.producer("t") as producer:
        for i in range(40):
            producer.write_message(0, "x" * 100, partition=i % 2)
    description = tmq.describe_topic("t")
    assert [p.end_offset for p in description.partitions] == [20, 20]
    assert description.messages == 40
    assert all(len(p.segments) > 1 for p in description.partitions)
    assert description.bytes == 40 * (18 + 2 + 100)
    assert tmq.end_offsets("t") == {0: 20, 1: 20}


def test_a_topic_used_the_moment_its_config_appears_keeps_what_was_written(
    tmq: Twain, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another process may open a topic as soon as its config exists (two bridge members
    with `create` did): the creator must not fail on, or wipe, the directory it made."""
    other = Twain(tmq.root_dir)
    publish = twain_module.write_new_config

    def publish_then_used_at_once(root: Path, config: TopicConfig) -> None:
        publish(root, config)
        with other.producer(config.name) as producer:
            producer.write_message(1, "early")

    monkeypatch.setattr(twain_module, "write_new_config", publish_then_used_at_once)
    tmq.create_topic("t")
    assert [m.message for m in tmq.consumer("t").poll_many(10, timeout=1)] == ["early"]


def test_files_left_by_a_half_finished_delete_are_not_inherited(tmq: Twain) -> None:
    tmq.create_topic("t")
    tmq.producer("t").write_message(1, "old")
    (tmq.root_dir / "t.twc").unlink()  # a delete that stopped after removing the config
    tmq.create_topic("t")
    assert tmq.consumer("t").poll_many(10, timeout=0.1) == []
