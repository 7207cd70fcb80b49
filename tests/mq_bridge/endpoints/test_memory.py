"""memory specifics beyond the contract: broadcast, capacity, partial sends, source metadata."""

from __future__ import annotations

import threading

import pytest

from mq_bridge import Consumer, Message, Publisher
from mq_bridge.endpoints.memory.topic import MemoryChannel, get_topic
from mq_bridge.errors import ConfigError, SendError, SendTimeoutError
from tests.mq_bridge.helpers import unique


def test_subscribers_each_get_every_message_published_after_they_subscribed():
    topic = unique("bcast")
    publisher = Publisher.from_config({"memory": {"topic": topic}})
    one = Consumer.from_config({"memory": {"topic": topic, "subscribe_mode": True}})
    two = Consumer.from_config({"memory": {"topic": topic, "subscribe_mode": True}})
    publisher.send_batch([b"a", b"b"])
    assert [m.payload for m in one.poll(max=5, timeout_ms=100)] == [b"a", b"b"]
    assert [m.payload for m in two.poll(max=5, timeout_ms=100)] == [b"a", b"b"]
    one.close()
    publisher.send(b"c")
    assert [m.payload for m in two.poll(max=5, timeout_ms=100)] == [b"c"]
    two.close()


def test_queue_readers_compete_for_messages():
    topic = unique("queue")
    Publisher.from_config({"memory": {"topic": topic}}).send_batch([b"1", b"2", b"3", b"4"])
    one = Consumer.from_config({"memory": {"topic": topic}})
    two = Consumer.from_config({"memory": {"topic": topic}})
    got = one.poll(max=2, timeout_ms=100) + two.poll(max=2, timeout_ms=100)
    assert sorted(m.payload for m in got) == [b"1", b"2", b"3", b"4"]
    one.commit()
    two.commit()


def test_a_batch_into_a_full_topic_fails_only_the_messages_that_did_not_fit():
    channel = MemoryChannel("partial", capacity=3)
    messages = [Message(f"{i}".encode()) for i in range(5)]
    with pytest.raises(SendError) as raised:
        channel.put_many(messages, timeout=0.02)
    assert sorted(raised.value.failures) == [3, 4]
    assert all(isinstance(e, SendTimeoutError) for e in raised.value.failures.values())
    assert raised.value.retriable
    assert [m.payload for m in channel.take(10, 0)] == [b"0", b"1", b"2"]


def test_a_waiting_writer_gets_room_as_soon_as_a_reader_takes():
    channel = MemoryChannel("room", capacity=1)
    channel.put_one(Message(b"first"), timeout=1)
    reader = threading.Timer(0.05, lambda: channel.take(1, 1))
    reader.start()
    channel.put_one(Message(b"second"), timeout=10)  # would raise if never woken
    reader.join()
    assert [m.payload for m in channel.take(1, 0)] == [b"second"]


def test_capacity_grows_to_the_largest_asked_and_zero_means_unbounded():
    name = unique("cap")
    assert get_topic(name).capacity == 100
    assert get_topic(name, 50).capacity == 100
    assert get_topic(name, 500).capacity == 500
    assert get_topic(name, 0).capacity == 0
    assert get_topic(name, 10).capacity == 0


def test_only_memory_urls_are_accepted():
    with pytest.raises(ConfigError, match="only memory:// topics"):
        Publisher.from_config({"memory": {"url": "ipc://q"}})


def test_source_metadata_is_added_when_asked(monkeypatch):
    monkeypatch.setenv("MQB_SOURCE_METADATA", "1")
    topic = unique("src")
    Publisher.from_config({"memory": {"topic": topic}}).send(b"x", {"k": "v"})
    with Consumer.from_config({"memory": {"topic": topic}}) as consumer:
        (message,) = consumer.poll(max=1, timeout_ms=100)
        consumer.commit()
    assert message.metadata == {"k": "v", "mqb.src.memory_topic": topic}


def test_the_drainer_counts_what_it_took_and_gives_up_after_its_timeout():
    from mq_bridge import MemoryDrainer

    topic = unique("drain")
    drainer = MemoryDrainer.from_topic(topic, 1000)
    Publisher.from_config({"memory": {"topic": topic}}).send_batch([b"x"] * 250)
    assert drainer.drain(100, timeout=5.0, batch_size=64) == 100
    with pytest.raises(RuntimeError, match="drained 150 of 1000 messages"):  # as mq-bridge-py
        drainer.drain(1000, timeout=0.05)  # only 150 left: gives up at the timeout
    assert get_topic(topic).capacity == 1000


def test_try_send_one_takes_a_message_only_when_there_is_room():
    from mq_bridge.errors import ClosedError
    from mq_bridge.runtime.factory import build_output, new_context

    topic = unique("try")
    output = build_output({"memory": {"topic": topic, "capacity": 1}}, new_context("t"))
    assert output.try_send_one(Message(b"1")) is True
    assert output.try_send_one(Message(b"2")) is False  # full: the caller must wait elsewhere
    output.close()
    with pytest.raises(ClosedError):
        output.try_send_one(Message(b"3"))
    assert len(get_topic(topic).queue) == 1
