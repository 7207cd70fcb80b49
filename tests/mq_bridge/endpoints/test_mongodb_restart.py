"""A MongoDB restart under a running `mongodb` work-queue route (restart_broker("mongodb")).

NX-27017 runs with ``--db memory`` here, so a restart empties it: the collection, its
indexes and every document written before are gone (no client can keep what the server
itself dropped). What the endpoint promises, and this test holds it to: the route and the
publisher recover without being rebuilt (pymongo reconnects; while the server is away calls
raise the retriable `EndpointUnavailableError`), and every document whose `send` returned
after the restart is delivered. On a real MongoDB with durable storage, documents acked
before the restart survive it too: they are in the collection until a consumer's ack
deletes them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from functools import partial

import pytest

from mq_bridge import Message, Publisher, Route
from mq_bridge.errors import EndpointUnavailableError
from tests.brokers import require_broker, require_restartable, restart_broker, start_broker
from tests.mq_bridge.endpoints.test_mongodb import config, drop_collection
from tests.mq_bridge.helpers import read, retrying, unique

pytestmark = [pytest.mark.mongodb, pytest.mark.slow]


@pytest.fixture
def collection(mongodb_url: str) -> Iterator[str]:
    require_restartable("mongodb")  # skips (fails under CI=true) before any work
    name = f"test_restart_{uuid.uuid4().hex[:10]}"
    try:
        yield name
    finally:
        start_broker("mongodb")  # the server is left running, even after a failure
        require_broker("mongodb")
        drop_collection(mongodb_url, name)


def test_a_route_survives_a_restart_and_delivers_everything_sent_after_it(
    mongodb_url: str, collection: str
) -> None:
    sink = unique("restart-out")
    url = mongodb_url.rstrip("/") + "/?serverSelectionTimeoutMS=1000"
    queue = config(url, collection)
    route = Route.from_config(
        {
            "input": queue,
            "output": {"memory": {"topic": sink, "capacity": 0}},
            "reconnect_interval_ms": 100,
        }
    )
    with route, Publisher.from_config(queue) as publisher:
        publisher.send_batch([Message.from_json({"phase": "before", "n": n}) for n in range(20)])
        assert len(read(sink, 20, 10.0)) == 20
        restart_broker("mongodb", down_seconds=0.5)
        deadline = time.monotonic() + 30
        after = [Message.from_json({"phase": "after", "n": n}) for n in range(50)]
        for message in after[:25]:
            retrying(partial(publisher.send, message), deadline, 0.05, EndpointUnavailableError)
        publisher.send_batch(after[25:])
        got = read(sink, 50, 30.0)
        assert {m.id for m in after} <= {m.id for m in got}
        assert route.running  # the route never died
