"""Every seed README sample that uses memory or response runs unchanged.

The samples come from `tests.seed_samples` (kept verbatim; ``tests/test_seed_samples.py``
checks them against the seed). Names a sample uses without defining (``config``,
``handle``, ``publisher``, ``cfg``, ``consumer``) come from a preamble over memory topics.
"""

from __future__ import annotations

from mq_bridge import Consumer, Publisher
from tests.mq_bridge.helpers import read, unique
from tests.seed_samples import CONSUMER_BLOCK, POLL_BATCH, RUNNING, SCHEMA, TYPED_CONFIG


def test_the_typed_config_sample_builds_a_route_that_answers_requests():
    namespace: dict = {}
    exec(TYPED_CONFIG, namespace)
    route = namespace["route"].with_handler(lambda m: {"ok": m.json()["order_id"]})
    with (
        route,
        Publisher.from_config({"memory": {"topic": "orders.in", "request_reply": True}}) as p,
    ):
        assert p.request_json({"order_id": 7}).json() == {"ok": 7}


def test_the_schema_sample_returns_the_json_schema():
    namespace: dict = {}
    exec(SCHEMA, namespace)
    assert namespace["schema"]["$schema"].startswith("https://json-schema.org/")


def test_the_running_sample_delivers_both_sends():
    source, sink = unique("orders"), unique("handled")
    handled = []

    def handle(message):
        handled.append(message.json())
        return message

    namespace = {
        "Route": __import__("mq_bridge").Route,
        "config": {
            "routes": {
                "orders_route": {
                    "input": {"memory": {"topic": source}},
                    "output": {"memory": {"topic": sink}},
                }
            }
        },
        "handle": handle,
        "publisher": Publisher.from_config({"memory": {"topic": source}}),
    }
    exec(RUNNING, namespace)
    assert len(read(sink, 2, 10.0)) + len(read(source, 2, 0.1)) == 2  # none lost
    assert all(doc == {"order_id": 42} for doc in handled)


def test_the_consumer_samples_poll_commit_and_ack():
    topic = unique("cfg")
    Publisher.from_config({"memory": {"topic": topic}}).send_batch([b"1", b"2"])
    namespace = {"Consumer": Consumer, "cfg": {"memory": {"topic": topic}}}
    exec(CONSUMER_BLOCK, namespace)
    assert [m.payload for m in namespace["batch"]] == [b"1", b"2"]
    Publisher.from_config({"memory": {"topic": topic}}).send(b"3")
    with Consumer.from_config({"memory": {"topic": topic}}) as consumer:
        namespace = {"consumer": consumer}
        exec(POLL_BATCH, namespace)
        assert [m.payload for m in namespace["messages"]] == [b"3"]
        assert consumer.poll(max=5, timeout_ms=10) == []  # acked, not redelivered
