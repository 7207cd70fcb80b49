"""The `twain` endpoint against a real twainmq store in `tmp_path`."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from mq_bridge import Consumer, Message, Publisher, Route
from mq_bridge.endpoints.twain.input import TwainInput
from mq_bridge.errors import ConfigError, EndpointError, SendError
from mq_bridge.runtime.factory import build_input, build_output, new_context
from tests.sync_log import record_syncs
from twainmq import Twain
from twainmq.groups import list_groups


def endpoint(tmp_path: Path, **options: Any) -> dict[str, Any]:
    return {"twain": {"root": str(tmp_path / "store"), "topic": "orders", **options}}


def poll_all(consumer: Consumer, count: int, timeout: float = 20.0) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += consumer.poll(max=count - len(got), timeout_ms=200)
    return got


def wait_for(condition: Callable[[], bool], timeout: float = 30.0) -> bool:
    """Poll `condition` until it holds (True) or `timeout` seconds passed (False)."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.005)
    return True


def next_offsets(messages: list[Message]) -> dict[int, int]:
    """Partition -> the offset after the last of `messages` there (needs source metadata)."""
    offsets: dict[int, int] = {}
    for message in messages:
        partition = int(message.metadata["mqb.src.twain_partition"])
        offset = int(message.metadata["mqb.src.twain_offset"])
        offsets[partition] = max(offsets.get(partition, 0), offset + 1)
    return offsets


def offsets_in(messages: list[Message], partition: int) -> list[int]:
    """The offsets of those of `messages` that come from `partition` (source metadata)."""
    return [
        int(m.metadata["mqb.src.twain_offset"])
        for m in messages
        if int(m.metadata["mqb.src.twain_partition"]) == partition
    ]


def test_a_plain_twainmq_consumer_reads_the_records_as_bytes(tmp_path: Path) -> None:
    config = endpoint(tmp_path, create={"partitions": 2})
    with Publisher.from_config(config) as publisher:
        publisher.send(Message(b"hello", {"kind": "greeting"}))
    with Twain(tmp_path / "store").consumer("orders") as plain:
        record = plain.poll(timeout=5)
    assert isinstance(record.message, bytes) and record.message.endswith(b"hello")


def test_records_of_a_plain_producer_are_read_with_stable_ids(tmp_path: Path) -> None:
    store = Twain(tmp_path / "store")
    store.create_topic("orders")
    with store.producer("orders") as producer:
        producer.write_message(1, "text")
        producer.write_message(1, b"\x00raw")
    config = endpoint(tmp_path, group="g")
    with Consumer.from_config(config) as consumer:
        first = poll_all(consumer, 2)
    with Consumer.from_config(config) as consumer:  # nothing committed: delivered again
        again = poll_all(consumer, 2)
    assert [m.payload for m in first] == [b"text", b"\x00raw"]
    assert [m.id for m in again] == [m.id for m in first]


def test_key_from_sends_equal_keys_to_one_partition(tmp_path: Path) -> None:
    config = endpoint(tmp_path, create={"partitions": 4, "key_type": "char16"}, key_from="user")
    with Publisher.from_config(config) as publisher:
        publisher.send_batch([Message(str(n).encode(), {"user": f"u{n % 3}"}) for n in range(30)])
    partitions: dict[str, set[int]] = {}
    with Twain(tmp_path / "store").consumer("orders") as plain:
        for record in iter(lambda: plain.poll(timeout=0.5), None):
            partitions.setdefault(record.key, set()).add(record.partition)
    assert sorted(partitions) == ["u0", "u1", "u2"]
    assert all(len(found) == 1 for found in partitions.values())


