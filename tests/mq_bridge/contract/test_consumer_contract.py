"""The contract of `Publisher` + `Consumer` over every endpoint, through the public API."""

from __future__ import annotations

import time

import pytest

from mq_bridge import Consumer, Message, Publisher
from tests.mq_bridge.contract.cases import ContractCase


def poll_n(consumer: Consumer, count: int, timeout: float = 10.0) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += consumer.poll(max=count - len(got), timeout_ms=200)
    return got


def test_poll_returns_up_to_max_not_half(case: ContractCase):
    with Publisher.from_config(case.output_config) as publisher:
        publisher.send_batch([f"m{i}".encode() for i in range(10)])
    with Consumer.from_config(case.input_config) as consumer:
        got = poll_n(consumer, 10)
        assert [m.payload for m in got] == [f"m{i}".encode() for i in range(10)]
        consumer.commit()


def test_commit_acknowledges_and_close_without_commit_gives_messages_back(case: ContractCase):
    if not case.redelivers_on_nack:
        pytest.skip("redelivery happens on the next run for this endpoint")
    with Publisher.from_config(case.output_config) as publisher:
        for i in range(4):
            publisher.send_json({"i": i})
    with Consumer.from_config(case.input_config) as consumer:
        assert [m.json()["i"] for m in poll_n(consumer, 2)] == [0, 1]
        consumer.commit()
        assert [m.json()["i"] for m in poll_n(consumer, 2)] == [2, 3]
    with Consumer.from_config(case.input_config) as consumer:
        if case.resumes_after_acks:
            assert [m.json()["i"] for m in poll_n(consumer, 2)] == [2, 3]
        else:  # no progress is kept across consumers: a new one starts over
            assert [m.json()["i"] for m in poll_n(consumer, 4)] == [0, 1, 2, 3]
        consumer.commit()


def test_poll_batch_tokens_ack_and_nack(case: ContractCase):
    with Publisher.from_config(case.output_config) as publisher:
        publisher.send_batch([b"a", b"b", b"c"])
    with Consumer.from_config(case.input_config) as consumer:
        first, _ = consumer.poll_batch(max=1, timeout_ms=5000)
        assert [m.payload for m in first] == [b"a"]
        consumer.nack()  # every outstanding batch: "a" comes back first
        messages, token = consumer.poll_batch(max=3, timeout_ms=5000)
        assert token is not None and messages
        consumer.ack(token)
        with pytest.raises(ValueError, match="unknown batch token"):
            consumer.ack(token)
        rest = poll_n(consumer, 3 - len(messages))
        assert [m.payload for m in messages + rest] == [b"a", b"b", b"c"]
        consumer.commit()
        assert consumer.poll_batch(max=1, timeout_ms=10) == ([], None)


def test_status_shape_and_closed_consumer_raises(case: ContractCase):
    consumer = Consumer.from_config(case.input_config)
    status = consumer.status()
    assert set(status) == {"healthy", "target", "pending", "capacity", "error", "details"}
    consumer.close()
    consumer.close()
    for call in (lambda: consumer.poll(max=1, timeout_ms=1), consumer.status):
        with pytest.raises(RuntimeError, match="closed"):
            call()
    consumer.commit()  # nothing left to commit after close: a no-op, as in mq-bridge-py
