"""The `aws` endpoint on the SQS/SNS server (moto, `scripts/services.sh start sqs`).

Helpers here (`sqs_client`, `new_queue`, `delete_queue`, ...) are used by the contract case
and the other test_aws* modules. Every queue and topic is unique per test and deleted.
"""

from __future__ import annotations

import base64
import dataclasses
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from mq_bridge import Consumer, Message, Publisher, Route
from mq_bridge.config.redaction import redact
from mq_bridge.endpoints.kit.connections import ConnectionRegistry
from mq_bridge.errors import (
    ClosedError,
    ConfigError,
    EndpointUnavailableError,
    SendError,
    is_retriable,
)
from mq_bridge.runtime.factory import build_input, build_output, new_context
from tests.helpers import wait_until
from tests.mq_bridge.helpers import read, unique

pytestmark = pytest.mark.sqs

REGION = "us-east-1"
CREDENTIALS = {"access_key": "test", "secret_key": "test"}


def client(endpoint: str, service: str = "sqs") -> Any:
    import boto3

    return boto3.client(
        service,
        endpoint_url=endpoint,
        region_name=REGION,
        aws_access_key_id="test",
        aws_secret_access_key="test",
    )


def sqs_client(endpoint: str) -> Any:
    return client(endpoint, "sqs")


def new_queue(endpoint: str, prefix: str = "test", fifo: bool = False, **attributes: str) -> str:
    """A fresh queue's URL (FIFO with a ``.fifo`` name)."""
    name = f"{prefix}-{uuid.uuid4().hex[:10]}" + (".fifo" if fifo else "")
    if fifo:
        attributes["FifoQueue"] = "true"
    answer = sqs_client(endpoint).create_queue(QueueName=name, Attributes=attributes)
    return str(answer["QueueUrl"])


def delete_queue(endpoint: str, url: str) -> None:
    """Delete the queue; gone already (a restarted server) is fine."""
    try:
        sqs_client(endpoint).delete_queue(QueueUrl=url)
    except Exception:
        pass


def config(endpoint: str, **options: Any) -> dict[str, Any]:
    return {"aws": {"endpoint_url": endpoint, "region": REGION, **CREDENTIALS, **options}}


def raw_messages(endpoint: str, url: str, count: int, timeout: float = 10.0) -> list[dict]:
    """Up to `count` messages as SQS has them (received, then deleted)."""
    sqs = sqs_client(endpoint)
    got: list[dict] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        answer = sqs.receive_message(
            QueueUrl=url,
            MaxNumberOfMessages=min(10, count - len(got)),
            MessageAttributeNames=["All"],
            AttributeNames=["All"],
            WaitTimeSeconds=1,
        )
        for item in answer.get("Messages", []):
            sqs.delete_message(QueueUrl=url, ReceiptHandle=item["ReceiptHandle"])
            got.append(item)
    return got


def poll(consumer: Consumer, count: int, timeout: float = 15.0) -> list[Message]:
    got: list[Message] = []
    deadline = time.monotonic() + timeout
    while len(got) < count and time.monotonic() < deadline:
        got += consumer.poll(max=count - len(got), timeout_ms=500)
    return got


@pytest.fixture
def queue(sqs_endpoint: str) -> Iterator[str]:
    url = new_queue(sqs_endpoint)
    try:
        yield url
    finally:
        delete_queue(sqs_endpoint, url)


# --- the wire ------------------------------------------------------------------------


def test_metadata_travels_as_string_attributes_and_the_id_as_mq_bridge_message_id(
    sqs_endpoint: str, queue: str
) -> None:
    message = Message(b'{"a":1}', {"kind": "order.created", "x": "1"})
    with Publisher.from_config(config(sqs_endpoint, queue_url=queue)) as publisher:
        publisher.send(message)
    (raw,) = raw_messages(sqs_endpoint, queue, 1)
    assert raw["Body"] == '{"a":1}'
    assert raw["MessageAttributes"] == {
        "kind": {"StringValue": "order.created", "DataType": "String"},
        "x": {"StringValue": "1", "DataType": "String"},
        "mq_bridge.message_id": {"StringValue": f"{message.id_int:032x}", "DataType": "String"},
    }


