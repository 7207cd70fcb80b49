"""Producers and consumers without a group: offsets, fairness, waiting, seeks, positions."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass
from datetime import datetime, timezone

import pytest

from twainmq import (
    ClosedError,
    InvalidKeyError,
    InvalidOptionError,
    InvalidPartitionError,
    Message,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    PartitionLockedError,
    RecordMetadata,
    Twain,
    multi_poll,
)


def test_write_message_returns_partition_and_contiguous_offsets(tmq: Twain) -> None:
    tmq.create_topic("t", partitions=3)
    producer = tmq.producer("t")
    landed = [producer.write_message(k, f"m{k}") for k in range(30)]
    assert all(isinstance(r, RecordMetadata) for r in landed)
    for partition in range(3):
        offsets = [r.offset for r in landed if r.partition == partition]
        assert offsets == list(range(len(offsets)))
    assert {r.partition for r in landed} == {0, 1, 2}


def test_messages_come_back_with_their_metadata(tmq: Twain) -> None:
    tmq.create_topic("t", key_type="char8")
    before = datetime.now(timezone.utc)
    tmq.producer("t").write_message("user-1", "hello")
    message = tmq.consumer("t").poll()
    assert isinstance(message, Message)
    assert (message.partition, message.offset, message.key, message.message) == (
        0,
        0,
        "user-1",
        "hello",
    )
    assert before.replace(microsecond=0) <= message.timestamp <= datetime.now(timezone.utc)
    text = repr(message)
    assert text.startswith("Message(partition=0, offset=0, key='user-1', timestamp=20")
    assert text.endswith("message='hello')")


def test_poll_returns_none_at_once_when_empty(tmq: Twain) -> None:
    tmq.create_topic("t")
    consumer = tmq.consumer("t")
    started = time.monotonic()
    assert consumer.poll() is None
    assert consumer.poll_many(10) == []
    assert time.monotonic() - started < 5  # generous: only proves it does not wait forever


def test_poll_with_timeout_waits_for_a_later_write(tmq: Twain) -> None:
    tmq.create_topic("t")
    consumer = tmq.consumer("t")
    writer = threading.Timer(0.2, lambda: tmq.producer("t").write_message(1, "late"))
    writer.start()
    message = consumer.poll(timeout=30)
    writer.join()
    assert message is not None and message.message == "late"
    assert consumer.poll(timeout=0.05) is None


def test_poll_many_and_iteration(tmq: Twain) -> None:
    tmq.create_topic("t", partitions=2)
    tmq.producer("t").write_messages((i, str(i)) for i in range(25))
    consumer = tmq.consumer("t")
    first = consumer.poll_many(10)
    assert len(first) == 10
    rest = list(consumer)
    assert sorted(int(m.message) for m in first + rest) == list(range(25))


def test_consumer_is_fair_across_partitions(tmq: Twain) -> None:
    tmq.create_topic("t", partitions=3)
    producer = tmq.producer("t")
    for partition in range(3):
        for _ in range(50):
            producer.write_message(0, f"p{partition}", partition=partition)
    first = tmq.consumer("t").poll_many(30)
    counts = {p: sum(m.partition == p for m in first) for p in range(3)}
    assert counts == {0: 10, 1: 10, 2: 10}


def test_start_from_now_skips_earlier_messages(tmq: Twain) -> None:
    tmq.create_topic("t", partitions=2)
    producer = tmq.producer("t")
    producer.write_messages([(1, "old"), (2, "old")])
    consumer = tmq.consumer("t", start_from="now")
    assert consumer.poll() is None
    producer.write_message(1, "new")
    assert consumer.poll().message == "new"  # type: ignore[union-attr]
    with pytest.raises(InvalidOptionError, match="'middle'"):
        tmq.consumer("t", start_from="middle")


def test_seek_position_and_end_offsets(tmq: Twain) -> None:
    tmq.create_topic("t", partitions=2, index_interval_bytes=64)
    producer = tmq.producer("t")
    for i in range(100):
        producer.write_message(0, f"m{i}", partition=i % 2)
    consumer = tmq.consumer("t")
    assert consumer.end_offsets() == {0: 50, 1: 50}
    consumer.seek(1, 37)
    assert consumer.position(1) == 37
    got = [m for m in consumer.poll_many(200) if m.partition == 1]
    assert [m.offset for m in got] == list(range(37, 50))
    assert [m.message for m in got][:2] == ["m75", "m77"]
    assert consumer.position(1) == 50
    consumer.seek(0, 50)
    assert consumer.poll() is None
    with pytest.raises(OffsetOutOfRangeError, match=r"offset 51 .* \(0 \.\. 50\)"):
        consumer.seek(0, 51)
    with pytest.raises(OffsetOutOfRangeError, match="-1"):
        consumer.seek(0, -1)
    with pytest.raises(InvalidPartitionError, match="partition 2 does not exist"):
        consumer.seek(2, 0)


def test_position_counts_messages_fetched_but_not_returned(tmq: Twain) -> None:
    tmq.create_topic("t", partitions=2)
    tmq.producer("t").write_messages((i, "x") for i in range(20))
    consumer = tmq.consumer("t")
    returned = consumer.poll_many(3)
    for partition in (0, 1):
        done = [m.offset for m in returned if m.partition == partition]
        assert consumer.position(partition) == (max(done) + 1 if done else 0)


def test_seek_to_timestamp(tmq: Twain) -> None:
    tmq.create_topic("t", index_interval_bytes=64)
    producer = tmq.producer("t")
    for i in range(30):
        producer.write_message(1, f"a{i}")
    time.sleep(0.02)
    middle = datetime.now(timezone.utc)
    time.sleep(0.02)
    for i in range(30):
        producer.write_message(1, f"b{i}")
    consumer = tmq.consumer("t")
    assert consumer.seek_to_timestamp(middle) == {0: 30}
    assert consumer.poll().message == "b0"  # type: ignore[union-attr]
    assert consumer.offsets_for_timestamp(0) == {0: 0}
    assert consumer.offsets_for_timestamp(time.time() + 60) == {0: 60}


def test_assign_replaces_partitions_and_positions(tmq: Twain) -> None:
    tmq.create_topic("t", partitions=3)
    producer = tmq.producer("t")
    for partition in range(3):
        for i in range(5):
            producer.write_message(0, f"{partition}:{i}", partition=partition)
    consumer = tmq.consumer("t")
    consumer.poll_many(4)
    consumer.assign({2: 3, 0: 4})
    assert consumer.assignment() == [0, 2]
    assert sorted(m.message for m in consumer.poll_many(10)) == ["0:4", "2:3", "2:4"]
    with pytest.raises(InvalidPartitionError, match="not assigned"):
        consumer.position(1)
    consumer.assign({})
    assert consumer.poll() is None and consumer.assignment() == []


def test_explicit_partition_and_custom_partitioner(tmq: Twain) -> None:
    tmq.create_topic("t", partitions=4)
    landed = tmq.producer("t", partitioner=lambda key, n: key % n).write_message(6, "x")
    assert landed.partition == 2
    assert tmq.producer("t").write_message(6, "y", partition=3).partition == 3
    with pytest.raises(InvalidPartitionError, match="partition 4"):
        tmq.producer("t").write_message(6, "z", partition=4)
    with pytest.raises(InvalidPartitionError, match="partition 9"):
        tmq.producer("t", partitioner=lambda key, n: 9).write_message(1, "z")


def test_oversize_messages_are_refused_by_size(tmq: Twain) -> None:
    tmq.create_topic("t", max_message_bytes=1000)
    producer = tmq.producer("t")
    producer.write_message(1, "x" * 1000)
    with pytest.raises(MessageTooLargeError, match=r"1001 bytes .* max_message_bytes 1000"):
        producer.write_message(1, "x" * 1001)
    with pytest.raises(MessageTooLargeError):
        producer.write_messages([(1, "ok"), (1, b"y" * 1001)])


def test_default_max_is_one_mib_and_large_messages_read_back(tmq: Twain) -> None:
    tmq.create_topic("t")
    big = b"z" * (1024 * 1024)
    tmq.producer("t").write_message(1, big)
    assert tmq.consumer("t", fetch_bytes=4096).poll().message == big  # type: ignore[union-attr]
    with pytest.raises(MessageTooLargeError):
        tmq.producer("t").write_message(1, big + b"!")


def test_write_messages_returns_offset_ranges(tmq: Twain) -> None:
    tmq.create_topic("t", partitions=2)
    written = tmq.producer("t", partitioner=lambda key, n: key % n).write_messages(
        [(0, "a"), (1, "b"), (2, "c")]
    )
    assert written == {0: [range(0, 2)], 1: [range(0, 1)]}
    assert sorted(m.message for m in tmq.consumer("t")) == ["a", "b", "c"]


@pytest.mark.parametrize("fsync", ["never", "batch", "always"])
def test_every_fsync_mode_writes(tmq: Twain, fsync: str) -> None:
    tmq.create_topic("t", partitions=2)
    with tmq.producer("t", fsync=fsync, batch_interval=0) as producer:
        producer.write_message(1, "one")
        producer.write_messages([(2, "two"), (3, "three")])
        producer.flush()
    assert sorted(m.message for m in tmq.consumer("t")) == ["one", "three", "two"]


def test_bad_options_are_named(tmq: Twain) -> None:
    tmq.create_topic("t")
    with pytest.raises(InvalidOptionError, match="'sometimes'"):
        tmq.producer("t", fsync="sometimes")
    with pytest.raises(InvalidOptionError, match="-1"):
        tmq.consumer("t").poll(timeout=-1)


def test_closed_objects_raise(tmq: Twain) -> None:
    tmq.create_topic("t")
    producer = tmq.producer("t")
    producer.close()
    producer.close()
    with pytest.raises(ClosedError, match="producer of topic 't' is closed"):
        producer.write_message(1, "x")
    with tmq.consumer("t") as consumer:
        pass
    with pytest.raises(ClosedError, match="consumer of topic 't' is closed"):
        consumer.poll()


def test_multi_poll_round_robin(tmq: Twain) -> None:
    tmq.create_topic("a")
    tmq.create_topic("b")
    tmq.producer("a").write_messages([(1, "a1"), (1, "a2")])
    tmq.producer("b").write_messages([(1, "b1")])
    consumers = [tmq.consumer("a"), tmq.consumer("b")]
    seen = []
    last = None
    while (got := multi_poll(consumers, last)) is not None:
        last, message = got
        seen.append(message.message)
    assert seen == ["a1", "b1", "a2"]


def test_bad_keys_are_refused_by_value(tmq: Twain) -> None:
    tmq.create_topic("t")
    producer = tmq.producer("t")
    for bad in ([1], 70000, "7", None):
        with pytest.raises(InvalidKeyError, match=re.escape(repr(bad))):
            producer.write_message(bad, "x")
        with pytest.raises(InvalidKeyError, match=re.escape(repr(bad))):
            producer.write_messages([(1, "ok"), (bad, "x")])


def test_exclusive_producer_and_others_in_the_same_process(tmq: Twain) -> None:
    tmq.create_topic("t", partitions=2)
    exclusive = tmq.producer("t", exclusive=True)
    assert exclusive.write_message(1, "a", partition=0).offset == 0
    assert exclusive.write_message(1, "b", partition=0).offset == 1
    consumer = tmq.consumer("t")  # readers never wait for writers
    assert [m.message for m in consumer.poll_many(5) if m.partition == 0][:1] == ["a"]
    shared = tmq.producer("t")
    shared.write_message(1, "other partition", partition=1)
    with pytest.raises(PartitionLockedError, match=r"partition 0 .* exclusive producer"):
        shared.write_message(1, "x", partition=0)
    exclusive.close()
    assert shared.write_message(1, "now free", partition=0).offset == 2


def test_batch_fsync_syncs_in_the_background_and_stops_on_close(tmq: Twain) -> None:
    tmq.create_topic("t")
    producer = tmq.producer("t", fsync="batch", batch_interval=0.01)
    producer.write_message(1, "x")
    (log,) = producer._topic.opened_logs()
    assert log.dirty
    deadline = time.monotonic() + 30
    while log.dirty and time.monotonic() < deadline:
        time.sleep(0.01)
    assert not log.dirty  # the fsync batcher thread synced it
    thread = producer._batcher._thread  # type: ignore[union-attr]
    producer.close()
    assert not thread.is_alive()


def test_a_failed_background_sync_is_raised_by_flush(
    tmq: Twain, monkeypatch: pytest.MonkeyPatch
) -> None:
    tmq.create_topic("t")
    producer = tmq.producer("t", fsync="batch", batch_interval=0.001)
    producer.write_message(1, "x")
    (log,) = producer._topic.opened_logs()

    def failing_sync() -> None:
        raise OSError(5, "simulated disk error")

    monkeypatch.setattr(log, "sync", failing_sync)
    batcher = producer._batcher
    assert batcher is not None
    deadline = time.monotonic() + 30
    while batcher.error is None and time.monotonic() < deadline:
        time.sleep(0.001)
    monkeypatch.undo()  # syncs work again, but the lost one must still be reported
    with pytest.raises(OSError, match="simulated disk error"):
        producer.flush()
    batcher.error = None
    producer.close()


def test_one_producer_shared_by_threads_keeps_offsets_unique(tmq: Twain) -> None:
    tmq.create_topic("t", segment_bytes=4096)
    producer = tmq.producer("t")
    landed: list[RecordMetadata] = []

    def write(name: str) -> None:
        for i in range(500):
            landed.append(producer.write_message(1, f"{name}:{i}"))
        producer.write_messages([(1, f"{name}:batch{i}") for i in range(100)])

    threads = [threading.Thread(target=write, args=(f"t{n}",)) for n in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    messages = list(tmq.consumer("t"))
    assert [m.offset for m in messages] == list(range(2400))
    assert len({m.message for m in messages}) == 2400
    assert sorted(r.offset for r in landed) == sorted(
        m.offset for m in messages if "batch" not in m.message
    )


@dataclass
class Reading:
    sensor: str
    value: float


def test_write_message_and_write_messages_store_every_payload_type_alike(tmq: Twain) -> None:
    tmq.register_msg_cls(Reading)
    items = [
        ("k1", "text"),
        ("k2", b"\x00bytes"),
        ("k1", Reading("s1", 1.5)),
        ("k1", ""),
        ("k3", Reading("s2", -2.0)),
        ("k2", "more text"),
    ]
    for name in ("one_by_one", "batch"):
        tmq.create_topic(name, key_type="char4", partitions=2)
    with tmq.producer("one_by_one") as producer:
        for key, message in items:
            producer.write_message(key, message)
    with tmq.producer("batch") as producer:
        producer.write_messages(items)

    def read(topic: str) -> list[tuple[int, int, str, object]]:
        return sorted((m.partition, m.offset, m.key, m.message) for m in tmq.consumer(topic))

    assert read("batch") == read("one_by_one")
    assert sorted(repr(m) for *_, m in read("batch")) == sorted(repr(m) for _, m in items)


def test_a_cached_key_route_does_not_serve_an_equal_key_of_another_class(tmq: Twain) -> None:
    tmq.create_topic("t")
    producer = tmq.producer("t")
    producer.write_message(1, "one")
    with pytest.raises(InvalidKeyError, match="True"):
        producer.write_message(True, "bool")  # True == 1 and hashes alike
    with pytest.raises(InvalidKeyError, match="True"):
        producer.write_messages([(1, "one"), (True, "bool")])
