"""Interop with the peer, mq-bridge 1.2.0 (its own venv), through the local Mosquitto.

The peer runs a small script in a subprocess: it publishes to our consumer, and consumes
what our publisher sent, on MQTT v5 (user properties) and v3 (the JSON envelope).
"""

from __future__ import annotations

import json
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from mq_bridge import Consumer, Message, Publisher
from mq_bridge.runtime.factory import build_input, new_context
from tests import peers

pytestmark = pytest.mark.mqtt

ROOT = Path(__file__).resolve().parents[3]

SENT = [
    Message(b'{"order": 1}', {"kind": "order.created", "tenant": "t1"}),
    Message(b"\xff\x00binary", {"kind": "blob"}),
    Message("ünïcode text".encode(), {"kind": "text"}),
]


@pytest.fixture(scope="module")
def peer_python() -> str:
    return peers.peer_python("mq-bridge")


@pytest.fixture
def config(mqtt_address: str, request: pytest.FixtureRequest) -> Any:
    name = f"interop-{uuid.uuid4().hex[:10]}"
    made = {"mqtt": {"url": f"tcp://{mqtt_address}", "topic": f"t/{name}", "client_id": name}}
    yield made
    gone = {"mqtt": {**made["mqtt"], "clean_session": True}}
    source = build_input(gone, new_context("cleanup"))
    source.connect()
    source.close()


def open_session(config: dict[str, Any]) -> None:
    source = build_input(config, new_context("interop"))
    source.connect()
    source.close()


@pytest.mark.parametrize("protocol", ["v5", "v3"])
def test_the_peer_publishes_and_we_consume(
    peer_python: str, tmp_path: Path, config: dict[str, Any], protocol: str
) -> None:
    config["mqtt"]["protocol"] = protocol
    open_session(config)
    peer_config = {"mqtt": {k: v for k, v in config["mqtt"].items() if k != "client_id"}}
    peers.run_peer(
        peer_python,
        peers.CLIENT_SCRIPT,
        "publish",
        json.dumps(peer_config),
        json.dumps(peers.as_wire(SENT)),
    )
    with Consumer.from_config(config) as consumer:
        got: list[Message] = []
        for _ in range(50):
            got += consumer.poll(max=10, timeout_ms=200)
            consumer.commit()
            if len(got) >= len(SENT):
                break
    assert peers.as_wire(got) == peers.as_wire(SENT)


@pytest.mark.parametrize("protocol", ["v5", "v3"])
def test_we_publish_and_the_peer_consumes(
    peer_python: str, tmp_path: Path, config: dict[str, Any], protocol: str
) -> None:
    config["mqtt"]["protocol"] = protocol
    open_session(config)  # the peer resumes this session (same client_id, not clean)
    with Publisher.from_config(config) as publisher:
        publisher.send_batch(SENT)
    output = peers.run_peer(
        peer_python, peers.CLIENT_SCRIPT, "consume", json.dumps(config), str(len(SENT))
    )
    got = json.loads(output)
    for item in got:
        # mq-bridge 1.2.0 takes the id from the v5 property and *also* leaves the property
        # in the metadata (its own messages come back the same way): the peer's quirk.
        item["metadata"].pop("mq_bridge.message_id", None)
    assert got == peers.as_wire(SENT)


if __name__ == "__main__":  # pragma: no cover - the script is run by the peer's python
    sys.exit("run with pytest")