def test_source_metadata_names_topic_partition_and_offset(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MQB_SOURCE_METADATA", "1")
    config = endpoint(tmp_path, create={}, group="g")
    with Publisher.from_config(config) as publisher:
        publisher.send_batch([b"a", b"b"])
    with Consumer.from_config(config) as consumer:
        got = poll_all(consumer, 2)
    assert [m.metadata for m in got] == [
        {"mqb.src.twain_topic": "orders", "mqb.src.twain_partition": "0", "mqb.src.twain_offset": o}
        for o in ("0", "1")
    ]


def test_pending_is_the_groups_lag_over_every_partition(tmp_path: Path) -> None:
    config = endpoint(tmp_path, create={"partitions": 3}, group="g")
    with Publisher.from_config(config) as publisher:
        publisher.send_batch([f"m{n}".encode() for n in range(12)])
    with Consumer.from_config(config) as consumer:
        assert consumer.status()["pending"] == 12
        got = poll_all(consumer, 5)
        assert consumer.status()["pending"] == 12  # polled is not committed
        consumer.commit()
        assert consumer.status()["pending"] == 12 - len(got)
        assert consumer.status()["details"]["assignment"] == [0, 1, 2]


def test_start_from_now_skips_what_was_written_before_the_group(tmp_path: Path) -> None:
    config = endpoint(tmp_path, create={}, group="late", start_from="now")
    with Publisher.from_config(config) as publisher:
        publisher.send(b"before")
        with Consumer.from_config(config) as consumer:
            publisher.send(b"after")
            assert [m.payload for m in poll_all(consumer, 1)] == [b"after"]


def test_a_nack_rewinds_only_the_partitions_of_the_batch(tmp_path: Path) -> None:
    config = endpoint(tmp_path, create={"partitions": 2, "key_type": "u8"}, key_from="p", group="g")
    with Publisher.from_config(config) as publisher:
        publisher.send_batch([Message(f"m{n}".encode(), {"p": str(n % 2)}) for n in range(8)])
    source = build_input(config, new_context("test"))
    source.connect()
    try:
        first = source.receive(8, 5.0)
        source.nack(first)
        source.nack(first)  # twice is harmless
        again: list[Message] = []
        while len(again) < 8:
            again += source.receive(8, 5.0).messages
        assert sorted(m.payload for m in again) == sorted(m.payload for m in first.messages)
    finally:
        source.close()


def test_two_members_of_a_group_share_the_partitions_and_each_message_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MQB_SOURCE_METADATA", "1")
    config = endpoint(tmp_path, create={"partitions": 4}, group="workers")
    total = 400
    seen: list[list[tuple[int, int]]] = [[], []]  # per member: (number, partition)
    owned: list[list[int]] = [[], []]  # per member: the partitions it owned at its last poll
    done = threading.Event()

    def work(index: int) -> None:
        with Consumer.from_config(config) as consumer:
            while not done.is_set():
                for message in consumer.poll(max=7, timeout_ms=50):
                    partition = int(message.metadata["mqb.src.twain_partition"])
                    seen[index].append((int(message.payload), partition))
                consumer.commit()
                owned[index] = consumer.status()["details"]["assignment"]

    threads = [threading.Thread(target=work, args=(i,)) for i in (0, 1)]
    for thread in threads:
        thread.start()
    try:
        # Publish only once both members joined and took two partitions each, so that no
        # rebalance can happen while they read (however slowly the second one starts).
        assert wait_for(lambda: sorted(owned[0] + owned[1]) == [0, 1, 2, 3] and all(owned))
        with Publisher.from_config(config) as publisher:
            publisher.send_batch([str(n).encode() for n in range(total)])
        assert wait_for(lambda: len(seen[0]) + len(seen[1]) >= total)
    finally:
        done.set()
        for thread in threads:
            thread.join(30)
    numbers = sorted(number for number, _ in seen[0] + seen[1])
    assert numbers == list(range(total))  # each once
    for index in (0, 1):  # each member read only, and some of, its own partitions
        assert seen[index] and {p for _, p in seen[index]} <= set(owned[index])


def test_a_route_moves_messages_between_topics_keeping_id_and_metadata(tmp_path: Path) -> None:
    root = str(tmp_path / "store")
    config = {
        "input": {"twain": {"root": root, "topic": "in", "create": {"partitions": 2}}},
        "output": {"twain": {"root": root, "topic": "out", "create": {}, "fsync": "batch"}},
    }
    sent = [Message(f"{n}".encode(), {"n": str(n)}) for n in range(50)]
    with Publisher.from_config({"twain": config["input"]["twain"]}) as publisher:
        publisher.send_batch(sent)
    route = Route.from_config(config, "enrich").with_handler(lambda m: m.payload + b"!")
    with route:
        reader = {"twain": {"root": root, "topic": "out", "group": "check"}}
        with Consumer.from_config(reader) as consumer:
            got = poll_all(consumer, 50)
    assert sorted((m.id, m.metadata["n"], m.payload) for m in got) == sorted(
        (m.id, m.metadata["n"], m.payload + b"!") for m in sent
    )
    groups = [(g.topic, g.group) for g in list_groups(root)]
    assert ("in", "enrich") in groups  # the route's name is its group


def test_a_missing_topic_fails_connect_and_says_how_to_create_it(tmp_path: Path) -> None:
    with pytest.raises(EndpointError, match=r"'orders' does not exist.*create"):
        Publisher.from_config(endpoint(tmp_path))


def test_a_route_name_that_is_not_a_group_name_asks_for_group(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="set `group`"):
        build_input(endpoint(tmp_path, create={}), new_context("my route"))


def test_bad_options_are_refused_by_the_schema(tmp_path: Path) -> None:
    for bad in ({"topic": "../x"}, {"fsync": "sometimes"}, {"create": {"partitions": 0}}):
        with pytest.raises(ConfigError, match="twain"):
            Publisher.from_config(endpoint(tmp_path, **bad))


def test_an_oversize_message_fails_alone(tmp_path: Path) -> None:
    config = endpoint(tmp_path, create={"max_message_bytes": 100})
    output = build_output(config, new_context("test"))
    output.connect()
    try:
        with pytest.raises(SendError) as failed:
            output.send([Message(b"small"), Message(b"x" * 200), Message(b"ok")])
        assert list(failed.value.failures) == [1]
        assert "max_message_bytes 100" in str(failed.value.failures[1])
        with pytest.raises(EndpointError, match="larger than"):
            output.send_one(Message(b"x" * 200))
    finally:
        output.close()
    with Twain(tmp_path / "store").consumer("orders") as plain:
        records = [r.message for r in iter(lambda: plain.poll(timeout=0.5), None)]
    assert len(records) == 2 and records[0].endswith(b"small") and records[1].endswith(b"ok")


@pytest.mark.parametrize(
    ("fsync", "synced_after_single", "synced_after_batch"),
    [("never", 0, 0), ("always", 1, 2), ("batch", 0, 1)],
)
def test_outputs_sync_as_their_fsync_mode_says(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    fsync: str,
    synced_after_single: int,
    synced_after_batch: int,
) -> None:
    """Syncs of segment data made by the sending thread, counted after each send returns.

    always: every send; batch: a batch `send` before it returns (what a route acks is on
    disk), single sends left to the producer's background group commit; never: none.
    """
    config = endpoint(tmp_path, create={}, fsync=fsync, group="g")
    publisher = Publisher.from_config(config)
    syncs = record_syncs(monkeypatch)
    sender = threading.current_thread().name

    def synced_by_sender() -> int:
        return sum(1 for s in syncs.of_files(".log") if s.thread == sender)

    publisher.send(b"one")
    assert synced_by_sender() == synced_after_single
    publisher.send_batch([b"two", b"three"])
    assert synced_by_sender() == synced_after_batch
    publisher.close()
    if fsync == "never":
        assert syncs.of_files(".log") == []  # not in any thread, not on close either
    with Consumer.from_config(config) as consumer:
        assert [m.payload for m in poll_all(consumer, 3)] == [b"one", b"two", b"three"]


def test_a_partition_that_moved_is_read_again_from_its_last_commit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MQB_SOURCE_METADATA", "1")
    config = endpoint(tmp_path, create={"partitions": 2}, group="g")
    with Publisher.from_config(config) as publisher:  # keyed by id: both partitions get some
        publisher.send_batch([str(n).encode() for n in range(200)])
    first = build_input(config, new_context("test"))
    first.connect()
    assert isinstance(first, TwainInput)
    second = build_input(config, new_context("test"))
    try:
        acked = first.receive(6, 5.0)
        first.ack(acked)  # commits at once
        committed = next_offsets(acked.messages)
        batch = first.receive(200, 5.0)  # read on, past the commit
        second.connect()

        def handed_over() -> bool:
            first.receive(1, 0.01)  # polling lets the first member hand a partition over
            return len(first.status().details["assignment"]) == 1

        assert wait_for(handed_over)
        first.ack(batch)  # must not fail: it commits the partition it kept, not the moved one
        (kept,) = first.status().details["assignment"]
        (moved,) = {0, 1} - {kept}
        read_past = set(offsets_in(batch.messages, moved))
        assert read_past  # the first member read the moved partition past its commit
        got: list[Message] = []

        def second_read_them_again() -> bool:
            got.extend(second.receive(200, 0.05).messages)
            return read_past <= set(offsets_in(got, moved))

        assert wait_for(second_read_them_again)
        offsets = offsets_in(got, moved)
        assert len(offsets) == len(got)  # the second member reads only the moved partition
        # It starts at the moved partition's last commit, so what the first member read past
        # it (and acked too late) comes again, in order: at least once, never lost.
        assert offsets[0] == committed.get(moved, 0)
        assert offsets == list(range(offsets[0], offsets[0] + len(offsets)))
    finally:
        first.close()
        second.close()


def test_a_commit_interval_defers_acks_until_idle_or_close(tmp_path: Path) -> None:
    config = endpoint(tmp_path, create={}, group="g", commit_interval_ms=600_000)
    with Publisher.from_config(config) as publisher:
        publisher.send_batch([str(n).encode() for n in range(12)])
    with Consumer.from_config(config) as consumer:
        assert len(poll_all(consumer, 4)) == 4
        consumer.commit()  # the first ack commits at once
        assert len(poll_all(consumer, 4)) == 4
        consumer.commit()  # deferred: the interval has not passed
        assert consumer.status()["pending"] == 8
        assert len(poll_all(consumer, 4)) == 4
        consumer.commit()
        assert consumer.poll(max=1, timeout_ms=50) == []  # idle: what was acked is committed
        assert consumer.status()["pending"] == 0
    with Publisher.from_config(config) as publisher:
        publisher.send_batch([b"12", b"13"])
    with Consumer.from_config(config) as consumer:
        assert [m.payload for m in poll_all(consumer, 1)] == [b"12"]
        consumer.commit()  # deferred, then committed by close
    with Consumer.from_config(config) as consumer:
        assert [m.payload for m in poll_all(consumer, 1)] == [b"13"]


def test_deferred_acks_are_committed_before_a_partition_changes_hands(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MQB_SOURCE_METADATA", "1")
    config = endpoint(tmp_path, create={"partitions": 2}, group="g", commit_interval_ms=600_000)
    with Publisher.from_config(config) as publisher:  # keyed by id: both partitions get some
        publisher.send_batch([Message(b"") for _ in range(400)])
    first = build_input(config, new_context("test"))
    first.connect()
    second = build_input(config, new_context("test"))
    try:
        first.ack(first.receive(4, 5.0))  # commits at once
        batch = first.receive(6, 5.0)
        first.ack(batch)  # deferred
        acked = {
            int(m.metadata["mqb.src.twain_partition"]): int(m.metadata["mqb.src.twain_offset"]) + 1
            for m in batch.messages
        }
        second.connect()
        while len(first.status().details["assignment"]) > 1:
            assert first.receive(1, 1.0)  # records left: never idle, so on_revoke commits
        moved = second.receive(1, 10.0).messages[0]
        partition = int(moved.metadata["mqb.src.twain_partition"])
        assert int(moved.metadata["mqb.src.twain_offset"]) == acked[partition]
    finally:
        first.close()
        second.close()
