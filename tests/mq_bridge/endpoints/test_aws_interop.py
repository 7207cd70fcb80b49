"""Interop with the peers (mq-bridge-py 0.3.2 and mq-bridge 1.2.0) through moto's SQS.

Each peer runs in its own venv, in a subprocess, with the same `aws` config: it publishes
to a queue our Consumer reads, and reads a queue our Publisher wrote. Payload and metadata
survive both ways; binary payloads too. Ids: the peers send none (they write no id
attribute), so we read the SQS MessageId as the id, as mq-bridge 1.2.0 does; ours travel as
the attribute ``mq_bridge.message_id``, which the peers hand over as plain metadata.
"""

from __future__ import annotations

import base64
import json
import uuid
from collections.abc import Iterator

import pytest

from mq_bridge import Consumer, Message, Publisher
from tests import peers
from tests.mq_bridge.endpoints.test_aws import (
    config,
    delete_queue,
    new_queue,
    poll,
)

pytestmark = [pytest.mark.sqs, pytest.mark.slow]

PEER_SCRIPT = """
import base64, json, sys
from mq_bridge import Consumer, Publisher
mode, endpoint, url, count, binary = sys.argv[1:6]
count = int(count)
config = {"aws": {"queue_url": url, "endpoint_url": endpoint, "region": "us-east-1",
                  "access_key": "test", "secret_key": "test",
                  "binary_payload_mode": binary == "binary"}}
if mode == "publish":
    publisher = Publisher.from_config(config)
    for n in range(count):
        if binary == "binary":
            publisher.send(bytes([0, 255, n]), {"kind": "peer", "n": str(n)})
        else:
            publisher.send_json({"n": n}, {"kind": "peer", "n": str(n)})
    print(json.dumps({"sent": count}))
else:
    consumer = Consumer.from_config(config)
    got = []
    for _ in range(50):
        for m in consumer.poll(max=count - len(got), timeout_ms=500):
            got.append({"payload": base64.b64encode(m.payload).decode(),
                        "metadata": dict(m.metadata)})
        if len(got) >= count:
            break
    consumer.commit()
    print(json.dumps(got))
"""

PEERS = ["mq-bridge-py", "mq-bridge"]


def run_peer(name: str, *arguments: str) -> object:
    python = peers.peer_python(name)
    output = peers.run_peer(python, PEER_SCRIPT, *arguments)
    return json.loads(output.strip().splitlines()[-1])


@pytest.fixture
def queue(sqs_endpoint: str) -> Iterator[str]:
    url = new_queue(sqs_endpoint, "interop")
    try:
        yield url
    finally:
        delete_queue(sqs_endpoint, url)


@pytest.mark.parametrize("peer", PEERS)
def test_the_peer_publishes_and_we_consume(peer: str, sqs_endpoint: str, queue: str) -> None:
    assert run_peer(peer, "publish", sqs_endpoint, queue, "5", "text") == {"sent": 5}
    with Consumer.from_config(config(sqs_endpoint, queue_url=queue)) as consumer:
        got = poll(consumer, 5)
        consumer.commit()
    assert sorted((m.json()["n"], m.metadata["n"], m.metadata["kind"]) for m in got) == [
        (n, str(n), "peer") for n in range(5)
    ]
    assert len({m.id for m in got}) == 5


@pytest.mark.parametrize("peer", PEERS)
def test_we_publish_and_the_peer_consumes(peer: str, sqs_endpoint: str, queue: str) -> None:
    sent = [Message.from_json({"n": n}, {"kind": "ours", "n": str(n)}) for n in range(5)]
    with Publisher.from_config(config(sqs_endpoint, queue_url=queue)) as publisher:
        publisher.send_batch(sent)
    got = run_peer(peer, "consume", sqs_endpoint, queue, "5", "text")
    assert isinstance(got, list)
    by_n = {json.loads(base64.b64decode(item["payload"]))["n"]: item for item in got}
    assert sorted(by_n) == list(range(5))
    for message in sent:
        metadata = by_n[message.json()["n"]]["metadata"]
        assert metadata.pop("mq_bridge.message_id") == f"{message.id_int:032x}"
        assert metadata == message.metadata


@pytest.mark.parametrize("peer", PEERS)
def test_binary_payloads_written_by_the_peer_are_decoded(
    peer: str, sqs_endpoint: str, queue: str
) -> None:
    assert run_peer(peer, "publish", sqs_endpoint, queue, "3", "binary") == {"sent": 3}
    with Consumer.from_config(config(sqs_endpoint, queue_url=queue)) as consumer:
        got = poll(consumer, 3)
        consumer.commit()
    assert sorted(m.payload for m in got) == [bytes([0, 255, n]) for n in range(3)]
    assert all("aws_binary_encoded" not in m.metadata for m in got)


def test_binary_payloads_we_write_are_decoded_by_mq_bridge_1_2(
    sqs_endpoint: str, queue: str
) -> None:
    """(mq-bridge-py 0.3.2 hands the base64 text over undecoded: its bug, not the wire's.)"""
    options = config(sqs_endpoint, queue_url=queue, binary_payload_mode=True)
    with Publisher.from_config(options) as publisher:
        publisher.send(Message(bytes([0, 255, 7]), {"k": "v"}))
    (item,) = run_peer("mq-bridge", "consume", sqs_endpoint, queue, "1", "binary")  # type: ignore[misc]
    assert base64.b64decode(item["payload"]) == bytes([0, 255, 7])
    assert {k: v for k, v in item["metadata"].items() if k != "mq_bridge.message_id"} == {"k": "v"}


def test_a_peer_config_runs_unchanged(sqs_endpoint: str, queue: str) -> None:
    """Every option of the peer's AwsConfig, nulls included, is accepted."""
    peer_config = {
        "aws": {
            "queue_url": queue,
            "topic_arn": None,
            "region": "us-east-1",
            "endpoint_url": sqs_endpoint,
            "access_key": "test",
            "secret_key": "test",
            "session_token": None,
            "max_messages": None,
            "wait_time_seconds": None,
            "binary_payload_mode": False,
        }
    }
    with Publisher.from_config(peer_config) as publisher:
        publisher.send_json({"ok": True})
    with Consumer.from_config(peer_config) as consumer:
        (got,) = poll(consumer, 1)
        consumer.commit()
    assert got.json() == {"ok": True}
    assert uuid.UUID(got.id)
