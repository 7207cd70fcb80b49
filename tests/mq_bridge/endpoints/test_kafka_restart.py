"""A Kafka-protocol server restart under a running `kafka` route (restart_broker("kafka")).

What is possible here: Tansu runs with memory storage (shared/BROKERS.md), so a restart
empties it — the topics, every record written before, the group and its committed offsets
are gone with it. No client can keep records a server forgets. What the endpoint promises,
and this test checks:

- the route survives: while the broker is away it sees retriable errors, reconnects, and
  carries on (it never dies);
- nothing acknowledged is lost: every `send` that returned after the restart (a delivery
  report from the new server) is delivered to the route's output, at least once;
- the producer recovers from what the restart does to an idempotent producer (the server
  forgets its producer id) and the input from the lost group (it joins anew, from the start
  of the recreated topic).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from functools import partial

import pytest

from mq_bridge import Message, Publisher, Route
from mq_bridge.errors import MQBridgeError
from tests.brokers import require_broker, require_restartable, restart_broker, start_broker
from tests.mq_bridge.endpoints.test_kafka import delete_topic, kafka_config
from tests.mq_bridge.helpers import read, retrying, unique

pytestmark = [pytest.mark.kafka, pytest.mark.slow]


@pytest.fixture
def topic(kafka_bootstrap: str) -> Iterator[str]:
    require_restartable("kafka")  # skips (fails under CI=true) before any work
    name = f"test-restart-{uuid.uuid4().hex[:10]}"
    try:
        yield name
    finally:
        start_broker("kafka")  # the server is left running, even after a failure
        require_broker("kafka")
        delete_topic(kafka_bootstrap, name)


def test_a_route_survives_a_restart_and_delivers_everything_acknowledged_after_it(
    kafka_bootstrap: str, topic: str
) -> None:
    sink = unique("kafka-restart-out")
    config = {
        "input": kafka_config(kafka_bootstrap, topic, group_id=f"{topic}-group", partitions=3),
        "output": {"memory": {"topic": sink, "capacity": 0}},
        "reconnect_interval_ms": 200,
    }
    route = Route.from_config(config)
    publisher_config = kafka_config(kafka_bootstrap, topic, partitions=3)
    with route, Publisher.from_config(publisher_config) as publisher:
        before = [Message.from_json({"phase": "before", "n": n}) for n in range(20)]
        publisher.send_batch(before)
        assert len(read(sink, 20, 30.0)) == 20
        restart_broker("kafka", down_seconds=1.0)
        deadline = time.monotonic() + 60
        after = [Message.from_json({"phase": "after", "n": n}) for n in range(50)]
        for message in after:
            retrying(partial(publisher.send, message), deadline, 0.1, MQBridgeError)
        got = read(sink, 50, 60.0)
        missing = {m.id for m in after} - {m.id for m in got}
        assert not missing, f"{len(missing)} acknowledged record(s) never arrived"
        assert route.running  # the route never died
