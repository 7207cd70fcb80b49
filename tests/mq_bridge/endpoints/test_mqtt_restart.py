"""A Mosquitto restart mid-stream: every message arrives at least once, none acked is lost.

Mosquitto (``persistence true`` here) saves persistent sessions and their queued and
unacknowledged messages when it stops, so the consumer's session survives the restart and
gets again what it had not acknowledged; the publisher retries what was not acknowledged.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from mq_bridge import Consumer, Publisher
from mq_bridge.errors import EndpointUnavailableError
from mq_bridge.runtime.factory import build_input, new_context
from tests.brokers import is_reachable, restart_broker, start_broker

pytestmark = [pytest.mark.mqtt, pytest.mark.slow]

COUNT = 300


@pytest.fixture
def config(mqtt_address: str) -> Iterator[dict[str, Any]]:
    name = f"restart-{uuid.uuid4().hex[:10]}"
    made = {"mqtt": {"url": f"tcp://{mqtt_address}", "topic": f"t/{name}", "client_id": name}}
    yield made
    if not is_reachable("127.0.0.1", 1883):  # leave the shared server running, whatever failed
        start_broker("mosquitto")
    gone = {"mqtt": {**made["mqtt"], "clean_session": True}}
    source = build_input(gone, new_context("cleanup"))
    source.connect()
    source.close()


def send_with_retry(publisher: Publisher, payload: bytes, deadline: float) -> None:
    while True:
        try:
            publisher.send(payload)
            return
        except EndpointUnavailableError:  # the broker is restarting: the route would retry
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def test_restart_mid_stream_loses_nothing_acknowledged(config: dict[str, Any]) -> None:
    source = build_input(config, new_context("test"))
    source.connect()  # the persistent session exists (and queues) before the first send
    source.close()
    seen: list[bytes] = []
    stop = threading.Event()

    def consume() -> None:
        with Consumer.from_config(config) as consumer:
            while not stop.is_set():
                batch = consumer.poll(max=50, timeout_ms=100)
                seen.extend(m.payload for m in batch)
                time.sleep(0.005)  # a slow consumer: messages are in flight at the restart
                consumer.commit()

    reader = threading.Thread(target=consume)
    reader.start()
    try:
        deadline = time.monotonic() + 60
        with Publisher.from_config(config) as publisher:
            for n in range(COUNT):
                if n == COUNT // 3:
                    restart_broker("mosquitto")
                send_with_retry(publisher, str(n).encode(), deadline)
        expected = {str(n).encode() for n in range(COUNT)}
        while not expected <= set(seen) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        stop.set()
        reader.join(30)
    assert not reader.is_alive()
    assert expected - set(seen) == set()
