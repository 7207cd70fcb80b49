"""A NATS server restart in the middle of a route: every acknowledged message arrives.

A publisher keeps sending (retrying what the restart fails, as a route would) while a route
reads the stream into a memory topic; the server is restarted halfway. Every message whose
send returned must reach the memory topic at least once. Messages the route held when the
server went away come back after JetStream's ack wait (30 s), hence `slow`.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from mq_bridge import Consumer, Message, Publisher, Route
from mq_bridge.errors import is_retriable
from tests.brokers import restart_broker, start_broker
from tests.mq_bridge.endpoints.test_nats import SMALL, delete_stream, run_nats

COUNT = 400


def publish_all(publisher: Publisher, messages: list[Message], sent: list[str]) -> None:
    deadline = time.monotonic() + 60
    for message in messages:
        while True:
            try:
                publisher.send(message)
                sent.append(str(message.id))
                break
            except Exception as error:  # the restart: retry what is retriable, like a route
                if not is_retriable(error) or time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        time.sleep(0.002)


@pytest.mark.nats
@pytest.mark.slow
def test_a_server_restart_mid_stream_loses_nothing(nats_url: str) -> None:
    stream = f"restart-{uuid.uuid4().hex[:8]}"
    sink = f"restart-sink-{uuid.uuid4().hex[:8]}"
    source: dict[str, Any] = {"nats": {"url": nats_url, "subject": stream, "stream": stream}}
    source["nats"].update(SMALL)
    output = {"memory": {"topic": sink, "capacity": 0}}
    messages = [Message.from_json({"n": n}, id=uuid.uuid4()) for n in range(COUNT)]
    sent: list[str] = []
    try:
        route = Route.from_config(
            {"input": source, "output": output, "batch_size": 20, "reconnect_interval_ms": 200}
        )
        with Publisher.from_config(source) as publisher, route.with_handler(lambda m: m):
            sender = threading.Thread(target=publish_all, args=(publisher, messages, sent))
            sender.start()
            while len(sent) < COUNT // 2 and sender.is_alive():
                time.sleep(0.01)
            restart_broker("nats")
            sender.join(90)
            assert not sender.is_alive() and len(sent) == COUNT
            seen = drain_ids(sink, set(sent), timeout=75)
        assert set(sent) <= seen
    finally:
        start_broker("nats")  # whatever happened, leave the shared server running
        wait_for_jetstream(nats_url)  # so the tests after this one find it ready
        delete_stream(nats_url, stream)


def wait_for_jetstream(url: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            run_nats(url, lambda nc: nc.jetstream(timeout=2).account_info())
            return
        except Exception:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def drain_ids(topic: str, wanted: set[str], timeout: float) -> set[str]:
    seen: set[str] = set()
    deadline = time.monotonic() + timeout
    with Consumer.from_config({"memory": {"topic": topic, "capacity": 0}}) as consumer:
        while not wanted <= seen and time.monotonic() < deadline:
            seen.update(str(m.id) for m in consumer.poll(max=500, timeout_ms=200))
            consumer.commit()
    return seen
