"""Interop with the peer, mq-bridge 1.2.0, through the real NATS server (JetStream).

The peer runs in its own venv (`scripts/peer-venv.sh mq-bridge`) as a subprocess: it
publishes to a stream that we read, and reads what we publish, each side checking payload,
id and metadata. Both sides use the same durable consumer name, so each also resumes where
the other acknowledged. Without the peer venv the test skips, except under CI=true.
"""

from __future__ import annotations

import json
import time
import uuid
from pathlib import Path

import pytest

from mq_bridge import Consumer, Message, Publisher
from tests import peers
from tests.mq_bridge.endpoints.test_nats import SMALL, delete_stream

ROOT = Path(__file__).resolve().parents[3]

PEER_SCRIPT = r"""
import json, sys, time
from mq_bridge import Consumer, Message, Publisher
mode, config = sys.argv[1], json.loads(sys.argv[2])
if mode == "publish":
    publisher = Publisher.from_config(config)  # the peer's Publisher has no `with`
    for item in json.loads(sys.argv[3]):
        publisher.send(Message(item["payload"].encode(), item["metadata"], id=item["id"]))
else:
    got, deadline = [], time.monotonic() + 20
    with Consumer.from_config(config) as consumer:
        while len(got) < int(sys.argv[3]) and time.monotonic() < deadline:
            for m in consumer.poll(max=10, timeout_ms=500):
                got.append({"id": m.id, "payload": m.payload.decode(), "metadata": m.metadata})
            consumer.commit()
    print(json.dumps(got))
"""


@pytest.fixture(scope="module")
def peer_python() -> str:
    return peers.peer_python("mq-bridge")


def run_peer(python: str, *args: str) -> str:
    return peers.run_peer(python, PEER_SCRIPT, *args)


def sample(tag: str) -> list[dict[str, object]]:
    return [
        {"id": str(uuid.uuid4()), "payload": f"{tag}-{n}", "metadata": {"kind": tag, "n": str(n)}}
        for n in range(3)
    ]


@pytest.mark.nats
def test_peer_to_us_and_us_to_peer(nats_url: str, peer_python: str) -> None:
    stream = f"interop-{uuid.uuid4().hex[:8]}"
    config = {"nats": {"url": nats_url, "stream": stream, "subject": f"{stream}.orders", **SMALL}}
    try:
        theirs = sample("peer")
        run_peer(peer_python, "publish", json.dumps(config), json.dumps(theirs))
        with Consumer.from_config(config) as consumer:
            got = []
            deadline = time.monotonic() + 10
            while len(got) < 3 and time.monotonic() < deadline:
                got += consumer.poll(max=10, timeout_ms=200)
            consumer.commit()
        assert [(m.id, m.payload.decode(), m.metadata) for m in got] == [
            (item["id"], item["payload"], item["metadata"]) for item in theirs
        ]

        ours = sample("ours")
        with Publisher.from_config(config) as publisher:
            for item in ours:
                metadata = item["metadata"]
                assert isinstance(metadata, dict)
                publisher.send(Message(str(item["payload"]).encode(), metadata, id=str(item["id"])))
        received = json.loads(run_peer(peer_python, "consume", json.dumps(config), "3"))
        assert [(m["id"], m["payload"]) for m in received] == [
            (item["id"], item["payload"]) for item in ours
        ]
        for message, item in zip(received, ours):
            # The peer keeps the id header in its metadata; everything we sent is there.
            metadata = item["metadata"]
            assert isinstance(metadata, dict)
            assert message["metadata"] == {
                **metadata,
                "mq_bridge.message_id": uuid.UUID(str(item["id"])).hex,
            }
    finally:
        delete_stream(nats_url, stream)
