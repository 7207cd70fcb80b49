"""The topic config is verified on open: its checksum, its name, and its partition count and
key type against the topic's data (issue 10). Configs written before checksums still open."""

from __future__ import annotations

import json
import random
import shutil
from dataclasses import asdict, replace
from pathlib import Path

import pytest

from twainmq import Twain
from twainmq.config import TopicConfig, config_bytes
from twainmq.errors import (
    TopicConfigCorruptError,
    TopicConfigError,
    TopicConfigMismatchError,
)


def legacy_bytes(config: TopicConfig) -> bytes:
    """A config file exactly as twainmq wrote it before checksums."""
    return (json.dumps({"format_version": 1, **asdict(config)}, indent=2) + "\n").encode()


def write_some(tmq: Twain, topic: str, keys: list[object]) -> None:
    """Write one message per key, spread over every partition in turn."""
    partitions = tmq.topic_config(topic).partitions
    with tmq.producer(topic) as producer:
        for i, key in enumerate(keys):
            producer.write_message(key, f"m{key}", partition=i % partitions)


def test_a_new_config_ends_with_its_checksum(tmq: Twain) -> None:
    tmq.create_topic("events", key_type="u32", partitions=3)
    text = (tmq.root_dir / "events.twc").read_text()
    assert text.splitlines()[-2].startswith('  "crc32": "') and text.endswith('"\n}\n')
    data = json.loads(text)
    assert (data["format_version"], data["partitions"]) == (1, 3)
    assert tmq.topic_config("events").partitions == 3


def test_a_copied_config_is_refused_naming_the_file_and_both_topics(tmq: Twain) -> None:
    tmq.create_topic("orders", partitions=2)
    write_some(tmq, "orders", [1, 2, 3])
    shutil.copyfile(tmq.root_dir / "orders.twc", tmq.root_dir / "t.twc")
    for open_it in (tmq.producer, tmq.consumer, tmq.topic_config, tmq.describe_topic):
        with pytest.raises(TopicConfigMismatchError) as caught:
            open_it("t")
        message = str(caught.value)
        assert str(tmq.root_dir / "t.twc") in message
        assert "'orders'" in message and "'t'" in message
    assert tmq.describe_topic("orders").messages == 3  # the original is untouched


@pytest.mark.parametrize("form", ["legacy", "checksummed"])
def test_fewer_partitions_than_the_data_is_refused_with_a_migration_hint(
    tmq: Twain, form: str
) -> None:
    config = tmq.create_topic("t", partitions=4)
    write_some(tmq, "t", list(range(8)))
    edited = replace(config, partitions=2)
    path = tmq.root_dir / "t.twc"
    path.write_bytes(legacy_bytes(edited) if form == "legacy" else config_bytes(edited))
    with pytest.raises(TopicConfigMismatchError) as caught:
        tmq.producer("t")
    message = str(caught.value)
    assert str(path) in message and "partitions=2" in message and "partition 3" in message
    assert (
        "create a new topic" in message and "twainmq consume OLD | twainmq produce NEW" in message
    )


def test_a_hand_edited_checksummed_config_is_refused_with_the_migration_hint(tmq: Twain) -> None:
    tmq.create_topic("t", partitions=4)
    path = tmq.root_dir / "t.twc"
    path.write_text(path.read_text().replace('"partitions": 4', '"partitions": 8'))
    with pytest.raises(TopicConfigCorruptError) as caught:
        tmq.consumer("t")
    message = str(caught.value)
    assert str(path) in message and "checksum mismatch" in message and "edited by hand" in message
    assert "twainmq consume OLD | twainmq produce NEW" in message


@pytest.mark.parametrize(
    ("key_type", "keys", "edited_to"),
    [("u16", [1, 2], "u32"), ("u64", [7], "u8"), ("char8", ["abcdefgh", "xy"], "char4")],
)
def test_a_changed_key_type_is_refused_when_the_data_shows_it(
    tmq: Twain, key_type: str, keys: list[object], edited_to: str
) -> None:
    config = tmq.create_topic("t", key_type=key_type, partitions=1)
    write_some(tmq, "t", keys)
    (tmq.root_dir / "t.twc").write_bytes(config_bytes(replace(config, key_type=edited_to)))
    with pytest.raises(TopicConfigMismatchError, match=f"key_type={edited_to}.*create a new topic"):
        tmq.producer("t")


