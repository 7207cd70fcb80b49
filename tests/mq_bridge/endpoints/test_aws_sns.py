"""The `aws` output to SNS topics, fanned out to SQS queues, on moto."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from mq_bridge import Consumer, Message, Publisher
from tests.mq_bridge.endpoints.test_aws import (
    client,
    config,
    delete_queue,
    new_queue,
    poll,
    raw_messages,
)

pytestmark = pytest.mark.sqs


class FanOut:
    """A topic with two queues subscribed to it (raw delivery unless told otherwise)."""

    def __init__(self, endpoint: str, raw: bool = True) -> None:
        self.endpoint = endpoint
        self.sns = client(endpoint, "sns")
        sqs = client(endpoint, "sqs")
        self.topic = self.sns.create_topic(Name=f"test-{uuid.uuid4().hex[:10]}")["TopicArn"]
        self.queues = [new_queue(endpoint, "fanout") for _ in range(2)]
        for url in self.queues:
            arn = sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["QueueArn"])
            attributes = {"RawMessageDelivery": "true"} if raw else {}
            self.sns.subscribe(
                TopicArn=self.topic,
                Protocol="sqs",
                Endpoint=arn["Attributes"]["QueueArn"],
                Attributes=attributes,
            )

    def delete(self) -> None:
        self.sns.delete_topic(TopicArn=self.topic)
        for url in self.queues:
            delete_queue(self.endpoint, url)


@pytest.fixture
def fanout(sqs_endpoint: str) -> Iterator[FanOut]:
    topic = FanOut(sqs_endpoint)
    try:
        yield topic
    finally:
        topic.delete()


def consume(endpoint: str, url: str, count: int) -> list[Message]:
    with Consumer.from_config(config(endpoint, queue_url=url)) as consumer:
        got = poll(consumer, count)
        consumer.commit()
    return got


def test_a_message_published_to_a_topic_reaches_every_subscribed_queue_whole(
    sqs_endpoint: str, fanout: FanOut
) -> None:
    sent = Message(b'{"order": 1}', {"kind": "order.created"})
    with Publisher.from_config(config(sqs_endpoint, topic_arn=fanout.topic)) as publisher:
        publisher.send(sent)
    for url in fanout.queues:
        (got,) = consume(sqs_endpoint, url, 1)
        assert (got.id, got.payload, got.metadata) == (sent.id, sent.payload, sent.metadata)


def test_a_big_batch_is_published_in_calls_of_ten_and_all_of_it_fans_out(
    sqs_endpoint: str, fanout: FanOut
) -> None:
    sent = [Message(f"m{i}".encode(), {"n": str(i)}) for i in range(23)]
    with Publisher.from_config(config(sqs_endpoint, topic_arn=fanout.topic)) as publisher:
        publisher.send_batch(sent)
    for url in fanout.queues:
        got = consume(sqs_endpoint, url, 23)
        assert sorted(m.id for m in got) == sorted(m.id for m in sent)


def test_binary_payloads_survive_the_topic(sqs_endpoint: str, fanout: FanOut) -> None:
    options = config(sqs_endpoint, topic_arn=fanout.topic, binary_payload_mode=True)
    with Publisher.from_config(options) as publisher:
        publisher.send(Message(b"\x00\xff\x10"))
    (got,) = consume(sqs_endpoint, fanout.queues[0], 1)
    assert got.payload == b"\x00\xff\x10"


def test_with_a_queue_and_a_topic_a_message_goes_to_both(sqs_endpoint: str, fanout: FanOut) -> None:
    direct = new_queue(sqs_endpoint, "direct")
    try:
        options = config(sqs_endpoint, queue_url=direct, topic_arn=fanout.topic)
        with Publisher.from_config(options) as publisher:
            publisher.send_json({"to": "both"})
        for url in (direct, *fanout.queues):
            (got,) = consume(sqs_endpoint, url, 1)
            assert got.json() == {"to": "both"}
    finally:
        delete_queue(sqs_endpoint, direct)


def test_without_raw_delivery_the_queue_holds_snss_envelope_as_the_peer_reads_it(
    sqs_endpoint: str,
) -> None:
    """SNS wraps the message in its JSON notification; the consumer hands that over as the
    payload, as mq-bridge does (the message and its attributes are inside)."""
    topic = FanOut(sqs_endpoint, raw=False)
    try:
        with Publisher.from_config(config(sqs_endpoint, topic_arn=topic.topic)) as publisher:
            publisher.send(Message(b"inner", {"k": "v"}))
        (raw,) = raw_messages(sqs_endpoint, topic.queues[0], 1)
        envelope: dict[str, Any] = json.loads(raw["Body"])
        assert envelope["Type"] == "Notification" and envelope["Message"] == "inner"
        assert envelope["MessageAttributes"]["k"] == {"Type": "String", "Value": "v"}
    finally:
        topic.delete()


def test_fifo_topics_get_group_and_deduplication_ids(sqs_endpoint: str) -> None:
    sns, sqs = client(sqs_endpoint, "sns"), client(sqs_endpoint, "sqs")
    name = f"test-{uuid.uuid4().hex[:10]}.fifo"
    topic = sns.create_topic(Name=name, Attributes={"FifoTopic": "true"})["TopicArn"]
    queue = new_queue(sqs_endpoint, "fifo-sub", fifo=True)
    try:
        arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])
        sns.subscribe(
            TopicArn=topic,
            Protocol="sqs",
            Endpoint=arn["Attributes"]["QueueArn"],
            Attributes={"RawMessageDelivery": "true"},
        )
        sent = [Message(f"m{i}".encode(), {"message_group_id": "g"}) for i in range(3)]
        with Publisher.from_config(config(sqs_endpoint, topic_arn=topic)) as publisher:
            publisher.send_batch(sent)
            publisher.send(sent[0])  # the same id again: deduplicated
        got = consume(sqs_endpoint, queue, 3)
        assert [m.id for m in got] == [m.id for m in sent]
        assert raw_messages(sqs_endpoint, queue, 1, timeout=2.0) == []
    finally:
        sns.delete_topic(TopicArn=topic)
        delete_queue(sqs_endpoint, queue)
