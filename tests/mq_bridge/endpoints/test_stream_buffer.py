"""stream_buffer: one partition per correlation id, in process."""

from __future__ import annotations

import pytest

from mq_bridge import Consumer, Message, Publisher
from mq_bridge.endpoints.memory.stream_buffer import PARTITIONS
from mq_bridge.errors import ConfigError, NonRetryableError, SendError
from tests.mq_bridge.helpers import unique


def test_a_reader_gets_only_its_correlation_id_in_order():
    topic = unique("sb")
    with Publisher.from_config({"stream_buffer": {"topic": topic}}) as writer:
        writer.send_batch([
            Message(b"a1", {"correlation_id": "a"}),
            Message(b"b1", {"correlation_id": "b"}),
            Message(b"a2", {"correlation_id": "a"}),
        ])  # fmt: skip
    with Consumer.from_config({"stream_buffer": {"topic": topic, "correlation_id": "a"}}) as a:
        assert [m.payload for m in a.poll(max=10, timeout_ms=50)] == [b"a1", b"a2"]
        a.commit()
    with Consumer.from_config({"stream_buffer": {"topic": topic, "correlation_id": "b"}}) as b:
        [first] = b.poll(max=10, timeout_ms=50)
        b.nack()
        [again] = b.poll(max=10, timeout_ms=50)
        b.commit()
    assert first.payload == again.payload == b"b1"


def test_a_message_without_a_correlation_id_fails_and_is_not_retriable():
    writer = Publisher.from_config({"stream_buffer": {"topic": unique("sb")}})
    with writer, pytest.raises(SendError) as raised:
        writer.send(b"orphan")
    assert isinstance(raised.value.failures[0], NonRetryableError)
    assert not raised.value.retriable


def test_an_input_needs_a_correlation_id():
    with pytest.raises(ConfigError, match=r"stream_buffer\.correlation_id"):
        Consumer.from_config({"stream_buffer": {"topic": "t"}})


def test_a_drained_stream_is_forgotten_when_its_reader_closes():
    topic = unique("sb")
    before = len(PARTITIONS)
    with Publisher.from_config({"stream_buffer": {"topic": topic}}) as writer:
        writer.send(Message(b"x", {"correlation_id": "c"}))
    with Consumer.from_config({"stream_buffer": {"topic": topic, "correlation_id": "c"}}) as c:
        c.poll(timeout_ms=50)
        c.commit()
    assert len(PARTITIONS) == before
