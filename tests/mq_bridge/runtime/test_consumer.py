"""Consumer: delivery semantics the seed describes (contract tests cover the shared part)."""

from __future__ import annotations

import pytest

from mq_bridge import Consumer, Message, Publisher
from tests.mq_bridge.helpers import unique
from tests.mq_bridge.runtime.scripted import Script


def fill(topic: str, count: int) -> None:
    with Publisher.from_config({"memory": {"topic": topic, "capacity": 0}}) as publisher:
        publisher.send_batch([f"m{i}".encode() for i in range(count)])


def test_poll_returns_max_messages_when_that_many_are_waiting():
    topic = unique("c")
    fill(topic, 1000)
    with Consumer.from_config({"memory": {"topic": topic}}) as consumer:
        assert len(consumer.poll(max=500, timeout_ms=1000)) == 500
        assert len(consumer.poll(max=500, timeout_ms=1000)) == 500
        consumer.commit()
        assert consumer.poll(max=500, timeout_ms=10) == []


def test_nack_with_a_token_redelivers_just_that_batch_first():
    topic = unique("c")
    fill(topic, 4)
    with Consumer.from_config({"memory": {"topic": topic}}) as consumer:
        _, t1 = consumer.poll_batch(max=2, timeout_ms=1000)
        _, t2 = consumer.poll_batch(max=2, timeout_ms=1000)
        consumer.ack(t2)  # memory acks in any order
        consumer.nack(t1)
        again, t3 = consumer.poll_batch(max=5, timeout_ms=1000)
        assert [m.payload for m in again] == [b"m0", b"m1"]
        consumer.ack(t3)
        with pytest.raises(ValueError, match="unknown batch token"):
            consumer.nack(t1)


def test_cumulative_inputs_refuse_an_out_of_order_ack(scripted):
    scripted["kafka-like"] = Script([Message(b"a"), Message(b"b")], any_order=False)
    with Consumer.from_config({"scripted": {"name": "kafka-like"}}) as consumer:
        _, older = consumer.poll_batch(max=1, timeout_ms=100)
        _, newer = consumer.poll_batch(max=1, timeout_ms=100)
        with pytest.raises(ValueError, match="ack the oldest batch first"):
            consumer.ack(newer)
        consumer.ack(older)
        consumer.ack(newer)
    assert [m.payload for m in scripted["kafka-like"].acked] == [b"a", b"b"]


def test_exhausted_becomes_true_once_a_bounded_source_is_drained(scripted):
    scripted["file-like"] = Script([Message(b"a"), Message(b"b")])
    with Consumer.from_config({"scripted": {"name": "file-like"}}) as consumer:
        seen = []
        while not consumer.exhausted:
            seen += consumer.poll(max=1, timeout_ms=100)
            consumer.commit()
        assert [m.payload for m in seen] == [b"a", b"b"]
        assert consumer.poll(max=5, timeout_ms=10) == []


def test_memory_status_reports_backlog_and_capacity():
    topic = unique("c")
    fill(topic, 3)
    with Consumer.from_config({"memory": {"topic": topic}}) as consumer:
        status = consumer.status()
        assert status["pending"] == 3 and status["target"] == topic  # as mq-bridge names it
        assert status["healthy"] is True and status["error"] is None
        consumer.poll(max=3, timeout_ms=100)
        assert consumer.status()["pending"] == 0
        consumer.commit()


def test_max_must_be_positive():
    consumer = Consumer.from_config({"memory": {"topic": unique("c")}})
    with consumer, pytest.raises(ValueError, match="max must be at least 1"):
        consumer.poll(max=0)
