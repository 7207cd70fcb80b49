"""Segments: rolling by size, readers following rolls, the sparse index, retention."""

from __future__ import annotations

import os
import time

from twainmq import Twain
from twainmq.segments import list_segments, read_index


def partition_dir(tmq: Twain, topic: str, partition: int = 0):  # type: ignore[no-untyped-def]
    return tmq.root_dir / topic / str(partition)


def test_segments_roll_by_size_and_are_named_by_base_offset(tmq: Twain) -> None:
    tmq.create_topic("t", segment_bytes=1024)
    producer = tmq.producer("t")
    for i in range(50):
        producer.write_message(1, f"{i:03d}".ljust(100, "."))
    bases = list_segments(partition_dir(tmq, "t"))
    assert len(bases) > 5 and bases[0] == 0
    sizes = [(partition_dir(tmq, "t") / f"{b:020d}.log").stat().st_size for b in bases]
    assert all(size <= 1024 for size in sizes)
    assert [int(m.message[:3]) for m in tmq.consumer("t")] == list(range(50))


def test_a_batch_rolls_too(tmq: Twain) -> None:
    tmq.create_topic("t", segment_bytes=1024)
    tmq.producer("t").write_messages((1, f"{i:05d}".ljust(100)) for i in range(3000))
    assert [int(m.message) for m in tmq.consumer("t")] == list(range(3000))


def test_a_reader_follows_rolls_while_writing_goes_on(tmq: Twain) -> None:
    tmq.create_topic("t", segment_bytes=2048)
    producer = tmq.producer("t")
    consumer = tmq.consumer("t")
    received = []
    for i in range(300):
        producer.write_message(1, str(i))
        if i % 7 == 0:
            received += [m.message for m in consumer.poll_many(100)]
    received += [m.message for m in consumer]
    assert received == [str(i) for i in range(300)]


def test_seek_into_an_old_segment(tmq: Twain) -> None:
    tmq.create_topic("t", segment_bytes=1024, index_interval_bytes=128)
    tmq.producer("t").write_messages((1, str(i).ljust(50)) for i in range(500))
    consumer = tmq.consumer("t")
    for target in (0, 1, 77, 250, 499, 500):
        consumer.seek(0, target)
        got = consumer.poll()
        assert (got.offset, int(got.message)) == (target, target) if got else target == 500


def test_the_index_is_sparse_and_rebuilt_when_missing(tmq: Twain) -> None:
    tmq.create_topic("t", index_interval_bytes=256)
    tmq.producer("t").write_messages((1, "x" * 100) for _ in range(100))
    index_file = partition_dir(tmq, "t") / f"{0:020d}.idx"
    entries = read_index(index_file, 0)
    assert 30 < len(entries) < 100 and entries[0][:2] == (0, 0)
    index_file.unlink()
    consumer = tmq.consumer("t")  # opening the partition rebuilds it
    assert read_index(index_file, 0) == entries
    consumer.seek(0, 93)
    assert consumer.poll().offset == 93  # type: ignore[union-attr]


def test_missing_index_of_a_sealed_segment_is_rebuilt(tmq: Twain) -> None:
    tmq.create_topic("t", segment_bytes=2048, index_interval_bytes=256)
    tmq.producer("t").write_messages((1, "x" * 100) for _ in range(100))
    assert len(list_segments(partition_dir(tmq, "t"))) > 2
    first_index = partition_dir(tmq, "t") / f"{0:020d}.idx"
    before = read_index(first_index, 0)
    first_index.unlink()
    tmq.consumer("t")  # opening the partition repairs it
    assert read_index(first_index, 0) == before


def test_retention_by_bytes_keeps_the_newest_segments(tmq: Twain) -> None:
    tmq.create_topic("t", segment_bytes=1200, retention_bytes=3000)
    producer = tmq.producer("t")
    for i in range(200):
        producer.write_message(1, str(i).ljust(100))
    directory = partition_dir(tmq, "t")
    total = sum(f.stat().st_size for f in directory.glob("*.log"))
    assert total <= 3000 + 1200
    consumer = tmq.consumer("t")
    offsets = [m.offset for m in consumer]
    assert offsets == list(range(offsets[0], 200)) and offsets[0] > 0
    assert consumer.beginning_offsets() == {0: offsets[0]}
    assert tmq.describe_topic("t").partitions[0].start_offset == offsets[0]


def test_retention_by_age(tmq: Twain) -> None:
    tmq.create_topic("t", segment_bytes=1024, retention_seconds=3600)
    producer = tmq.producer("t")
    for i in range(30):
        producer.write_message(1, str(i).ljust(100))
    directory = partition_dir(tmq, "t")
    old = time.time() - 7200
    *aged, active = list_segments(directory)
    for base in aged:
        os.utime(directory / f"{base:020d}.log", (old, old))
    producer.write_messages((1, str(i).ljust(100)) for i in range(30, 45))  # rolls: retention runs
    assert list_segments(directory)[0] == active
    first = tmq.consumer("t").poll()
    assert first is not None and first.offset == active


def test_a_reader_behind_retention_moves_to_the_oldest_kept_offset(tmq: Twain) -> None:
    tmq.create_topic("t", segment_bytes=1024, retention_bytes=2048)
    producer = tmq.producer("t")
    consumer = tmq.consumer("t")
    producer.write_message(1, "first")
    assert consumer.poll_many(1)[0].message == "first"
    for i in range(100):
        producer.write_message(1, str(i).ljust(100))
    offsets = [m.offset for m in consumer]
    # It finishes the segment it had open, then jumps to the oldest offset still kept.
    kept = consumer.beginning_offsets()[0]
    assert kept > 9 and offsets[0] == 1
    assert offsets == sorted(set(offsets)) and offsets[-1] == 100
    assert offsets[offsets.index(kept) :] == list(range(kept, 101))
