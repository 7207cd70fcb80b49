"""The contract of `Publisher` + `Consumer` over every endpoint, through the public API."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import pytest

from mq_bridge import Consumer, Message, Publisher
from tests.mq_bridge.contract.cases import ContractCase
from tests.mq_bridge.contract.sending import sending


def poll_n(consumer: Consumer, count: int, timeout: float = 10.0) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += consumer.poll(max=count - len(got), timeout_ms=200)
    return got


@contextmanager
def published(case: ContractCase, publish: Callable[[Publisher], object]) -> Iterator[Consumer]:
    """A consumer of what `publish` sent: opened after the publisher closed, or, for a
    live case, before it opened (see sending.py)."""
    if not case.live:
        with Publisher.from_config(case.output_config) as publisher:
            publish(publisher)
        with Consumer.from_config(case.input_config) as consumer:
            yield consumer
        return
    with (
        Consumer.from_config(case.input_config) as consumer,
        Publisher.from_config(case.output_config) as publisher,
        sending(case, lambda: publish(publisher)),
    ):
        yield consumer


def test_poll_returns_up_to_max_not_half(case: ContractCase):
    case.require("backlog")
    payloads = [f"m{i}".encode() for i in range(10)]
    with published(case, lambda publisher: publisher.send_batch(payloads)) as consumer:
        got = poll_n(consumer, 10)
        assert [m.payload for m in got] == payloads
        consumer.commit()


def test_commit_acknowledges_and_close_without_commit_gives_messages_back(case: ContractCase):
    case.require("resume")
    case.require("redelivery")
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
    case.require("redelivery")
    with published(case, lambda publisher: publisher.send_batch([b"a", b"b", b"c"])) as consumer:
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
