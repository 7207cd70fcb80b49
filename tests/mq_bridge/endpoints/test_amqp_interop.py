"""Interop with the peer, mq-bridge 1.2.0 (its own venv), through the local RabbitMQ.

The peer runs a small script in a subprocess: it publishes to a queue our consumer reads,
and consumes a queue our publisher wrote. Both sides put the id in the AMQP ``message_id``
property and metadata in headers, so payload, id and metadata survive both ways.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from mq_bridge import Consumer, Message, Publisher
from tests import peers
from tests.mq_bridge.endpoints.test_amqp import delete_queue

pytestmark = pytest.mark.amqp

ROOT = Path(__file__).resolve().parents[3]

SENT = [
    Message(b'{"order": 1}', {"kind": "order.created", "tenant": "t1"}),
    Message(b"\xff\x00binary", {"kind": "blob", "correlation_id": "c-7"}),
    Message("ünïcode text".encode(), {"kind": "text"}),
]


@pytest.fixture(scope="module")
def peer_python() -> str:
    return peers.peer_python("mq-bridge")


@pytest.fixture
def queue(amqp_url: str) -> Iterator[str]:
    name = f"test-amqp-interop-{uuid.uuid4().hex[:8]}"
    yield name
    delete_queue(amqp_url, name)


def peer_url(url: str) -> str:
    """The peer (lapin) reads a trailing ``/`` as the empty vhost: name ``/`` explicitly."""
    return url.rstrip("/") + "/%2f"


def test_the_peer_reads_what_we_publish(
    peer_python: str, tmp_path: Path, amqp_url: str, queue: str
) -> None:
    with Publisher.from_config({"amqp": {"url": amqp_url, "queue": queue}}) as publisher:
        publisher.send_batch(SENT)
    config = json.dumps({"amqp": {"url": peer_url(amqp_url), "queue": queue}})
    got: list[dict[str, Any]] = json.loads(
        peers.run_peer(peer_python, peers.CLIENT_SCRIPT, "consume", config, "3")
    )
    assert [bytes.fromhex(m["payload"]) for m in got] == [m.payload for m in SENT]
    assert [m["id"] for m in got] == [m.id for m in SENT]
    # the peer adds its own `amqp_message_id`; everything we sent is there
    for message, sent in zip(got, SENT, strict=True):
        assert message["metadata"].items() >= sent.metadata.items()


def test_we_read_what_the_peer_publishes(
    peer_python: str, tmp_path: Path, amqp_url: str, queue: str
) -> None:
    sent = [Message(m.payload, m.metadata, id=str(uuid.uuid4())) for m in SENT]
    config = json.dumps({"amqp": {"url": peer_url(amqp_url), "queue": queue}})
    peers.run_peer(
        peer_python, peers.CLIENT_SCRIPT, "publish", config, json.dumps(peers.as_wire(sent))
    )
    with Consumer.from_config({"amqp": {"url": amqp_url, "queue": queue}}) as consumer:
        got: list[Message] = []
        for _ in range(50):
            got += consumer.poll(max=10, timeout_ms=200)
            if len(got) >= len(sent):
                break
        consumer.commit()
    assert [(m.payload, m.id, m.metadata) for m in got] == [
        (m.payload, m.id, m.metadata) for m in sent
    ]


# --- subscribe_mode: the seed's broadcast, across implementations -----------------------

SUBSCRIBER_SCRIPT = r"""
import json, sys
from mq_bridge import Consumer
config, count = json.loads(sys.argv[1]), int(sys.argv[2])
subscribers = [Consumer.from_config(config) for _ in range(2)]
for subscriber in subscribers:
    subscriber.poll(max=1, timeout_ms=300)  # bound to the exchange from here on
print("ready", flush=True)
got = []
for subscriber in subscribers:
    payloads = []
    for _ in range(100):
        payloads += [m.payload.decode() for m in subscriber.poll(max=10, timeout_ms=100)]
        subscriber.commit()
        if len(payloads) >= count:
            break
    got.append(payloads)
print(json.dumps(got), flush=True)
"""


def broadcast_config(url: str, name: str) -> dict[str, Any]:
    return {"amqp": {"url": url, "queue": name, "subscribe_mode": True}}


def test_peer_subscribers_get_what_our_subscribe_mode_publisher_sends(
    peer_python: str, amqp_url: str, queue: str
) -> None:
    """Both name the fanout exchange after `queue`: the peer's subscribers bind it, our
    publisher of the same config publishes to it (it used to send to a queue)."""
    import subprocess

    from tests.mq_bridge.endpoints.test_amqp import delete_exchange

    config = json.dumps(broadcast_config(peer_url(amqp_url), queue))
    subscriber = subprocess.Popen(
        [peer_python, "-c", SUBSCRIBER_SCRIPT, config, "3"],
        stdout=subprocess.PIPE,
        text=True,
        env=peers.peer_environment(),
    )
    try:
        assert subscriber.stdout is not None
        assert subscriber.stdout.readline().strip() == "ready"
        with Publisher.from_config(broadcast_config(amqp_url, queue)) as publisher:
            publisher.send_batch([b"m0", b"m1", b"m2"])
        got = json.loads(subscriber.stdout.readline())
        assert subscriber.wait(30) == 0
    finally:
        subscriber.kill()
        delete_exchange(amqp_url, queue)
    assert got == [["m0", "m1", "m2"]] * 2


def test_our_subscribers_get_what_the_peer_s_subscribe_mode_publisher_sends(
    peer_python: str, tmp_path: Path, amqp_url: str, queue: str
) -> None:
    from tests.mq_bridge.endpoints.test_amqp import delete_exchange

    ours = broadcast_config(amqp_url, queue)
    subscribers = [Consumer.from_config(ours) for _ in range(2)]
    try:
        for subscriber in subscribers:
            subscriber.poll(max=1, timeout_ms=300)
        sent = [Message(f"m{n}".encode(), {"n": str(n)}, id=str(uuid.uuid4())) for n in range(3)]
        config = json.dumps(broadcast_config(peer_url(amqp_url), queue))
        peers.run_peer(
            peer_python, peers.CLIENT_SCRIPT, "publish", config, json.dumps(peers.as_wire(sent))
        )
        for subscriber in subscribers:
            got: list[Message] = []
            for _ in range(50):
                got += subscriber.poll(max=10, timeout_ms=200)
                if len(got) >= len(sent):
                    break
            subscriber.commit()
            assert [(m.payload, m.id) for m in got] == [(m.payload, m.id) for m in sent]
    finally:
        for subscriber in subscribers:
            subscriber.close()
        delete_exchange(amqp_url, queue)