def test_messages_from_other_clients_get_the_sqs_message_id_and_their_attributes(
    sqs_endpoint: str, queue: str
) -> None:
    sqs = sqs_client(endpoint=sqs_endpoint)
    sent = sqs.send_message(
        QueueUrl=queue,
        MessageBody="plain",
        MessageAttributes={
            "s": {"DataType": "String", "StringValue": "v"},
            "n": {"DataType": "Number", "StringValue": "5"},
            "b": {"DataType": "Binary", "BinaryValue": b"\x01"},
            "mqb.src.forged": {"DataType": "String", "StringValue": "x"},
        },
    )
    with Consumer.from_config(config(sqs_endpoint, queue_url=queue)) as consumer:
        (got,) = poll(consumer, 1)
        consumer.commit()
    assert got.payload == b"plain"
    assert got.metadata == {"s": "v", "n": "5"}
    assert got.id == str(uuid.UUID(sent["MessageId"]))


def test_binary_payload_mode_sends_base64_and_every_consumer_decodes_it(
    sqs_endpoint: str, queue: str
) -> None:
    payload = bytes(range(256))
    with Publisher.from_config(
        config(sqs_endpoint, queue_url=queue, binary_payload_mode=True)
    ) as publisher:
        publisher.send(Message(payload, {"k": "v"}))
        publisher.send(Message(payload, {"k": "w"}))
    (raw,) = raw_messages(sqs_endpoint, queue, 1)
    assert base64.b64decode(raw["Body"]) == payload
    assert raw["MessageAttributes"]["aws_binary_encoded"]["StringValue"] == "true"
    with Consumer.from_config(config(sqs_endpoint, queue_url=queue)) as consumer:
        (got,) = poll(consumer, 1)  # binary_payload_mode is off here: decoded all the same
        consumer.commit()
    assert got.payload == payload and got.metadata == {"k": "w"}


