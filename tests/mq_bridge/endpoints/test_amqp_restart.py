"""RabbitMQ restarts mid-stream: nothing a send confirmed or a route acked is lost.

A publisher sends one message at a time (retrying, with the same id, while the broker is
away), a route forwards queue A to queue B, a consumer drains B; halfway, RabbitMQ is
restarted (`tests.brokers.restart_broker`, which starts it again before it returns). Every
message whose send returned must reach B at least once.
"""

from __future__ import annotations

import threading
import time
import uuid

import pytest

from mq_bridge import Consumer, Message, Publisher, Route
from tests.brokers import restart_broker
from tests.mq_bridge.endpoints.test_amqp import delete_queue
from tests.mq_bridge.helpers import retrying

pytestmark = [pytest.mark.amqp, pytest.mark.slow]

COUNT = 400
DEADLINE = 90.0


def test_nothing_confirmed_is_lost_across_a_broker_restart(amqp_url: str) -> None:
    source, target = (f"test-amqp-restart-{uuid.uuid4().hex[:8]}" for _ in range(2))
    deadline = time.monotonic() + DEADLINE
    confirmed: list[str] = []
    received: set[str] = set()
    try:
        route = Route.from_config(
            {
                "input": {"amqp": {"url": amqp_url, "queue": source}},
                "output": {"amqp": {"url": amqp_url, "queue": target}},
                "batch_size": 20,
            }
        ).with_handler(lambda message: message)
        publisher = Publisher.from_config({"amqp": {"url": amqp_url, "queue": source}})
        consumer = Consumer.from_config({"amqp": {"url": amqp_url, "queue": target}})

        def publish() -> None:
            for i in range(COUNT):
                message = Message(b"m%d" % i, id=str(uuid.uuid4()))
                retrying(lambda message=message: publisher.send(message), deadline)
                confirmed.append(message.id or "")
                time.sleep(0.002)

        with route:
            sender = threading.Thread(target=publish, daemon=True)
            sender.start()
            while len(confirmed) < COUNT // 3 and sender.is_alive():
                time.sleep(0.01)
            restart_broker("amqp")
            sender.join(DEADLINE)
            assert not sender.is_alive(), "the publisher did not finish"
            while not set(confirmed) <= received and time.monotonic() < deadline:
                batch = retrying(lambda: consumer.poll(max=100, timeout_ms=500), deadline)
                received.update(m.id or "" for m in batch)
                retrying(consumer.commit, deadline)
        missing = set(confirmed) - received
        assert not missing, f"{len(missing)} confirmed messages never arrived"
        consumer.close()
        publisher.close()
    finally:
        for queue in (source, target):
            retrying(lambda queue=queue: delete_queue(amqp_url, queue), time.monotonic() + 30)
