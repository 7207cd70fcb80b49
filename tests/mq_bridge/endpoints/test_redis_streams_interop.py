"""Interop with the peer, mq-bridge 1.2.0, through the real Redis.

The peer runs in its own venv (scripts/peer-venv.sh mq-bridge), in a subprocess: it
publishes to a stream that our Consumer reads, and reads a stream that our Publisher wrote.
Payload, id and metadata must survive both ways. (mq-bridge 1.2.0 writes the fields
``payload``, ``mqb_message_id`` as 32 hex digits and one field per metadata entry; it reads
an id given as 32 hex digits.)
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from mq_bridge import Consumer, Message, Publisher
from tests import peers

pytestmark = [pytest.mark.redis, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[3]

PEER_SCRIPT = """
import json, sys
from mq_bridge import Consumer, Publisher
mode, url, stream, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
config = {"redis_streams": {"url": url, "stream": stream, "read_from_start": True}}
if mode == "publish":
    publisher = Publisher.from_config(config)
    for n in range(count):
        message_id = f"0190d3a6-7b1c-7e0a-9c51-{n:012x}"
        publisher.send_json({"n": n}, {"kind": "peer", "n": str(n)}, message_id)
    print(json.dumps({"sent": count}))
else:
    consumer = Consumer.from_config(config)
    got = []
    for _ in range(100):
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
    return json.loads(peers.run_peer(python, PEER_SCRIPT, *arguments).strip().splitlines()[-1])


@pytest.fixture
def stream(redis_url: str) -> Iterator[str]:
    name = f"test-interop-{uuid.uuid4().hex[:10]}"
    yield name
    with redis.Redis.from_url(redis_url, socket_timeout=5) as client:
        client.delete(name)


def test_peer_publishes_and_we_consume(peer_python: str, redis_url: str, stream: str) -> None:
    assert run_peer(peer_python, "publish", redis_url, stream, "5") == {"sent": 5}
    got: list[Message] = []
    config = {"redis_streams": {"url": redis_url, "stream": stream, "read_from_start": True}}
    with Consumer.from_config(config) as consumer:
        deadline = time.monotonic() + 10
        while len(got) < 5 and time.monotonic() < deadline:
            got += consumer.poll(max=5, timeout_ms=200)
        consumer.commit()
    assert [m.json() for m in got] == [{"n": n} for n in range(5)]
    assert [m.id for m in got] == [f"0190d3a6-7b1c-7e0a-9c51-{n:012x}" for n in range(5)]
    assert [m.metadata for m in got] == [{"kind": "peer", "n": str(n)} for n in range(5)]


def test_we_publish_and_the_peer_consumes(peer_python: str, redis_url: str, stream: str) -> None:
    sent = [Message.from_json({"n": n}, {"kind": "ours", "n": str(n)}) for n in range(5)]
    with Publisher.from_config({"redis_streams": {"url": redis_url, "stream": stream}}) as p:
        p.send_batch(sent[:3])
        for message in sent[3:]:
            p.send(message)
    got = run_peer(peer_python, "consume", redis_url, stream, "5")
    assert got == [
        {"id": m.id, "payload": m.payload.decode(), "metadata": m.metadata} for m in sent
    ]