def test_source_metadata_names_the_queue_and_the_sqs_message_id(
    sqs_endpoint: str, queue: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MQB_SOURCE_METADATA", "1")
    sent = sqs_client(sqs_endpoint).send_message(QueueUrl=queue, MessageBody="x")
    with Consumer.from_config(config(sqs_endpoint, queue_url=queue)) as consumer:
        (got,) = poll(consumer, 1)
        consumer.commit()
    assert got.metadata == {
        "mqb.src.sqs_queue_url": queue,
        "mqb.src.sqs_message_id": sent["MessageId"],
    }


# --- publishing ----------------------------------------------------------------------


def test_a_big_batch_is_split_in_calls_of_ten_and_everything_arrives_in_order(
    sqs_endpoint: str, queue: str
) -> None:
    sent = [Message(f"m{i}".encode(), {"n": str(i)}) for i in range(37)]
    with Publisher.from_config(config(sqs_endpoint, queue_url=queue)) as publisher:
        publisher.send_batch(sent)
    with Consumer.from_config(config(sqs_endpoint, queue_url=queue)) as consumer:
        got = poll(consumer, 37)
        consumer.commit()
    assert [(m.id, m.payload, m.metadata) for m in got] == [
        (m.id, m.payload, m.metadata) for m in sent
    ]


def test_a_message_sqs_cannot_carry_fails_alone_and_the_rest_of_its_batch_arrives(
    sqs_endpoint: str, queue: str
) -> None:
    """SQS refuses a bad attribute name for the whole call: the endpoint checks first, so
    only that message fails (not retriable), and the others are sent."""
    batch = [Message(f"m{i}".encode()) for i in range(5)]
    batch[2] = Message(b"bad", {"not:valid": "x"})
    with Publisher.from_config(config(sqs_endpoint, queue_url=queue)) as publisher:
        output = build_output(config(sqs_endpoint, queue_url=queue), new_context("t"))
        output.connect()
        try:
            with pytest.raises(SendError) as caught:
                output.send(batch)
        finally:
            output.close()
        del publisher
    assert set(caught.value.failures) == {2}
    assert not is_retriable(caught.value.failures[2])
    assert "not:valid" in str(caught.value.failures[2])
    got = raw_messages(sqs_endpoint, queue, 4)
    assert sorted(m["Body"] for m in got) == ["m0", "m1", "m3", "m4"]


@pytest.mark.parametrize(
    ("message", "why"),
    [
        (Message(b""), "empty message body"),
        (Message(b"\xff\xfe"), "not UTF-8"),
        (Message(b"a\x00b"), "binary_payload_mode"),
        (Message(b"x", {f"k{i}": "v" for i in range(11)}), "at most 10"),
        (Message(b"x", {"AWS.reserved": "v"}), "attribute name"),
        (Message(b"x", {"k": ""}), "is empty"),
    ],
)
def test_messages_sqs_would_refuse_fail_with_a_reason(
    sqs_endpoint: str, queue: str, message: Message, why: str
) -> None:
    publisher = Publisher.from_config(config(sqs_endpoint, queue_url=queue))
    with publisher, pytest.raises(RuntimeError, match=why) as caught:
        publisher.send(message)
    assert not is_retriable(caught.value)


def test_ten_metadata_entries_fit_and_then_the_id_is_the_sqs_message_id(
    sqs_endpoint: str, queue: str
) -> None:
    metadata = {f"k{i}": "v" for i in range(10)}
    with Publisher.from_config(config(sqs_endpoint, queue_url=queue)) as publisher:
        publisher.send(Message(b"full", metadata))
    with Consumer.from_config(config(sqs_endpoint, queue_url=queue)) as consumer:
        (got,) = poll(consumer, 1)
        consumer.commit()
    assert got.metadata == metadata


def test_fifo_queues_get_group_ids_from_metadata_or_the_option_and_dedup_by_message_id(
    sqs_endpoint: str,
) -> None:
    url = new_queue(sqs_endpoint, fifo=True)
    try:
        options = config(sqs_endpoint, queue_url=url, message_group_id="default-group")
        first = Message(b"a", {"message_group_id": "g1"})
        with Publisher.from_config(options) as publisher:
            publisher.send(first)
            publisher.send(Message(b"b"))
            publisher.send(first)  # the same id again: SQS drops the duplicate
        raw = raw_messages(sqs_endpoint, url, 3, timeout=3.0)
        assert [(m["Body"], m["Attributes"]["MessageGroupId"]) for m in raw] == [
            ("a", "g1"),
            ("b", "default-group"),
        ]
        assert raw[0]["Attributes"]["MessageDeduplicationId"] == f"{first.id_int:032x}"
        assert raw[0]["MessageAttributes"]["message_group_id"]["StringValue"] == "g1"
    finally:
        delete_queue(sqs_endpoint, url)


def test_a_fifo_message_without_a_group_fails_naming_the_option(sqs_endpoint: str) -> None:
    url = new_queue(sqs_endpoint, fifo=True)
    try:
        publisher = Publisher.from_config(config(sqs_endpoint, queue_url=url))
        with publisher, pytest.raises(RuntimeError, match="message_group_id"):
            publisher.send(Message(b"x"))
    finally:
        delete_queue(sqs_endpoint, url)


def test_fifo_metadata_comes_back_as_it_was_sent(sqs_endpoint: str) -> None:
    url = new_queue(sqs_endpoint, fifo=True)
    try:
        options = config(sqs_endpoint, queue_url=url, message_group_id="g0")
        with Publisher.from_config(options) as publisher:
            publisher.send(Message(b"x", {"message_group_id": "g7", "k": "v"}))
            publisher.send(Message(b"y", {"k": "w"}, id=5))
        with Consumer.from_config(config(sqs_endpoint, queue_url=url)) as consumer:
            got = poll(consumer, 2)
            consumer.commit()
        assert [m.metadata for m in got] == [{"message_group_id": "g7", "k": "v"}, {"k": "w"}]
    finally:
        delete_queue(sqs_endpoint, url)


def test_the_queue_may_be_named_instead_of_its_url(sqs_endpoint: str, queue: str) -> None:
    name = queue.rsplit("/", 1)[1]
    with Publisher.from_config(config(sqs_endpoint, queue_url=name)) as publisher:
        publisher.send_json({"by": "name"})
    with Consumer.from_config(config(sqs_endpoint, queue_url=name)) as consumer:
        (got,) = poll(consumer, 1)
        consumer.commit()
    assert got.json() == {"by": "name"}


# --- consuming -----------------------------------------------------------------------


def test_a_nacked_batch_is_delivered_again_at_once(sqs_endpoint: str, queue: str) -> None:
    with Publisher.from_config(config(sqs_endpoint, queue_url=queue)) as publisher:
        publisher.send_batch([Message(f"m{i}".encode()) for i in range(3)])
    with Consumer.from_config(config(sqs_endpoint, queue_url=queue)) as consumer:
        first, token = consumer.poll_batch(max=10, timeout_ms=5000)
        assert token is not None
        consumer.nack(token)
        again = poll(consumer, len(first), timeout=5.0)
        consumer.commit()
    assert sorted(m.payload for m in again) == sorted(m.payload for m in first)


def test_closing_gives_back_what_was_not_acked(sqs_endpoint: str, queue: str) -> None:
    with Publisher.from_config(config(sqs_endpoint, queue_url=queue)) as publisher:
        publisher.send_batch([Message(f"m{i}".encode()) for i in range(4)])
    source = build_input(config(sqs_endpoint, queue_url=queue), new_context("t"))
    source.connect()
    received = 0
    deadline = time.monotonic() + 15
    while received < 4 and time.monotonic() < deadline:
        received += len(source.receive(4 - received, 0.5))  # never acked nor nacked
    source.close()
    assert received == 4
    with Consumer.from_config(config(sqs_endpoint, queue_url=queue)) as consumer:
        again = poll(consumer, 4, timeout=5.0)  # far less than the 30 s visibility timeout
        consumer.commit()
    assert sorted(m.payload for m in again) == [b"m0", b"m1", b"m2", b"m3"]


def test_receive_returns_after_its_timeout_while_sqs_long_polls(
    sqs_endpoint: str, queue: str
) -> None:
    source = build_input(config(sqs_endpoint, queue_url=queue), new_context("t"))
    source.connect()
    try:
        started = time.monotonic()
        assert not source.receive(10, 0.3)
        assert time.monotonic() - started < 5  # not the 20 s of the long poll
    finally:
        source.close()


def test_a_long_poll_delivers_what_arrives_while_it_waits(sqs_endpoint: str, queue: str) -> None:
    source = build_input(config(sqs_endpoint, queue_url=queue), new_context("t"))
    source.connect()
    try:
        assert not source.receive(10, 0.2)  # a long poll is now open
        with Publisher.from_config(config(sqs_endpoint, queue_url=queue)) as publisher:
            publisher.send_json({"late": True})
        batch = source.receive(10, 10.0)
        assert [m.json() for m in batch.messages] == [{"late": True}]
        source.ack(batch)
    finally:
        source.close()


def test_status_reports_the_queue_backlog(sqs_endpoint: str, queue: str) -> None:
    with Publisher.from_config(config(sqs_endpoint, queue_url=queue)) as publisher:
        publisher.send_batch([Message(b"x") for _ in range(3)])
    with Consumer.from_config(config(sqs_endpoint, queue_url=queue)) as consumer:
        status = consumer.status()
    assert status["healthy"] is True and status["pending"] == 3
    assert status["details"]["ApproximateNumberOfMessages"] == "3"


def test_a_route_moves_messages_from_sqs_to_sqs(sqs_endpoint: str, queue: str) -> None:
    sink_queue = new_queue(sqs_endpoint, "sink")
    try:
        route = Route.from_config(
            {
                "input": config(sqs_endpoint, queue_url=queue),
                "output": config(sqs_endpoint, queue_url=sink_queue),
            }
        ).with_handler(lambda message: message.with_metadata(seen="yes"))
        sent = [Message(f"m{i}".encode(), {"n": str(i)}) for i in range(15)]
        with route, Publisher.from_config(config(sqs_endpoint, queue_url=queue)) as publisher:
            publisher.send_batch(sent)
            with Consumer.from_config(config(sqs_endpoint, queue_url=sink_queue)) as consumer:
                got = poll(consumer, 15)
                consumer.commit()
        assert {m.id for m in got} == {m.id for m in sent}
        assert all(m.metadata["seen"] == "yes" for m in got)
    finally:
        delete_queue(sqs_endpoint, sink_queue)


def test_a_route_from_sqs_delivers_to_memory(sqs_endpoint: str, queue: str) -> None:
    sink = unique("aws-out")
    route = Route.from_config(
        {
            "input": config(sqs_endpoint, queue_url=queue),
            "output": {"memory": {"topic": sink, "capacity": 0}},
        }
    )
    with route, Publisher.from_config(config(sqs_endpoint, queue_url=queue)) as publisher:
        publisher.send_batch([Message.from_json({"n": n}) for n in range(12)])
        got = read(sink, 12, 20.0)
    assert sorted(m.json()["n"] for m in got) == list(range(12))


# --- connections and config ----------------------------------------------------------


def test_an_unreachable_server_fails_start_within_seconds() -> None:
    options = config("http://127.0.0.1:1", queue_url="http://127.0.0.1:1/123456789012/q")
    started = time.monotonic()
    with pytest.raises(EndpointUnavailableError):
        Publisher.from_config(options)
    with pytest.raises(EndpointUnavailableError):
        Consumer.from_config(options)
    assert time.monotonic() - started < 30


def test_a_missing_queue_fails_start_and_says_so(sqs_endpoint: str) -> None:
    missing = f"{sqs_endpoint}/123456789012/missing-{uuid.uuid4().hex[:8]}"
    with pytest.raises(EndpointUnavailableError, match="does not exist"):
        Consumer.from_config(config(sqs_endpoint, queue_url=missing))


def test_a_missing_topic_fails_start_and_says_so(sqs_endpoint: str) -> None:
    arn = f"arn:aws:sns:{REGION}:123456789012:missing-{uuid.uuid4().hex[:8]}"
    with pytest.raises(EndpointUnavailableError, match=r"does not exist|NotFound"):
        Publisher.from_config(config(sqs_endpoint, topic_arn=arn))


@pytest.mark.parametrize(
    ("options", "path"),
    [
        ({"queue_url": "q", "access_key": "a"}, "aws.secret_key"),
        ({"queue_url": "q", "session_token": "t"}, "aws.session_token"),
        ({"queue_url": "q", "max_messages": 11}, "aws.max_messages"),
        ({"queue_url": "q", "wait_time_seconds": 21}, "aws.wait_time_seconds"),
        ({"queue_url": "q", "endpoint_url": "localhost:5000"}, "aws.endpoint_url"),
        ({"topic_arn": "orders"}, "aws.topic_arn"),
        ({"queue_url": "q", "visibility": 3}, "aws"),
    ],
)
def test_bad_options_are_config_errors_naming_the_option(options: dict, path: str) -> None:
    with pytest.raises(ConfigError) as caught:
        Publisher.from_config({"aws": options})
    assert path in str(caught.value)


def test_an_input_needs_a_queue_and_an_output_a_queue_or_topic(sqs_endpoint: str) -> None:
    arn = f"arn:aws:sns:{REGION}:123456789012:t"
    with pytest.raises(ConfigError, match="queue_url"):
        Consumer.from_config(config(sqs_endpoint, topic_arn=arn))
    with pytest.raises(ConfigError, match="queue_url"):
        Publisher.from_config(config(sqs_endpoint))


def test_nulls_mean_the_defaults_as_in_the_peers_schema(sqs_endpoint: str, queue: str) -> None:
    options = config(sqs_endpoint, queue_url=queue, max_messages=None, wait_time_seconds=None)
    with Consumer.from_config(options) as consumer:
        assert consumer.poll(max=1, timeout_ms=100) == []


def test_credentials_are_secrets(sqs_endpoint: str) -> None:
    from mq_bridge.endpoints.aws.options import AwsOptions

    options = config(sqs_endpoint, queue_url="q", session_token="tok-123")
    shown = str(redact(options))
    assert "test" not in shown.replace("test_", "") and "tok-123" not in shown
    parsed = AwsOptions.model_validate(options["aws"])
    assert "tok-123" not in repr(parsed) and "secret_key" not in repr(parsed)


def test_shared_endpoints_use_one_client_per_settings(sqs_endpoint: str, queue: str) -> None:
    context = dataclasses.replace(new_context("t"), connections=ConnectionRegistry())
    first = build_output(config(sqs_endpoint, queue_url=queue), context)
    # A closed input's reader keeps the client until its long poll (here 1 s) ends.
    second = build_input(config(sqs_endpoint, queue_url=queue, wait_time_seconds=1), context)
    private = build_output(config(sqs_endpoint, queue_url=queue, shared=False), context)
    for endpoint in (first, second, private):
        endpoint.connect()
    try:
        assert len(context.connections) == 1
    finally:
        for endpoint in (first, second, private):
            endpoint.close()
    assert wait_until(lambda: len(context.connections) == 0, 10.0)


def test_closed_endpoints_raise_closed_errors(sqs_endpoint: str, queue: str) -> None:
    output = build_output(config(sqs_endpoint, queue_url=queue), new_context("t"))
    output.connect()
    output.close()
    with pytest.raises(ClosedError):
        output.send([Message(b"x")])


def test_messages_that_waited_too_long_in_the_buffer_are_given_back_not_handed_out(
    sqs_endpoint: str,
) -> None:
    """A long poll that outlives its receive buffers what it brings; handed out later, a
    message whose visibility timeout has half passed could be delivered to another consumer
    while this one works on it, so it is given back (visible again) instead."""
    url = new_queue(sqs_endpoint, VisibilityTimeout="2")
    source = build_input(config(sqs_endpoint, queue_url=url, wait_time_seconds=5), new_context("t"))
    source.connect()
    try:
        assert not source.receive(10, 0.1)  # a long poll stays open
        with Publisher.from_config(config(sqs_endpoint, queue_url=url)) as publisher:
            publisher.send_json({"late": True})
        time.sleep(1.5)  # it arrived in the buffer and went stale there
        assert not source.receive(10, 0.1)
        batch = source.receive(10, 10.0)  # given back at once, so received again now
        assert [m.json() for m in batch.messages] == [{"late": True}]
        source.ack(batch)
    finally:
        source.close()
        delete_queue(sqs_endpoint, url)
