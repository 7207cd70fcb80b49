"""Interop with the seed's package, mq-bridge-py 0.3.2, on one table.

The peer runs in its own venv (scripts/peer-venv.sh mq-bridge-py), in a subprocess. It
creates its table (id, payload, locked_until, created_at) that we read and write as it is;
it reads ours (which adds message_id and metadata); and while we hold a claim, its consumer
skips those rows, because both sides use the same ``locked_until`` lease.
"""

from __future__ import annotations

import json
from typing import Any

import pytest

from mq_bridge import Consumer, Publisher
from tests import peers
from tests.mq_bridge.endpoints.test_sqlx import db, drop_table

__all__ = ["db", "drop_table"]

pytestmark = pytest.mark.slow

PEER_SCRIPT = """
import json, sys
from mq_bridge import Consumer, Publisher
mode, url, table = sys.argv[1:4]
if mode == "publish":
    publisher = Publisher.from_config(
        {"sqlx": {"url": url, "table": table, "auto_create_table": True}})
    for payload in sys.argv[4:]:
        publisher.send(payload.encode())
    print(json.dumps([]))
else:
    consumer = Consumer.from_config(
        {"sqlx": {"url": url, "table": table, "delete_after_read": True}})
    got = []
    for _ in range(10):
        got += [m.payload.decode() for m in consumer.poll(max=100, timeout_ms=300)]
    consumer.commit()
    print(json.dumps(got))
"""


@pytest.fixture(scope="module")
def peer_python() -> str:
    return peers.peer_python("mq-bridge-py")


def run_peer(python: str, mode: str, url: str, table: str, *payloads: str) -> Any:
    if url.startswith("sqlite") and "?" not in url:
        url += "?mode=rwc"  # sqlx opens a missing SQLite file only with mode=rwc
    output = peers.run_peer(python, PEER_SCRIPT, mode, url, table, *payloads)
    return json.loads(output.strip().splitlines()[-1])


def test_we_read_and_write_the_table_the_peer_created(db, peer_python):
    url, table = db
    run_peer(peer_python, "publish", url, table, "p1", "p2")
    config = {"sqlx": {"url": url, "table": table, "delete_after_read": True}}
    with Publisher.from_config(config) as publisher:
        publisher.send(b"ours")
    with Consumer.from_config(config) as consumer:
        got = consumer.poll(max=10, timeout_ms=5000)
        assert [m.payload for m in got] == [b"p1", b"p2", b"ours"]
        consumer.commit()
    assert run_peer(peer_python, "consume", url, table) == []


def test_the_peer_reads_the_table_we_created(db, peer_python):
    url, table = db
    config = {"sqlx": {"url": url, "table": table, "auto_create_table": True}}
    with Publisher.from_config(config) as publisher:
        publisher.send_batch([b"a", b"b", b"c"])
    assert run_peer(peer_python, "consume", url, table) == ["a", "b", "c"]


def test_the_peer_skips_rows_we_have_claimed(db, peer_python):
    url, table = db
    config = {"sqlx": {"url": url, "table": table, "auto_create_table": True}}
    with Publisher.from_config(config) as publisher:
        publisher.send_batch([b"a", b"b", b"c", b"d", b"e", b"f"])
    with Consumer.from_config(config) as consumer:
        held = consumer.poll(max=2, timeout_ms=5000)
        assert [m.payload for m in held] == [b"a", b"b"]
        # a full batch: on a server, the next one (c, d) is claimed ahead, leased to us too
        ours = ["a", "b"] if url.startswith("sqlite") else ["a", "b", "c", "d"]
        assert run_peer(peer_python, "consume", url, table) == ["c", "d", "e", "f"][len(ours) - 2 :]
        consumer.nack()  # ready again at once (the rows claimed ahead as well)
    assert run_peer(peer_python, "consume", url, table) == ours
