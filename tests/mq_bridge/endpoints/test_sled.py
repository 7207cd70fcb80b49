"""sled: mq-bridge-py's embedded-queue keys, kept in a twainmq store."""

from __future__ import annotations

from pathlib import Path

from mq_bridge import Consumer, Message, Publisher
from twainmq import Twain


def _config(path: Path, **options: object) -> dict[str, object]:
    return {"sled": {"path": str(path), "tree": "jobs", **options}}


def test_queue_mode_consumes_acked_messages_for_good(tmp_path):
    with Publisher.from_config(_config(tmp_path)) as writer:
        writer.send_batch([Message(b"one"), Message(b"two"), Message(b"three")])
    queue = _config(tmp_path, read_from_start=True, delete_after_read=True)
    with Consumer.from_config(queue) as consumer:
        [first] = consumer.poll(max=1, timeout_ms=1000)
        consumer.commit()
    with Consumer.from_config(queue) as consumer:  # a restart: the acked one is gone
        rest = consumer.poll(max=10, timeout_ms=1000)
        consumer.commit()
    with Consumer.from_config(queue) as consumer:
        assert consumer.poll(max=10, timeout_ms=100) == []
    assert [first.payload] + [m.payload for m in rest] == [b"one", b"two", b"three"]


def test_without_delete_each_reader_starts_over_and_without_read_from_start_sees_new_only(
    tmp_path,
):
    with Publisher.from_config(_config(tmp_path)) as writer:
        writer.send(b"old")
    for _ in range(2):
        with Consumer.from_config(_config(tmp_path, read_from_start=True)) as consumer:
            assert [m.payload for m in consumer.poll(max=10, timeout_ms=500)] == [b"old"]
            consumer.commit()
    with Consumer.from_config(_config(tmp_path)) as tail:
        assert tail.poll(max=10, timeout_ms=50) == []
        with Publisher.from_config(_config(tmp_path)) as writer:
            writer.send(b"new")
        assert [m.payload for m in tail.poll(max=10, timeout_ms=1000)] == [b"new"]


def test_the_files_are_a_twainmq_store_with_one_topic_per_tree(tmp_path):
    with Publisher.from_config({"sled": {"path": str(tmp_path)}}) as writer:
        writer.send(Message(b"kept", id=7))
    store = Twain(tmp_path)
    consumer = store.consumer("default")
    [record] = consumer.poll_many(10, 1)
    consumer.close()
    assert b"kept" in bytes(record.message)
