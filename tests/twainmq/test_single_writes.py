"""Single writes (``write_message``): the per-key route cache and the inline framing.

A producer caches, per key, the key's partition and its text records' head, and frames each
record itself rather than through ``encoding.frame``; a partition writer keeps the head it
last wrote while it holds the lock. These tests check that what lands on disk is what
``encoding.frame`` builds, that the cache stays bounded and serves only keys of the topic's
own key class, and that the head a writer keeps is dropped whenever another writer could
move the real one.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

import pytest

from twainmq import Twain, default_partitioner
from twainmq import producer as producer_module
from twainmq.encoding import TAG_BYTES, TAG_DATACLASS, TAG_TEXT, frame, read_records
from twainmq.errors import InvalidKeyError, InvalidPartitionError
from twainmq.keys import int_partition, parse_key_type
from twainmq.segments import build_index, index_path, read_index, scan_valid, segment_path


@dataclass
class Reading:
    sensor: str
    value: float


def _records(directory: Path) -> list[tuple[int, int, bytes, bytes]]:
    data = segment_path(directory, 0).read_bytes()
    records, end = read_records(data, 0, len(data))
    assert end == len(data)
    return records


@pytest.mark.parametrize(
    ("key_type", "key"),
    [("u8", 255), ("u16", 54_321), ("u32", 2**32 - 1), ("u64", 2**64 - 1), ("char8", "ké")],
)
def test_every_payload_type_is_stored_as_encoding_frame_builds_it(
    tmq: Twain, tmp_path: Path, key_type: str, key: int | str
) -> None:
    tmq.register_msg_cls(Reading)
    tmq.create_topic("t", key_type, partitions=1)
    sent = ["text é", b"\x00raw", bytearray(b"buffer"), Reading("a", 1.5)]
    with tmq.producer("t") as producer:
        for message in sent:
            producer.write_message(key, message)
    directory = tmp_path / "store" / "t" / "0"
    records = _records(directory)
    key_bytes = parse_key_type(key_type).encode(key)
    assert [(tag, stored_key) for _, tag, stored_key, _ in records] == [
        (TAG_TEXT, key_bytes),
        (TAG_BYTES, key_bytes),
        (TAG_BYTES, key_bytes),
        (TAG_DATACLASS, key_bytes),
    ]
    framed = [frame(key_bytes, stamp, tag, payload) for stamp, tag, _, payload in records]
    assert segment_path(directory, 0).read_bytes() == b"".join(framed)
    with tmq.consumer("t") as consumer:
        assert [m.message for m in consumer] == ["text é", b"\x00raw", b"buffer", sent[3]]


def test_the_route_cache_is_bounded_and_routes_right_past_its_bound(
    tmq: Twain, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(producer_module, "_ROUTE_CACHE_SIZE", 16)
    tmq.create_topic("t", "u32", partitions=5)
    keys = [*range(100), *range(2**32 - 60, 2**32), *range(100)]
    with tmq.producer("t") as producer:
        landed = []
        for key in keys:
            landed.append(producer.write_message(key, str(key)).partition)
            assert len(producer._routes) <= 16
    assert landed == [default_partitioner(key, 5) for key in keys]


def test_the_inlined_partitioner_is_the_default_one() -> None:
    keys = [*range(70_000), 2**31, 2**32 - 1, 2**63, 2**64 - 1]
    for partitions in (1, 3, 4, 7, 64):
        assert [int_partition(k, partitions) for k in keys[::97] + keys[-4:]] == [
            default_partitioner(k, partitions) for k in keys[::97] + keys[-4:]
        ]


def test_a_cached_key_serves_only_keys_of_its_own_class(tmq: Twain) -> None:
    tmq.create_topic("t", "u8", partitions=3)
    with tmq.producer("t") as producer:
        producer.write_message(1, "one")
        with pytest.raises(InvalidKeyError):  # True == 1 and hashes alike
            producer.write_message(True, "not a u8 key")
        with pytest.raises(InvalidKeyError):  # so does 1.0
            producer.write_message(1.0, "not a u8 key")
        with pytest.raises(InvalidKeyError):
            producer.write_message(256, "out of range")
        with pytest.raises(InvalidKeyError):
            producer.write_message(-1, "out of range")
        with pytest.raises(InvalidKeyError):  # unhashable
            producer.write_message([1], "not a key")
        assert producer.write_message(1, "again").offset == 1


def test_a_str_subclass_key_routes_like_its_text_and_is_not_cached(tmq: Twain) -> None:
    class Name(str):
        pass

    tmq.create_topic("t", "char16", partitions=4)
    with tmq.producer("t") as producer:
        first = producer.write_message(Name("alice"), "1")
        assert "alice" not in producer._routes
        second = producer.write_message("alice", "2")
        assert "alice" in producer._routes
        third = producer.write_message(Name("alice"), "3")
    assert first.partition == second.partition == third.partition
    assert first.partition == default_partitioner("alice", 4)
    with tmq.consumer("t") as consumer:
        assert [(type(m.key), m.message) for m in consumer] == [(str, "1"), (str, "2"), (str, "3")]


def test_a_custom_partitioner_is_checked_and_asked_once_per_key(tmq: Twain) -> None:
    asked: list[int] = []

    def by_parity(key: int, partitions: int) -> int:
        asked.append(key)
        return key % 2 if key < 1000 else partitions  # a partition the topic lacks

    tmq.create_topic("t", "u16", partitions=2)
    with tmq.producer("t", partitioner=by_parity) as producer:
        assert [producer.write_message(k, "m").partition for k in (1, 2, 1, 2)] == [1, 0, 1, 0]
        assert asked == [1, 2]
        with pytest.raises(InvalidPartitionError):
            producer.write_message(1000, "m")
        assert producer.write_message(2, "m", partition=1).partition == 1  # overrides
        assert producer.write_message(2, "m").partition == 0  # and is not cached


def test_the_index_a_writer_keeps_up_matches_a_rebuilt_one(tmq: Twain, tmp_path: Path) -> None:
    # Single writes skip reading the head while the writer knows it: they must still add an
    # index entry whenever one is due, also when other writers take turns and batches mix in.
    tmq.create_topic("t", partitions=1, index_interval_bytes=64, segment_bytes=1 << 20)
    first, second = tmq.producer("t"), tmq.producer("t")
    written = 0
    for round_number in range(60):
        for producer in (first, second):
            producer.write_message(round_number, f"message {written}")
            written += 1
        if round_number % 7 == 0:
            first.write_messages([(1, "a"), (2, "b")])
            written += 2
    first.close()
    second.close()
    directory = tmp_path / "store" / "t" / "0"
    fd = os.open(segment_path(directory, 0), os.O_RDONLY)
    try:
        found = scan_valid(fd, 0)
    finally:
        os.close(fd)
    assert len(found) == written
    assert read_index(index_path(directory, 0), 0) == build_index(found, 0, 64)


def test_writes_go_on_at_the_right_place_after_rolls_and_turns(tmq: Twain) -> None:
    tmq.create_topic("t", partitions=1, segment_bytes=1024, index_interval_bytes=100)
    first, second = tmq.producer("t"), tmq.producer("t")
    offsets = []
    for number in range(300):
        producer = first if number % 5 < 3 else second
        offsets.append(producer.write_message(number % 9, f"m{number}").offset)
    first.close()
    second.close()
    assert offsets == list(range(300))
    with tmq.consumer("t") as consumer:
        assert [(m.offset, m.message) for m in consumer] == [(n, f"m{n}") for n in range(300)]
