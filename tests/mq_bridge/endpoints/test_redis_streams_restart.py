"""A Redis restart under a running `redis_streams` route (restart_broker("redis")).

Redis here keeps nothing on disk, so a restart empties it: the stream, its group and every
entry written before are gone. What the endpoint promises is that it recovers without the
route dying, and that every entry XADDed after the restart (every `send` that returned) is
delivered at least once.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from functools import partial

import pytest
import redis

from mq_bridge import Message, Publisher, Route
from mq_bridge.errors import EndpointUnavailableError
from tests.brokers import require_broker, restart_broker, start_broker
from tests.mq_bridge.helpers import read, retrying, unique

pytestmark = [pytest.mark.redis, pytest.mark.slow]


@pytest.fixture
def stream(redis_url: str) -> Iterator[str]:
    name = f"test-restart-{uuid.uuid4().hex[:10]}"
    try:
        yield name
    finally:
        start_broker("redis")  # the server is left running, even after a failure
        require_broker("redis")
        with redis.Redis.from_url(redis_url, socket_timeout=5) as client:
            client.delete(name)


def test_a_route_survives_a_restart_and_delivers_everything_sent_after_it(
    redis_url: str, stream: str
) -> None:
    sink = unique("restart-out")
    config = {
        "input": {"redis_streams": {"url": redis_url, "stream": stream}},
        "output": {"memory": {"topic": sink, "capacity": 0}},
        "reconnect_interval_ms": 100,
    }
    route = Route.from_config(config)
    with route, Publisher.from_config({"redis_streams": {"url": redis_url, "stream": stream}}) as p:
        p.send_batch([Message.from_json({"phase": "before", "n": n}) for n in range(20)])
        assert len(read(sink, 20, 10.0)) == 20
        restart_broker("redis", down_seconds=0.5)
        deadline = time.monotonic() + 30
        after = [Message.from_json({"phase": "after", "n": n}) for n in range(50)]
        for message in after:
            retrying(partial(p.send, message), deadline, 0.05, EndpointUnavailableError)
        got = read(sink, 50, 30.0)
        assert {m.id for m in after} <= {m.id for m in got}
        assert route.running  # the route never died
