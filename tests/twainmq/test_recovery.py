"""Recovery on open: torn tails are cut back, damage to acknowledged data is reported."""

from __future__ import annotations

from pathlib import Path

import pytest

from twainmq import TopicCorruptError, Twain
from twainmq.encoding import TAG_TEXT, encode_record

RECORD = 18 + 2 + 9  # header + u16 key + "message-N"


def segment(tmq: Twain, base: int = 0) -> Path:
    return tmq.root_dir / "t" / "0" / f"{base:020d}.log"


def write_ten(tmq: Twain, **settings: int) -> None:
    tmq.create_topic("t", **settings)
    with tmq.producer("t") as producer:
        for i in range(10):
            producer.write_message(1, f"message-{i}")


def read_all(tmq: Twain) -> list[str]:
    return [m.message for m in tmq.consumer("t")]


@pytest.mark.parametrize("tail", [b"\x07", b"\x40\x00\x00\x00garbage", b"\x00" * 4096])
def test_a_torn_tail_is_cut_back_on_open(tmq: Twain, tail: bytes) -> None:
    write_ten(tmq)
    with open(segment(tmq), "ab") as handle:
        handle.write(tail)
    assert read_all(tmq) == [f"message-{i}" for i in range(10)]
    assert segment(tmq).stat().st_size == 10 * RECORD
    assert tmq.producer("t").write_message(1, "message-10").offset == 10
    assert read_all(tmq)[-1] == "message-10"


def test_half_a_record_is_cut_back(tmq: Twain) -> None:
    write_ten(tmq)
    record = encode_record(1, TAG_TEXT, b"\x01\x00", b"message-xx")
    with open(segment(tmq), "ab") as handle:
        handle.write(record[: len(record) // 2])
    assert len(read_all(tmq)) == 10
    assert segment(tmq).stat().st_size == 10 * RECORD


def test_a_whole_record_its_writer_never_committed_is_kept(tmq: Twain) -> None:
    # The writer was killed after its pwrite and before it moved the head: the record is
    # whole, so recovery keeps it (its write never returned, so either outcome is correct).
    write_ten(tmq)
    with open(segment(tmq), "ab") as handle:
        handle.write(encode_record(1, TAG_TEXT, b"\x01\x00", b"message-10"))
    assert read_all(tmq)[-1] == "message-10"
    assert tmq.producer("t").write_message(1, "message-11").offset == 11


def test_a_lost_head_is_rebuilt_from_the_segments(tmq: Twain) -> None:
    write_ten(tmq, segment_bytes=1024)
    (tmq.root_dir / "t" / "0" / "head").unlink()
    assert len(read_all(tmq)) == 10
    assert tmq.end_offsets("t") == {0: 10}


def test_damage_inside_acknowledged_data_names_file_and_position(tmq: Twain) -> None:
    write_ten(tmq)
    path = segment(tmq)
    data = bytearray(path.read_bytes())
    data[3 * RECORD + 25] ^= 0xFF  # inside record 3's payload
    path.write_bytes(bytes(data))
    with pytest.raises(TopicCorruptError) as info:
        read_all(tmq)
    assert info.value.path == str(path)
    assert info.value.position == 3 * RECORD
    assert f"{path}: corrupt record at byte {3 * RECORD}" in str(info.value)
    assert path.stat().st_size == 10 * RECORD  # nothing was cut


def test_damage_in_a_sealed_segment_is_reported_when_read(tmq: Twain) -> None:
    tmq.create_topic("t", segment_bytes=1024)
    tmq.producer("t").write_messages((1, f"{i:04d}".ljust(100)) for i in range(30))
    path = segment(tmq)
    data = bytearray(path.read_bytes())
    data[120 + 50] ^= 0x01  # inside the second record (records are 120 bytes)
    path.write_bytes(bytes(data))
    consumer = tmq.consumer("t", fetch_bytes=1024)
    assert consumer.poll().message.startswith("0000")  # type: ignore[union-attr]
    for _ in range(2):  # it stays at the bad record: nothing after it is returned silently
        with pytest.raises(TopicCorruptError, match=f"{path}: corrupt record at byte 120"):
            consumer.poll()
    assert consumer.position(0) == 1


def test_damage_after_the_last_index_entry_is_reported_on_read(tmq: Twain) -> None:
    write_ten(tmq, index_interval_bytes=64)
    consumer = tmq.consumer("t")
    path = segment(tmq)
    data = bytearray(path.read_bytes())
    data[8 * RECORD + 19] ^= 0x01
    path.write_bytes(bytes(data))
    assert len(consumer.poll_many(10)) == 8  # the good ones first
    with pytest.raises(TopicCorruptError, match=f"byte {8 * RECORD}"):
        consumer.poll_many(10)


def test_a_bad_partition_does_not_hide_the_others(tmq: Twain) -> None:
    tmq.create_topic("t", partitions=2)
    with tmq.producer("t") as producer:
        for i in range(5):
            producer.write_message(1, f"p0-{i}", partition=0)
            producer.write_message(1, f"p1-{i}", partition=1)
    consumer = tmq.consumer("t")  # opened first: opening would refuse the damaged partition
    path = segment(tmq)
    data = bytearray(path.read_bytes())
    data[20] ^= 0x01  # the first record of partition 0
    path.write_bytes(bytes(data))
    received: list[str] = []
    errors = 0
    for _ in range(10):
        try:
            received += [m.message for m in consumer.poll_many(10)]
        except TopicCorruptError:
            errors += 1
    assert received == [f"p1-{i}" for i in range(5)]
    assert errors >= 1 and consumer.position(0) == 0