def test_unchanged_settings_and_more_room_still_open(tmq: Twain) -> None:
    config = tmq.create_topic("t", key_type="char8", partitions=2)
    write_some(tmq, "t", ["ab"])
    # A wider charN keeps every stored key readable: not refused.
    (tmq.root_dir / "t.twc").write_bytes(config_bytes(replace(config, key_type="char16")))
    assert tmq.topic_config("t").key_type == "char16"


def test_an_old_format_config_still_opens(tmq: Twain) -> None:
    config = TopicConfig("old", key_type="u32", partitions=2, message_types=["Order"])
    (tmq.root_dir / "old.twc").write_bytes(legacy_bytes(config))
    assert tmq.list_topics() == ["old"]
    assert tmq.topic_config("old") == config
    write_some(tmq, "old", [1, 2, 3])
    with tmq.consumer("old") as consumer:
        assert sorted(m.message for m in consumer.poll_many(10)) == ["m1", "m2", "m3"]
    assert (tmq.root_dir / "old.twc").read_bytes() == legacy_bytes(config)  # not rewritten


@pytest.mark.parametrize(
    "text",
    [
        '{"format_version": 1, "name": "t", "retention_seconds": NaN}',
        '{"format_version": 1, "name": "t", "partitions": true}',
        '{"format_version": 1, "name": "t", "key_type": "u17"}',
        '{"format_version": 1, "name": "../t"}',
        '{"format_version": 1, "name": "t", "crc32": "00000000"}',
        "[" * 100_000 + "]" * 100_000,
        "",
        "\xff\xfe",
    ],
)
def test_bad_old_format_configs_raise_our_error_naming_the_file(tmq: Twain, text: str) -> None:
    path = tmq.root_dir / "t.twc"
    path.write_bytes(text.encode("latin-1"))
    with pytest.raises(TopicConfigError, match=str(path).replace(".", r"\.")):
        tmq.topic_config("t")


def _outcome(tmq: Twain, path: Path, expected: TopicConfig) -> str:
    try:
        config = tmq.topic_config("t")
    except TopicConfigError as exc:
        assert str(path) in str(exc), exc
        return "detected"
    assert config == expected, "damage gave changed settings"
    return "read correctly"


def test_every_damage_to_a_config_is_detected(tmq: Twain) -> None:
    """Every bit flip, every cut, garbage appended and random bytes at every position of a
    small config: each is our error naming the file (never wrong settings, never a raw
    exception). With the checksum, none is even read as the original."""
    expected = tmq.create_topic("t", key_type="char4", partitions=2, retention_seconds=60)
    write_some(tmq, "t", ["k"])
    path = tmq.root_dir / "t.twc"
    good = path.read_bytes()
    assert len(good) < 400
    rng = random.Random(10)
    damaged: list[bytes] = []
    for position in range(len(good)):
        for bit in range(8):
            flipped = bytearray(good)
            flipped[position] ^= 1 << bit
            damaged.append(bytes(flipped))
        other = bytearray(good)
        other[position] = rng.choice([b for b in range(256) if b != good[position]])
        damaged.append(bytes(other))
        damaged.append(good[:position])  # cut
        damaged.append(good[:position] + good[position + 1 :])  # one byte lost
    damaged += [
        good + b"\n",
        good + b" ",
        good + b"{}",
        good + bytes(rng.randrange(256) for _ in range(64)),
    ]
    counts = {"read correctly": 0, "detected": 0}
    for data in damaged:
        path.write_bytes(data)
        counts[_outcome(tmq, path, expected)] += 1
    assert counts == {"read correctly": 0, "detected": len(damaged)}
    path.write_bytes(good)
    assert tmq.topic_config("t") == expected
