"""Interop with the peer, mq-bridge 1.2.0, through the real Kafka-protocol server.

The peer runs in its own venv (scripts/peer-venv.sh mq-bridge), in a subprocess, with the
same config: it publishes to a topic that our Consumer reads, and reads a topic that our
Publisher wrote (both in one consumer group, from the start). Payload, id and metadata must
survive both ways. (mq-bridge 1.2.0 writes the id as the record key, 16 bytes, and as the
``mq_bridge.message_id`` header, 32 hex digits; metadata as headers.)
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator

import pytest

from mq_bridge import Consumer, Message, Publisher
from tests import peers
from tests.mq_bridge.endpoints.test_kafka import delete_topic, kafka_config

pytestmark = [pytest.mark.kafka, pytest.mark.slow]

PEER_SCRIPT = """
import json, sys
from mq_bridge import Consumer, Publisher
mode, config, count = sys.argv[1], json.loads(sys.argv[2]), int(sys.argv[3])
if mode == "publish":
    publisher = Publisher.from_config(config)
    for n in range(count):
        message_id = f"0190d3a6-7b1c-7e0a-9c51-{n:012x}"
        publisher.send_json({"n": n}, {"kind": "peer", "n": str(n)}, message_id)
    print(json.dumps({"sent": count}))
else:
    consumer = Consumer.from_config(config)
    got = []
    for _ in range(150):
        for m in consumer.poll(max=count - len(got), timeout_ms=200):
            meta = dict(m.metadata)
            got.append({"id": str(m.id), "payload": m.payload.decode(), "metadata": meta})
        if len(got) >= count:
            break
    consumer.commit()
    print(json.dumps(got))
"""


@pytest.fixture(scope="module")
def peer_python() -> str:
    return peers.peer_python("mq-bridge")


def run_peer(python: str, *arguments: str) -> object:
    output = peers.run_peer(python, PEER_SCRIPT, *arguments)
    return json.loads(output.strip().splitlines()[-1])


@pytest.fixture
def topic(kafka_bootstrap: str) -> Iterator[str]:
    name = f"test-interop-{uuid.uuid4().hex[:10]}"
    try:
        yield name
    finally:
        delete_topic(kafka_bootstrap, name)


def test_peer_publishes_and_we_consume(peer_python: str, kafka_bootstrap: str, topic: str) -> None:
    config = kafka_config(kafka_bootstrap, topic)
    assert run_peer(peer_python, "publish", json.dumps(config), "5") == {"sent": 5}
    got: list[Message] = []
    with Consumer.from_config(kafka_config(kafka_bootstrap, topic, group_id=topic)) as consumer:
        deadline = time.monotonic() + 20
        while len(got) < 5 and time.monotonic() < deadline:
            got += consumer.poll(max=5, timeout_ms=200)
        consumer.commit()
    assert [m.json() for m in got] == [{"n": n} for n in range(5)]
    assert [m.id for m in got] == [f"0190d3a6-7b1c-7e0a-9c51-{n:012x}" for n in range(5)]
    assert [m.metadata for m in got] == [{"kind": "peer", "n": str(n)} for n in range(5)]


def test_we_publish_and_the_peer_consumes(
    peer_python: str, kafka_bootstrap: str, topic: str
) -> None:
    sent = [Message.from_json({"n": n}, {"kind": "ours", "n": str(n)}) for n in range(5)]
    with Publisher.from_config(kafka_config(kafka_bootstrap, topic)) as publisher:
        publisher.send_batch(sent[:3])
        for message in sent[3:]:
            publisher.send(message)
    reader = kafka_config(kafka_bootstrap, topic, group_id=topic)
    got = run_peer(peer_python, "consume", json.dumps(reader), "5")
    assert isinstance(got, list)
    for record in got:  # a peer quirk: its consumer keeps the id header in the metadata too
        assert record["metadata"].pop("mq_bridge.message_id") == record["id"].replace("-", "")
    assert got == [
        {"id": m.id, "payload": m.payload.decode(), "metadata": m.metadata} for m in sent
    ]
