"""The database restarts mid-stream: nothing a send committed or a route acked is lost.

A publisher inserts one row at a time into table A (retrying, with the same id, while the
server is away), a route moves A to table B, a consumer drains B; a third of the way in, the
server is restarted (`tests.brokers.restart_broker`, which starts it again before it
returns). Every message whose send returned must reach B at least once.
"""

from __future__ import annotations

import threading
import time
import uuid
from typing import Any

import pytest

from mq_bridge import Consumer, Message, Publisher, Route
from tests.brokers import require_broker, restart_broker
from tests.mq_bridge.endpoints.test_sqlx import drop_table, unique_table
from tests.mq_bridge.helpers import retrying

pytestmark = pytest.mark.slow

COUNT = 300
DEADLINE = 120.0


@pytest.mark.parametrize(
    "server", [pytest.param("postgres", marks=pytest.mark.postgres),
               pytest.param("mariadb", marks=pytest.mark.mysql)],
)  # fmt: skip
def test_nothing_committed_is_lost_across_a_server_restart(server: str) -> None:
    url = require_broker(server)
    source, target = unique_table("restart_a"), unique_table("restart_b")
    deadline = time.monotonic() + DEADLINE
    confirmed: list[str] = []
    received: set[str] = set()

    def config(table: str, **options: Any) -> dict[str, Any]:
        return {"sqlx": {"url": url, "table": table, "auto_create_table": True, **options}}

    try:
        route = Route.from_config(
            {"input": config(source, delete_after_read=True), "output": config(target),
             "batch_size": 20}
        ).with_handler(lambda message: message)  # fmt: skip
        publisher = Publisher.from_config(config(source))
        consumer = Consumer.from_config(config(target, delete_after_read=True))

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
            restart_broker(server)
            sender.join(DEADLINE)
            assert not sender.is_alive(), "the publisher did not finish"
            while not set(confirmed) <= received and time.monotonic() < deadline:
                batch = retrying(lambda: consumer.poll(max=100, timeout_ms=500), deadline)
                received.update(m.id or "" for m in batch)
                retrying(consumer.commit, deadline)
        missing = set(confirmed) - received
        assert not missing, f"{len(missing)} committed messages never arrived"
        consumer.close()
        publisher.close()
    finally:
        for table in (source, target):
            retrying(lambda table=table: drop_table(url, table), time.monotonic() + 60)


@pytest.mark.parametrize(
    "server", [pytest.param("postgres", marks=pytest.mark.postgres),
               pytest.param("mariadb", marks=pytest.mark.mysql)],
)  # fmt: skip
def test_a_shared_pool_that_outlived_a_restart_hands_out_live_connections(server: str) -> None:
    """A publisher keeps the process's pool for its URL open across a restart; an endpoint
    that connects afterwards takes a connection from that pool (idle ones are all dead)."""
    url = require_broker(server)
    table = unique_table("restart_pool")
    config = {"sqlx": {"url": url, "table": table, "auto_create_table": True,
                       "min_connections": 3}}  # fmt: skip
    try:
        with Publisher.from_config(config) as publisher:
            publisher.send(b"before")
            restart_broker(server)
            with Consumer.from_config(config) as consumer:  # connects on the old pool
                deadline = time.monotonic() + 30
                got = retrying(lambda: consumer.poll(max=5, timeout_ms=2000), deadline)
                assert [m.payload for m in got] == [b"before"]
                consumer.commit()
            retrying(lambda: publisher.send(b"after"), time.monotonic() + 30)
    finally:
        retrying(lambda: drop_table(url, table), time.monotonic() + 60)
