"""A restart of the SQS server under a running `aws` route (restart_broker("sqs")).

moto keeps everything in memory, so a restart empties it: the queue itself and every
message in it are gone, which no client can undo. So the test plays a server that keeps
its queues: everything sent before the restart is consumed first, and the queue is created
again (same name, same URL) once the server is back. What the endpoint promises, and the
test checks: while the server is away or the queue missing, `send` raises a retriable
error (it never reports a message as sent that SQS does not have); the route survives,
reconnects, and every message whose `send` returned after the restart is delivered.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from functools import partial

import pytest

from mq_bridge import Message, Publisher, Route
from mq_bridge.errors import EndpointUnavailableError, is_retriable
from tests.brokers import require_broker, require_restartable, restart_broker, start_broker
from tests.mq_bridge.endpoints.test_aws import config, delete_queue, sqs_client
from tests.mq_bridge.helpers import read, retrying, unique

pytestmark = [pytest.mark.sqs, pytest.mark.slow]


@pytest.fixture
def queue_name(sqs_endpoint: str) -> Iterator[str]:
    require_restartable("sqs")  # skips (fails under CI=true) before any work
    name = f"test-restart-{uuid.uuid4().hex[:10]}"
    try:
        yield name
    finally:
        start_broker("sqs")  # the server is left running, even after a failure
        require_broker("sqs")
        url = f"{sqs_endpoint}/123456789012/{name}"
        delete_queue(sqs_endpoint, url)


def create_queue(endpoint: str, name: str) -> str:
    return str(sqs_client(endpoint).create_queue(QueueName=name)["QueueUrl"])


def test_a_route_survives_a_restart_and_delivers_everything_sent_after_it(
    sqs_endpoint: str, queue_name: str
) -> None:
    url = create_queue(sqs_endpoint, queue_name)
    sink = unique("aws-restart-out")
    route = Route.from_config(
        {
            "input": config(sqs_endpoint, queue_url=url, wait_time_seconds=1),
            "output": {"memory": {"topic": sink, "capacity": 0}},
            "reconnect_interval_ms": 100,
        }
    )
    with route, Publisher.from_config(config(sqs_endpoint, queue_url=url)) as publisher:
        publisher.send_batch([Message.from_json({"phase": "before", "n": n}) for n in range(20)])
        assert len(read(sink, 20, 20.0)) == 20

        restart_broker("sqs", down_seconds=0.5)
        with pytest.raises(EndpointUnavailableError) as caught:  # the queue went with it
            publisher.send(Message.from_json({"phase": "lost"}))
        assert is_retriable(caught.value)
        assert create_queue(sqs_endpoint, queue_name) == url  # a server that kept it

        deadline = time.monotonic() + 60
        after = [Message.from_json({"phase": "after", "n": n}) for n in range(50)]
        for message in after[:25]:
            retrying(partial(publisher.send, message), deadline, 0.1, EndpointUnavailableError)
        publisher.send_batch(after[25:])
        got = read(sink, 50, 60.0)
        assert {m.id for m in after} <= {m.id for m in got}
        assert route.running  # the route never died
